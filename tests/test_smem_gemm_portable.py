"""The shared-memory GEMM (codegen/opt_smem.py) is capabilities, not NVIDIA code: a renderer without asynchronous
copies or matrix loads gets synchronous LDS staging (plain copies between two barriers) with fragments gathered by
its own TensorCore layouts. AMD's HIP renderer declares `shared_staging` (LDS, s_barrier): RDNA3 WMMA (wave32, A/B
replicated across lanes) through LDS runs bit-exact in the emulator for a matmul and an implicit-GEMM convolution with
tails, and the same programs compile for gfx1100 with clang's amdgcn target. Metal declares it too (threadgroup
memory, simdgroup 8x8 fragments, 8-byte copies: its vectors have 4 lanes): EMU+METAL runs both bit-exact and the MSL
passes mslcheck (structure, and clang against the MSL shim)."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.codegen import get_program
from tinycore.emulator import EmulatedRenderer, serialize
from tinycore.emulator.interp import Interpreter
from tinycore.uop import Ops

ARCH = "gfx1100"

def _setup():
  pytest.importorskip("tinycore_amd")
  from tinycore_amd.renderer_hip import HIPRenderer
  from tinycore_amd.emulator import model
  from tinycore.helpers import DEV
  DEV.value = f"EMU+AMD::{ARCH}"
  base = HIPRenderer(ARCH)
  assert base.shared_staging and not base.async_copy and not base.matrix_load
  return base, model("AMD", ARCH)

def _run(ast, bufs):
  base, m = _setup()
  p = get_program(ast, EmulatedRenderer(base, m))
  assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops) and any(u.op is Ops.WMMA for u in p.uops)
  # two barriers a k step; after the loop, where the output allows 16-byte stores, 2 per pass of the C tile (c_tile.py)
  loop_end = max(i for i, u in enumerate(p.uops) if u.op is Ops.END)
  assert sum(u.op is Ops.BARRIER for u in p.uops[:loop_end]) == 2
  assert not any(u.op is Ops.STORE and u.arg is not None for u in p.uops)
  name, nodes = serialize.decode(serialize.decode_bytes(p.src))
  Interpreter(nodes, m, name).run(tuple(bufs), p.global_size, p.local_size, ())
  return base

@pytest.mark.needs_device
def test_rdna3_wmma_through_lds_in_the_emulator(registry):
  rng = np.random.default_rng(0)
  a, b = rng.integers(-3, 4, (128, 64)).astype(np.float16), rng.integers(-3, 4, (64, 128)).astype(np.float16)
  out = np.zeros((128, 128), np.float16)
  _run((Tensor.empty(128, 64, dtype=dtypes.half) @ Tensor.empty(64, 128, dtype=dtypes.half)).schedule()[-1].ast, (out, a, b))
  np.testing.assert_array_equal(out.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32))

@pytest.mark.needs_device
def test_rdna3_implicit_gemm_conv_with_tails(registry):
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(1)
  x, w = rng.integers(-3, 4, (2, 17, 7, 7)).astype(np.float16), rng.integers(-3, 4, (24, 17, 3, 3)).astype(np.float16)
  out = np.zeros((2, 24, 5, 5), np.float16)
  _run(Tensor.empty(2, 17, 7, 7, dtype=dtypes.half).conv2d(Tensor.empty(24, 17, 3, 3, dtype=dtypes.half)).schedule()[-1].ast, (out, x, w))
  ref = torch.nn.functional.conv2d(torch.tensor(x.astype(np.float32)), torch.tensor(w.astype(np.float32))).numpy()
  np.testing.assert_array_equal(out.astype(np.float32), ref)

def test_hip_lds_gemm_compiles_for_rdna3(registry):
  pytest.importorskip("tinycore_amd")
  from tinycore_amd.compiler import find_clang, HIPCompiler
  if find_clang(ARCH) is None: pytest.skip(f"no clang with the amdgcn target for {ARCH}")
  base, _ = _setup()
  for ast in ((Tensor.empty(256, 128, dtype=dtypes.half) @ Tensor.empty(128, 256, dtype=dtypes.half)).schedule()[-1].ast,
              Tensor.empty(2, 17, 7, 7, dtype=dtypes.half).conv2d(Tensor.empty(24, 17, 3, 3, dtype=dtypes.half)).schedule()[-1].ast):
    p = get_program(ast, base)
    assert "__attribute__((shared, aligned(16)))" in p.src and "__builtin_amdgcn_s_barrier()" in p.src and "wmma" in p.src
    assert len(HIPCompiler(ARCH).compile(p.src)) > 0

@pytest.mark.needs_device
def test_metal_threadgroup_staging_in_the_emulator_and_msl(registry):
  pytest.importorskip("tinycore_metal")
  torch = pytest.importorskip("torch")
  from tinycore_metal.renderer_metal import MetalRenderer
  from tinycore_metal.mslcheck import structure, clang_check, find_clang
  from tinycore.helpers import DEV
  DEV.value = "EMU+METAL"
  assert MetalRenderer.shared_staging and MetalRenderer.copy_bytes == 8
  rng = np.random.default_rng(2)
  x, w = rng.integers(-3, 4, (2, 17, 7, 7)).astype(np.float16), rng.integers(-3, 4, (24, 17, 3, 3)).astype(np.float16)
  a, b = rng.integers(-3, 4, (46, 40)).astype(np.float16), rng.integers(-3, 4, (40, 24)).astype(np.float16)
  conv_ref = torch.nn.functional.conv2d(torch.tensor(x.astype(np.float32)), torch.tensor(w.astype(np.float32))).numpy()
  for out, ref in ((Tensor(x).conv2d(Tensor(w)), conv_ref), (Tensor(a) @ Tensor(b), a.astype(np.float32) @ b.astype(np.float32))):
    p = get_program(out.schedule()[-1].ast, MetalRenderer())
    assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops) and any(u.op is Ops.WMMA for u in p.uops)
    assert "threadgroup_barrier(mem_flags::mem_threadgroup);" in p.src and structure(p.src) == []
    if find_clang() is not None: assert clang_check(p.src) == ""
    np.testing.assert_array_equal(out.numpy().astype(np.float32), ref)
