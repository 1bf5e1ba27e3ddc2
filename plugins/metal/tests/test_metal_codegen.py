"""The MSL renderer off macOS: (a) numbers through DEV=EMU+METAL vs numpy, (b) structural checks of the emitted MSL,
(c) clang type-checking it against a shim metal_stdlib (mslcheck.py). No Metal compiler runs here; each part skips,
with the reason, where the emulator or clang is missing."""
import re
import numpy as np
import pytest
from tinycore.testing.kernel_cases import kernel_cases
from tinycore import Tensor, dtypes
from tinycore.uop import UOp, Ops
from tinycore.codegen import get_program
from tinycore_metal.renderer_metal import MetalRenderer, TENSOR_CORES
from tinycore_metal.mslcheck import structure, clang_check, find_clang

DEV = "EMU+METAL"
try:
  import tinycore.emulator   # noqa: F401
  _emu = None
except ImportError: _emu = "this tinycore has no shared emulator (tinycore.emulator)"
needs_emu = pytest.mark.skipif(_emu is not None, reason=_emu or "")
needs_clang = pytest.mark.skipif(find_clang() is None, reason="no clang++ to type-check MSL against the shim")

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = DEV   # scheduling asks for Device.DEFAULT; the registry fixture restores it

def E(shape, dt=dtypes.float32): return Tensor.empty(*shape, dtype=dt, device=DEV)
CASES = kernel_cases(DEV, skip=("f64_exp",))   # Metal has no double
def src(case: str, native_bf16=True) -> str: return get_program(CASES[case]().schedule()[-1].ast, MetalRenderer(native_bf16=native_bf16)).src

# ---- hand-built programs for what codegen doesn't emit yet: threadgroup memory + barrier, vectors, WMMA
def _g(n, dt=dtypes.float32): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), n)
def _c(x, dt=dtypes.index): return UOp.const(dt, x)
def _ld(buf, idx, dt=dtypes.float32, *extra): return UOp(Ops.LOAD, dt, (UOp(Ops.INDEX, buf.dtype, (buf, idx)), *extra))
def _st(buf, idx, val): return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, buf.dtype, (buf, idx)), val))
def _lin(stores): return [u for u in UOp(Ops.SINK, dtypes.void, tuple(stores)).toposort() if u.op is not Ops.SINK]
def local_prog():
  lds = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(32, "local"), (), 0)
  l, g = UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0",)), UOp(Ops.SPECIAL, dtypes.index, (), ("gidx0",))
  st = _st(lds, l, _ld(_g(1), g * 32 + l))
  return _lin([_st(_g(0), g * 32 + l, _ld(lds, (l + 1) % 32, dtypes.float32, UOp(Ops.BARRIER, dtypes.void, (st,))))])
def vec_prog():
  f4, i = dtypes.float32.vec(4), UOp(Ops.SPECIAL, dtypes.index, (_c(8),), ("gidx0", 4))
  x = UOp(Ops.LOAD, f4, (UOp(Ops.INDEX, _g(1).dtype, (_g(1), i * 4), ("vec", 4)),))
  y = UOp(Ops.MAX, f4, (x, UOp(Ops.VECTORIZE, f4, (_ld(_g(1), i),) * 4)))
  z = UOp(Ops.WHERE, f4, (UOp(Ops.CMPLT, dtypes.bool.vec(4), (y, x)), y, x))
  return _lin([UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, _g(0).dtype, (_g(0), i * 4), ("vec", 4)), z)),
               _st(_g(2, dtypes.int32), i, UOp(Ops.BITCAST, dtypes.int32, (UOp(Ops.GEP, dtypes.float32, (z,), (2,)),)))])
def wmma_prog(tc_name: str, di, do):
  """One simdgroup_multiply_accumulate: lane l loads its 2 elements of A, B, C through index tables (buffers 4-6)."""
  lane = UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0",))
  ia, ib, ic = _g(4, dtypes.int32), _g(5, dtypes.int32), _g(6, dtypes.int32)
  def frag(buf, tab, dt):
    return UOp(Ops.VECTORIZE, dt.vec(2), tuple(_ld(buf, _ld(tab, lane * 2 + e, dtypes.int32).cast(dtypes.index), dt) for e in range(2)))
  d = UOp(Ops.WMMA, do.vec(2), (frag(_g(1, di), ia, di), frag(_g(2, di), ib, di), frag(_g(3, do), ic, do)), (tc_name,))
  return _lin([_st(_g(0, do), _ld(ic, lane * 2 + e, dtypes.int32).cast(dtypes.index), UOp(Ops.GEP, do, (d,), (e,))) for e in range(2)])
HAND = {"local_barrier": local_prog, "vectors": vec_prog,
        **{tc.name: (lambda tc=tc: wmma_prog(tc.name, tc.dtype_in, tc.dtype_out)) for tc in TENSOR_CORES}}

# ---- (b) structure
@pytest.mark.parametrize("native_bf16", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_structure(case, native_bf16):
  s = src(case, native_bf16)
  assert s.startswith("#include <metal_stdlib>") and "kernel void " in s and "[[threadgroup_position_in_grid]]" in s
  assert structure(s) == []
  if case == "bf16": assert ("device bfloat*" in s) == native_bf16 and ("__tc_from_bfloat16" in s) != native_bf16

@pytest.mark.parametrize("case", HAND)
def test_structure_hand_built(case):
  s = MetalRenderer().render("k", HAND[case]())
  assert structure(s) == []
  if case == "local_barrier": assert "threadgroup float temp" in s and "threadgroup_barrier(mem_flags::mem_threadgroup);" in s
  if case == "vectors": assert "packed_float4" in s and "select(" in s and "as_type<int>" in s
  if case.startswith("simdgroup"): assert "simdgroup_multiply_accumulate" in s and "#include <metal_simdgroup_matrix>" in s

def test_no_float64_and_vars():
  with pytest.raises(NotImplementedError, match="float64"):
    MetalRenderer().render("k", _lin([_st(_g(0, dtypes.float64), _c(0), _c(1.0, dtypes.float64))]))
  from tinycore import Variable
  s = get_program((E((16,))[:Variable("n", 1, 16).bind(3)] + 1).schedule()[-1].ast, MetalRenderer()).src
  assert "constant int& n [[buffer(2)]]" in s and structure(s) == []

@pytest.mark.parametrize("bad, why", [
  (lambda s: s.replace("device float* data1", "float* data1"), "without an address space"),
  (lambda s: s.replace("[[buffer(1)]]", "[[buffer(3)]]"), "buffer indices"),
  (lambda s: re.sub(r"float (v\d+) = ", r"\1 = ", s, count=1), "used before it is declared"),
  (lambda s: s + "}", "unbalanced")])
def test_structure_catches(bad, why):
  assert any(why in e for e in structure(bad(src("add_f32"))))

# ---- (c) clang against the shim
@needs_clang
@pytest.mark.parametrize("case", [*CASES, *HAND])
def test_clang_shim(case):
  s = src(case) if case in CASES else MetalRenderer().render("k", HAND[case]())
  assert clang_check(s) == ""
  if case == "bf16": assert clang_check(src(case, native_bf16=False)) == ""

@needs_clang
def test_clang_shim_catches():
  s = src("transcendental")
  assert "undeclared identifier 'sinf'" in clang_check(s.replace("precise::sin(", "sinf("))
  assert "cannot initialize" in clang_check(s.replace("device float* data1", "float* data1").replace("float v0 = ", "float* p = data0; float v0 = "))

# ---- (a) numbers through the emulator
@needs_emu
def test_emu_numeric(registry):
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((33, 17)).astype(np.float32), rng.standard_normal((17, 9)).astype(np.float32)
  ta, tb = Tensor(a, device=DEV), Tensor(b, device=DEV)
  np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta.pad(((1, 1), (0, 2))).permute(1, 0).sum(0).numpy(), np.pad(a, ((1, 1), (0, 2))).T.sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta.max(1).numpy(), a.max(1))
  h = (ta.cast(dtypes.float16) * 2 + 1).numpy()
  np.testing.assert_equal(h, a.astype(np.float16) * np.float16(2) + np.float16(1))
  np.testing.assert_allclose((ta.cast(dtypes.float16) @ tb.cast(dtypes.float16)).float().numpy(), a @ b, rtol=2e-2, atol=2e-2)
  np.testing.assert_allclose(ta.exp2().log2().numpy(), a, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta.cast(dtypes.bfloat16).float().numpy(), a, rtol=1e-2)
  i = np.arange(-8, 8, dtype=np.int32)
  np.testing.assert_equal(((Tensor(i, device=DEV) * 3) // 2).numpy(), (i * 3) // 2)
  np.testing.assert_equal((Tensor(i.astype(np.int8), device=DEV) * 20).numpy(), (i.astype(np.int8) * np.int8(20)))
  m = Tensor(np.array([np.nan, 1, 2], np.float32), device=DEV).maximum(Tensor(np.array([1, np.nan, 1], np.float32), device=DEV)).numpy()
  assert np.isnan(m[0]) and np.isnan(m[1]) and m[2] == 2

@needs_emu
@pytest.mark.parametrize("tc", TENSOR_CORES, ids=lambda t: t.name)
def test_emu_simdgroup_layout(tc):
  """The simdgroup 8x8 layout in the emulator: the WMMA program above (as MSL would run it) gives A@B+C."""
  from tinycore.emulator import EmulatedRenderer, EmulatorProgram
  from tinycore_metal.emulator import model
  ren = EmulatedRenderer(MetalRenderer(), model())
  lay = ren.model.tc(tc.name)
  rng = np.random.default_rng(1)
  def mat(dt):   # values exactly representable in dt, and their storage (bfloat16: the top 16 bits of a float32)
    x = rng.standard_normal((8, 8)).astype(np.float32)
    if dt == dtypes.bfloat16: return (x.view(np.uint32) & 0xffff0000).view(np.float32), (x.view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(dt.np).astype(np.float32), x.astype(dt.np)
  (A32, A), (B32, Bm), (C32, C) = mat(tc.dtype_in), mat(tc.dtype_in), mat(tc.dtype_out)
  tabs = [np.array([[r * 8 + c for r, c in lane] for lane in L], np.int32).reshape(-1) for L in (lay.a, lay.b, lay.c)]
  D = np.zeros((8, 8), tc.dtype_out.np)
  prg = EmulatorProgram("k", ren.compiler.compile(ren.render("k", wmma_prog(tc.name, tc.dtype_in, tc.dtype_out))), ren.model)
  prg(*[memoryview(x).cast("B") for x in (D, A, Bm, C, *tabs)], global_size=(1, 1, 1), local_size=(32, 1, 1))
  tol = 2e-2 if tc.dtype_out == dtypes.float16 else 1e-4
  np.testing.assert_allclose(D.astype(np.float32), A32 @ B32 + C32, rtol=tol, atol=tol)

@needs_emu
def test_emu_renders_and_checks_every_kernel(registry, monkeypatch):
  """METAL_MSLCHECK=1: each kernel EMU+METAL runs is rendered as MSL and checked; the device reports Apple's model."""
  monkeypatch.setenv("METAL_MSLCHECK", "1")
  from tinycore.device import Device
  Device.reset()
  d = Device[DEV]
  assert d.renderer.model.warp_size == 32 and d.renderer.model.local_mem == 32 * 1024 and d.renderer.shared_max == 32 * 1024
  from tinycore_metal.emulator import STATS
  n = STATS["checked"]
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  np.testing.assert_equal((Tensor(x, device=DEV).permute(1, 0) * 2).sum(1).numpy(), (x.T * 2).sum(1))
  assert STATS["checked"] > n

@needs_emu
@needs_clang
def test_conformance_tiny_with_msl_checks():
  """The kit's test_tiny on EMU+METAL, every kernel's MSL checked by structure and clang (the full kit: docs/metal.md).
  test_copy is left out: it copies to CPU, which the core+metal CI venv doesn't have."""
  import os, subprocess, sys
  env = {**os.environ, "METAL_MSLCHECK": "2"}
  env.pop("DEV", None)
  p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--pyargs", "tinycore.testing.test_tiny",
                      "--device=EMU+METAL", "-W", "ignore",
                      "-k", "not test_copy"], capture_output=True, text=True, env=env, timeout=300)
  assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]

# ---- (d) the staged GEMMs (codegen/opt_smem.py, opt_simt.py, c_tile.py) through Metal's capabilities: threadgroup panels,
# threadgroup barriers, simdgroup 8x8 fragments gathered from them (half) or FMA register tiles reading packed_float4 (fp32)
@needs_emu
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.float32])
@pytest.mark.parametrize("shapes", [((128, 64), (64, 128)), ((37, 40), (40, 29)), ((2, 64, 32), (2, 32, 64))], ids=["square", "tails", "batched"])
def test_staged_gemm_bit_exact_and_msl(shapes, dt):
  """Bit-exact in EMU+METAL on integer inputs (every fp32 sum exact); the MSL passes the structural checks and, where
  clang is here, the shim's type check (threadgroup address spaces included)."""
  sa, sb = shapes
  rng = np.random.default_rng(3)
  a, b = (rng.integers(-3, 4, s).astype(dt.np) for s in (sa, sb))
  out = Tensor(a, device=DEV) @ Tensor(b, device=DEV)
  p = get_program(out.schedule()[-1].ast, MetalRenderer())
  assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops) and any(u.op is Ops.WMMA for u in p.uops) == (dt == dtypes.half)
  assert "threadgroup_barrier(mem_flags::mem_threadgroup)" in p.src and re.search(r"threadgroup \w+ temp\d+\[\d+\];", p.src)
  assert ("simdgroup_multiply_accumulate" in p.src) == (dt == dtypes.half) and (dt == dtypes.half or "packed_float4" in p.src)
  assert not structure(p.src)
  if find_clang() is not None: assert not clang_check(p.src)
  np.testing.assert_array_equal(out.numpy(), (a.astype(np.float32) @ b.astype(np.float32)).astype(dt.np))
