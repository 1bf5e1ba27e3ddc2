"""Compile-only checks of both AMD renderers (LLVM IR through llvmlite, HIP C++ through clang) down to HSA code
objects read back from their ELF notes, and numeric checks through DEV=EMU+AMD. Each part skips, with the reason,
where llvmlite, a clang with the amdgcn target for that arch, or the emulator is missing."""
import numpy as np
import pytest
from tinycore.testing.kernel_cases import kernel_cases
from tinycore import Tensor, dtypes
from tinycore.compiler import CompileError
from tinycore.codegen import get_program
from tinycore.uop import Ops
from tinycore_amd.arch import ARCHS, parse_arch
from tinycore_amd.codeobject import read, unpackb
from tinycore_amd.compiler import find_clang, find_lld
from tinycore_amd.renderer_hip import HIPRenderer
from tinycore_amd.renderer_llvm import AMDLLVMRenderer

DEV = "EMU+AMD"   # the inputs' device: scheduling needs no CPU backend in the per-plugin venv

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = DEV   # the registry fixture restores it
CASES = kernel_cases(DEV, skip=("fp8",))
FP8 = kernel_cases(DEV, skip=tuple(k for k in CASES))   # HIP only: the LLVM renderer has no fp8
def ast(case: str): return {**CASES, **FP8}[case]().schedule()[-1].ast

def check_code_object(lib: bytes, p, arch: str):
  co = read(lib)
  assert co.arch == arch and p.name in co.kernels and p.name + ".kd" in co.symbols
  k = co.kernels[p.name]
  # LDS: exactly the program's shared panels (HIP stages tensor-core GEMMs through LDS, codegen/opt_smem.py), else none
  lds = sum(u.dtype.size * u.dtype.base.itemsize for u in p.uops if u.op is Ops.DEFINE_LOCAL)
  assert k.kernarg_size >= 8 * p.n_bufs + 4 * len(p.vars) and k.group_segment_size == lds
  assert k.wavefront_size == parse_arch(arch).wave
  assert [a[".value_kind"] for a in k.args[:p.n_bufs]] == ["global_buffer"] * p.n_bufs
  assert co.linked == (find_lld() is not None)
  return co

try: import llvmlite.binding  # noqa: F401
except ImportError: llvmlite = None
needs_llvmlite = pytest.mark.skipif(llvmlite is None, reason="llvmlite not installed")

@needs_llvmlite
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
@pytest.mark.parametrize("case", CASES)
def test_llvm_code_object(case, arch):
  r = AMDLLVMRenderer(arch)
  p = get_program(ast(case), r)
  assert "amdgpu_kernel" in p.src and "addrspace(1)" in p.src
  check_code_object(r.compiler.compile(p.src), p, arch)

@needs_llvmlite
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_llvm_every_arch_and_wave(arch):
  """The ELF's machine flags name the arch asked for, and CDNA kernels are wave64."""
  r = AMDLLVMRenderer(arch)
  p = get_program(ast("sum"), r)
  check_code_object(r.compiler.compile(p.src), p, arch)

def test_llvm_fp8_says_use_hip():
  with pytest.raises(NotImplementedError, match="AMD:HIP"): get_program(ast("fp8"), AMDLLVMRenderer())

HIP_ARCHS = [a for a in ("gfx1100", "gfx1030", "gfx942", "gfx1201") if find_clang(a)]
@pytest.mark.skipif(not HIP_ARCHS,
                    reason="no clang with the amdgcn target (Debian: apt-get install clang-19 lld-19; clang 14 has no gfx1100, clang 16 no gfx1201)")
@pytest.mark.parametrize("case", [*CASES, *FP8])
def test_hip_code_object(case):
  arch = HIP_ARCHS[0]   # the newest arch this machine's clang knows, gfx1100 with clang >= 16
  r = HIPRenderer(arch)
  p = get_program(ast(case), r)
  assert 'extern "C" __global__' in p.src and ("__builtin_amdgcn_workgroup_id_x" in p.src or tuple(p.global_size) == (1, 1, 1))
  check_code_object(r.compiler.compile(p.src), p, arch)

@pytest.mark.skipif(len(HIP_ARCHS) < 2, reason="clang knows fewer than two of gfx1100/gfx1030/gfx942/gfx1201")
@pytest.mark.parametrize("arch", HIP_ARCHS)
def test_hip_archs(arch):
  r = HIPRenderer(arch)
  p = get_program(ast("hmatmul"), r)
  check_code_object(r.compiler.compile(p.src), p, arch)

@pytest.mark.skipif(not HIP_ARCHS, reason="no clang with the amdgcn target")
def test_hip_compile_error_shows_source_and_log():
  with pytest.raises(CompileError) as e:
    HIPRenderer(HIP_ARCHS[0]).compiler.compile('extern "C" __attribute__((global)) void k() { undefined_thing(); }')
  assert "1 | extern" in str(e.value) and "undefined_thing" in e.value.log

@needs_llvmlite
def test_llvm_compile_error_shows_source_and_log():
  with pytest.raises(CompileError) as e: AMDLLVMRenderer().compiler.compile("define amdgpu_kernel void @k() {\n  bogus\n}\n")
  assert "2 |   bogus" in str(e.value) and e.value.log

def test_arch_parsing():
  assert parse_arch(None).name == "gfx1100" and parse_arch("1201").wave == 32 and parse_arch("GFX942").wave == 64
  assert parse_arch("gfx942:sramecc+:xnack-").name == "gfx942"
  with pytest.raises(ValueError, match="unknown arch"): parse_arch("sm_90")

def test_msgpack_reader():
  assert unpackb(b"\x83\xa1a\x01\xa1b\x92\xc3\xc0\xa1c\xcd\x01\x00")[0] == {"a": 1, "b": [True, None], "c": 256}
  assert unpackb(b"\xd9\x03abc")[0] == "abc" and unpackb(b"\xff")[0] == -1 and unpackb(b"\xcb" + np.float64(1.5).tobytes()[::-1])[0] == 1.5
  assert unpackb(b"\xdc\x00\x02\x01\x02")[0] == [1, 2] and unpackb(b"\xc4\x02hi")[0] == b"hi"

# ---- numeric, through the shared emulator
try:
  import tinycore.emulator   # noqa: F401
  _emu = None
except ImportError: _emu = "this tinycore has no shared emulator (tinycore.emulator)"
needs_emu = pytest.mark.skipif(_emu is not None, reason=_emu or "")

@needs_emu
@pytest.mark.parametrize("dev", ["EMU+AMD", "EMU+AMD:HIP", "EMU+AMD::gfx942"])
def test_emu_numeric(registry, dev):
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((33, 17)).astype(np.float32), rng.standard_normal((17, 9)).astype(np.float32)
  ta, tb = Tensor(a, device=dev), Tensor(b, device=dev)
  np.testing.assert_allclose((ta * 2 + tb.sum()).numpy(), a * 2 + b.sum(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta.pad(((1, 1), (0, 2))).permute(1, 0).sum(0).numpy(), np.pad(a, ((1, 1), (0, 2))).T.sum(0), rtol=1e-5, atol=1e-5)
  h = ta.cast(dtypes.float16)
  np.testing.assert_allclose((h * 2 + 1).float().numpy(), (a.astype(np.float16) * 2 + 1).astype(np.float32), rtol=1e-3)
  np.testing.assert_allclose((h @ tb.cast(dtypes.float16)).float().numpy(),
                             a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32), rtol=2e-2, atol=2e-2)
  np.testing.assert_allclose(ta.max(1).numpy(), a.max(1))
  i = Tensor(np.arange(-8, 8, dtype=np.int32), device=dev)
  np.testing.assert_equal(((i * 3) // 2).numpy(), (np.arange(-8, 8, dtype=np.int32) * 3) // 2)

@needs_emu
def test_emu_renderer_and_model_follow_dev(registry):
  from tinycore.device import Device
  d = Device["EMU+AMD:HIP:gfx1201"]
  assert d.renderer.arch == "gfx1201" and d.renderer.base.name == "HIP" and d.renderer.model.warp_size == 32
  c = Device["EMU+AMD::gfx942"]
  assert c.renderer.base.name == "LLVM" and c.renderer.model.warp_size == 64 and c.renderer.model.local_mem == 64 * 1024
  assert [t.name for t in c.renderer.model.tensor_cores][0].startswith("mfma")

@needs_emu
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
def test_emu_wmma_layouts(arch):
  """One WMMA UOp per warp: lanes gather fragments through index tables built from the arch's layout; D must be A@B+C."""
  from tinycore.uop import UOp, Ops
  from tinycore.emulator import EmulatedRenderer, EmulatorProgram
  from tinycore_amd.emulator import model
  m = model("AMD", arch)
  tc = m.tensor_cores[0]
  g = lambda n, dt: UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), n)
  ld = lambda buf, idx, dt: UOp(Ops.LOAD, dt, (UOp(Ops.INDEX, buf.dtype, (buf, idx)),))
  lane = UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0",))
  ns = [len(tc.a[0]), len(tc.b[0]), len(tc.c[0])]
  def frag(k, dt):
    return UOp(Ops.VECTORIZE, dt.vec(ns[k]),
               tuple(ld(g(k + 1, dt), ld(g(k + 4, dtypes.int32), lane * ns[k] + e, dtypes.int32).cast(dtypes.index), dt) for e in range(ns[k])))
  d = UOp(Ops.WMMA, tc.dtype_out.vec(ns[2]), (frag(0, tc.dtype_in), frag(1, tc.dtype_in), frag(2, tc.dtype_out)), (tc.name,))
  stores = [UOp(Ops.STORE, dtypes.void,
                (UOp(Ops.INDEX, g(0, tc.dtype_out).dtype,
                     (g(0, tc.dtype_out), ld(g(6, dtypes.int32), lane * ns[2] + e, dtypes.int32).cast(dtypes.index))),
            UOp(Ops.GEP, tc.dtype_out, (d,), (e,)))) for e in range(ns[2])]
  uops = [u for u in UOp(Ops.SINK, dtypes.void, tuple(stores)).toposort() if u.op is not Ops.SINK]
  ren = EmulatedRenderer(HIPRenderer(arch), m)
  prg = EmulatorProgram("wmma", ren.compiler.compile(ren.render("wmma", uops)), m)
  rng = np.random.default_rng(1)
  A, B = rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 16)).astype(np.float16)
  C = rng.standard_normal((16, 16)).astype(np.float32)
  tabs = [np.array([[r * 16 + c for r, c in l] for l in lay], np.int32).reshape(-1) for lay in (tc.a, tc.b, tc.c)]
  D = np.zeros((16, 16), np.float32)
  prg(*[memoryview(x).cast("B") for x in (D, A, B, C, *tabs)], global_size=(1, 1, 1), local_size=(tc.threads, 1, 1))
  np.testing.assert_allclose(D, A.astype(np.float32) @ B.astype(np.float32) + C, rtol=1e-3, atol=1e-3)

# ---- tensor cores: codegen's WMMA UOps, run in the emulator and compiled to the real instructions
TC_INSN = {"gfx1100": "v_wmma_f32_16x16x16_f16", "gfx1201": "v_wmma_f32_16x16x16_f16", "gfx942": "v_mfma_f32_16x16x16_f16"}

@needs_emu
@pytest.mark.parametrize("arch", sorted(TC_INSN))
def test_wmma_matmul(registry, arch):
  """A half matmul becomes WMMA/MFMA UOps staged through LDS by codegen/opt_smem.py (RDNA's wave32 WMMA and CDNA's
  wave64 MFMA, in both renderers), gives A@B in the emulator under the arch's lane layouts, and both renderers compile
  it to the arch's matrix instruction."""
  from tinycore.device import Device
  from tinycore.uop import Ops
  dev = f"EMU+AMD::{arch}"
  rng = np.random.default_rng(2)
  wave64 = parse_arch(arch).wave == 64   # 4 lanes' k per MFMA instruction row: a 2x16 batch tile takes 2 waves, not 1
  for sa, sb, n in [((64, 32), (32, 48), 8), ((32, 64), (64, 64), 8), ((2, 32, 16), (2, 16, 32), 4 if wave64 else 2), ((37, 20), (20, 29), 2)]:
    a, b = rng.standard_normal(sa).astype(np.float16), rng.standard_normal(sb).astype(np.float16)
    out = Tensor(a, device=dev) @ Tensor(b, device=dev)
    p = get_program(out.schedule()[-1].ast, Device[dev].renderer)
    assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops)
    assert sum(u.op is Ops.WMMA for u in p.uops) == n and p.local_size[0] % parse_arch(arch).wave == 0
    np.testing.assert_allclose(out.numpy().astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=2e-2)
  a, b = Tensor(np.ones((64, 32), np.float16), device=dev), Tensor(np.ones((32, 48), np.float16), device=dev)
  k = (a @ b).schedule()[-1].ast
  if llvmlite is not None:
    r = AMDLLVMRenderer(arch)
    p = get_program(k, r)
    assert r.compiler.to_asm(p.src).count(TC_INSN[arch]) == 8   # 2x2 instruction tiles per 64x64 block tile, two k steps
    check_code_object(r.compiler.compile(p.src), p, arch)
  if find_clang(arch):
    r = HIPRenderer(arch)
    p = get_program(k, r)
    assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops)   # staged through LDS on RDNA (wave32) and CDNA (wave64)
    check_code_object(lib := r.compiler.compile(p.src), p, arch)
    dis = r.compiler.disassemble(lib)
    assert TC_INSN[arch] in dis or "vgprs" in dis   # without llvm-objdump: the kernel table (the compile still ran)

def test_fragment_layouts_match_the_isa():
  """The emulator runs WMMA with tables built from the same fragment functions codegen uses, so it can't catch a wrong
  layout by itself: these are facts read off AMD's ISA guides, stated independently as (lane, element) -> (row, col)."""
  from tinycore_amd.tensor_cores import FRAGS
  facts = {  # RDNA3: A/B replicated on both half-waves, C VGPR i holds rows 2i (lanes 0-15) and 2i+1 (lanes 16-31)
    "wmma_rdna3": {"a": [(0, 0, 0, 0), (5, 9, 5, 9), (21, 3, 5, 3)], "b": [(0, 0, 0, 0), (7, 2, 2, 7), (23, 15, 15, 7)],
                   "c": [(0, 0, 0, 0), (16, 0, 1, 0), (3, 7, 14, 3), (31, 7, 15, 15)]},
    # RDNA4: lanes 16-31 hold k 8-15 of A/B (no replication); C VGPR i holds rows i (lanes 0-15) and i+8 (lanes 16-31)
    "wmma_rdna4": {"a": [(0, 0, 0, 0), (17, 2, 1, 10), (15, 7, 15, 7)], "b": [(31, 7, 15, 15), (4, 3, 3, 4)],
                   "c": [(16, 0, 8, 0), (9, 5, 5, 9), (31, 7, 15, 15)]},
    # CDNA3 MFMA 16x16x16 f16: lane group l//16 holds k 4*(l//16)..+3, C rows 4*(l//16)+i
    "mfma": {"a": [(0, 0, 0, 0), (63, 3, 15, 15), (20, 1, 4, 5)], "b": [(37, 2, 10, 5)], "c": [(47, 1, 9, 15), (16, 0, 4, 0)]},
  }
  for kind, per in facts.items():
    for which, rows in per.items():
      f = FRAGS[kind]["abc".index(which)]
      for lane, e, row, col in rows: assert f(lane, e) == (row, col), (kind, which, lane, e)
