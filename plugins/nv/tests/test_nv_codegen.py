"""Compile-only checks of both NV renderers (CUDA C through NVRTC to PTX and cubin; PTX through ptxas) and numeric
checks through DEV=EMU+NV. Each part skips, with the reason, where NVRTC, ptxas or the emulator is missing."""
import numpy as np
import pytest
from tinycore.testing.kernel_cases import kernel_cases
from tinycore import Tensor, dtypes
from tinycore.compiler import CompileError
from tinycore.codegen import get_program
from tinycore_nv.renderer_cuda import CUDARenderer, parse_arch
from tinycore_nv.renderer_ptx import PTXRenderer
from tinycore_nv.nvrtc import find_nvrtc, nvrtc_compile, find_cuda_include
from tinycore_nv.ptxas import find_ptxas, ptxas

DEV = "EMU+NV"   # the inputs' device: scheduling needs no CPU backend in the per-plugin venv

@pytest.fixture(autouse=True)
def _emu_default(registry):
  # Tensor.empty(device=...) still asks for Device.DEFAULT, which no device answers in the core+nv venv
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = DEV   # the registry fixture restores it
CASES = kernel_cases(DEV)
def ast(case: str): return CASES[case]().schedule()[-1].ast

needs_nvrtc = pytest.mark.skipif(find_nvrtc() is None, reason="libnvrtc not found (no CUDA toolkit, no nvidia-cuda-nvrtc wheel)")
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (no CUDA toolkit)")

@needs_nvrtc
@pytest.mark.parametrize("case", CASES)
def test_cuda_nvrtc_ptx_and_cubin(case):
  p = get_program(ast(case), CUDARenderer("sm_90"))
  assert 'extern "C" __global__' in p.src and p.local_size[0] >= 1
  ptx = nvrtc_compile(p.src, "sm_90", cubin=False, include=find_cuda_include())
  assert f".entry {p.name}" in ptx.decode(errors="replace")
  cubin = nvrtc_compile(p.src, "sm_90", cubin=True, include=find_cuda_include())
  assert cubin[:4] == b"\x7fELF"

@needs_nvrtc
@pytest.mark.parametrize("case", ["half", "bf16", "hmatmul", "bitcast"])
def test_cuda_emulated_half_without_headers(case):
  """Without the toolkit's cuda_fp16.h/cuda_bf16.h the renderer emulates half/bf16; that must compile too, for sm_80."""
  r = CUDARenderer("sm_80", native_half=False)
  p = get_program(ast(case), r)
  assert "cuda_fp16.h" not in p.src
  assert nvrtc_compile(p.src, "sm_80", cubin=True)[:4] == b"\x7fELF"

@needs_ptxas
@pytest.mark.parametrize("case", CASES)
def test_ptx_renderer_assembles(case):
  p = get_program(ast(case), PTXRenderer("sm_90"))
  assert p.src.startswith(".version") and f".entry {p.name}" in p.src
  assert ptxas(p.src, "sm_90")[:4] == b"\x7fELF"

def test_ptx_fp8_needs_sm89():
  with pytest.raises(NotImplementedError, match="sm_89"): get_program(ast("fp8"), PTXRenderer("sm_80"))

@needs_nvrtc
def test_nvrtc_compile_error_shows_source_and_log():
  with pytest.raises(CompileError) as e: CUDARenderer("sm_90").compiler.compile('extern "C" __global__ void k() { undefined_thing(); }')
  assert "1 | extern" in str(e.value) and "undefined_thing" in e.value.log

@needs_ptxas
def test_ptxas_error_shows_source_and_log():
  with pytest.raises(CompileError) as e: ptxas(".version 7.8\n.target sm_90\n.address_size 64\nbogus;\n", "sm_90")
  assert "4 | bogus;" in str(e.value) and e.value.log

def test_arch_parsing():
  assert parse_arch(None) == "sm_80" and parse_arch("90") == "sm_90" and parse_arch("SM_89") == "sm_89" and parse_arch("sm_90a") == "sm_90a"
  with pytest.raises(ValueError): parse_arch("gfx1100")

# ---- numeric, through the shared emulator
try:
  import tinycore.emulator   # noqa: F401
  _emu = None
except ImportError: _emu = "this tinycore has no shared emulator (tinycore.emulator)"
needs_emu = pytest.mark.skipif(_emu is not None, reason=_emu or "")

@needs_emu
@pytest.mark.parametrize("dev", ["EMU+NV", "EMU+NV:PTX:sm_90"])
def test_emu_numeric(registry, dev):
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((33, 17)).astype(np.float32), rng.standard_normal((17, 9)).astype(np.float32)
  ta, tb = Tensor(a, device=dev), Tensor(b, device=dev)
  np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta.pad(((1, 1), (0, 2))).permute(1, 0).sum(0).numpy(), np.pad(a, ((1, 1), (0, 2))).T.sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose((ta.cast(dtypes.float16) * 2).float().numpy(), (a.astype(np.float16) * 2).astype(np.float32), rtol=1e-3)
  np.testing.assert_allclose(ta.max(1).numpy(), a.max(1))
  i = Tensor(np.arange(-8, 8, dtype=np.int32), device=dev)
  np.testing.assert_equal(((i * 3) // 2).numpy(), (np.arange(-8, 8, dtype=np.int32) * 3) // 2)   # floor division, like Python

@needs_emu
def test_emu_renderer_follows_dev(registry):
  from tinycore.device import Device
  d = Device["EMU+NV:CUDA:sm_90"]
  assert d.renderer.arch == "sm_90" and d.renderer.has_local and d.renderer.model.warp_size == 32
  assert Device["EMU+NV:PTX"].renderer.base.name == "PTX"

def test_mma_fragments_follow_the_ptx_isa():
  """Spot checks from the PTX ISA's figures for mma.m16n8k16 (f16/bf16): the renderers' fragment functions and the
  emulator's tables come from the same functions, so these points pin both to the documented layout."""
  from tinycore_nv.tensor_cores import frag_a, frag_b, frag_c, layouts, tensor_cores
  # lane 0 holds a0,a1 = (0,0),(0,1); a2,a3 = (8,0),(8,1); a4..a7 = (0,8),(0,9),(8,8),(8,9)
  assert [frag_a(0, i) for i in range(8)] == [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
  # lane 5: groupID 1, threadID_in_group 1
  assert [frag_a(5, i) for i in range(2)] == [(1, 2), (1, 3)] and [frag_b(5, i) for i in range(4)] == [(2, 1), (3, 1), (10, 1), (11, 1)]
  assert [frag_c(31, i) for i in range(4)] == [(7, 6), (7, 7), (15, 6), (15, 7)]
  lays = layouts("sm_90")
  assert [t.name for t in lays] == [t.name for t in tensor_cores("sm_90")] == ["mma_m16n8k16_half_float", "mma_m16n8k16_bfloat16_float",
                                                                              "mma_m16n8k8_tf32_float", "mma_m16n8k32_fp8e4m3_float",
                                                                              "mma_m16n8k32_fp8e5m2_float"]
  assert [t.name for t in layouts("sm_80")] == [t.name for t in lays][:3]   # fp8 mma from sm_89
  # m16n8k32 8-bit, lane 5: a0..a3 = (1,4)..(1,7), a4 = (9,4), a8 = (1,20); b0..b3 = (4,1)..(7,1), b4 = (20,1)
  from tinycore_nv.tensor_cores import frag_a_fp8, frag_b_fp8
  assert [frag_a_fp8(5, i) for i in (0, 1, 2, 3, 4, 8, 15)] == [(1, 4), (1, 5), (1, 6), (1, 7), (9, 4), (1, 20), (9, 23)]
  assert [frag_b_fp8(5, i) for i in (0, 3, 4, 7)] == [(4, 1), (7, 1), (20, 1), (23, 1)]
  # m16n8k8 .tf32, lane 5 (groupID 1, threadID_in_group 1): a0..a3 = (1,1),(9,1),(1,5),(9,5); b0,b1 = (1,1),(5,1)
  from tinycore_nv.tensor_cores import frag_a_tf32, frag_b_tf32
  assert [frag_a_tf32(5, i) for i in range(4)] == [(1, 1), (9, 1), (1, 5), (9, 5)] and [frag_b_tf32(5, i) for i in range(2)] == [(1, 1), (5, 1)]
  assert lays[0].a[5][:2] == ((1, 2), (1, 3)) and layouts("sm_75") == () and tensor_cores("sm_75") == []
