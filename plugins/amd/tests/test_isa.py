"""The RDNA ISA emulator (tinycore_amd.isa) running the machine code our two AMD renderers produce, for RDNA3
(gfx1100) and RDNA4 (gfx1201), compared with numpy. Needs llvmlite (LLVM renderer), clang-19 (HIP renderer) and
ld.lld (linking); each part skips with the reason where one is missing.

The full dtype/kernel matrix is `-m slow` (the amd-isa CI lane runs it); the default run keeps one case per
renderer and arch plus the checks of what the emulator refuses."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from _amd_tools import renderer, on_isa

pytestmark = pytest.mark.needs_device
D = "EMU+AMD"   # where the inputs live before they are copied into the emulator's memory
ARCHS = ("gfx1100", "gfx1201")

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = D

def run(t, kind, arch, opts=None): return on_isa(t, renderer(kind, arch, linked=True), opts)

rng = np.random.default_rng(7)
def F(*shape, dt=np.float32, lo=-2.0, hi=2.0): return rng.uniform(lo, hi, shape).astype(dt)
def Ints(*shape, dt=np.int32, lo=-100, hi=100): return rng.integers(lo, hi, shape).astype(dt)
def T(a, dt=None): return Tensor(a, device=D) if dt is None else Tensor(a, device=D, dtype=dt)
def bf16_bits(x): return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)   # inputs exact in bf16
def bf16_float(bits): return (np.asarray(bits, np.uint32) << 16).view(np.float32)

a32, b32 = F(4, 5), F(4, 5)
h1, h2 = F(16, dt=np.float16), F(16, dt=np.float16)
bfx = bf16_float(bf16_bits(F(16, lo=0.1, hi=9)))
i1, i2 = Ints(16), Ints(16, lo=1, hi=50) * rng.choice([-1, 1], 16).astype(np.int32)
i8a, u8b = Ints(8, dt=np.int8, lo=-40, hi=40), Ints(8, dt=np.uint8, lo=0, hi=200)
l1, l2 = Ints(8, dt=np.int64, lo=-2**40, hi=2**40), Ints(8, dt=np.int64, lo=-2**60, hi=2**60)
d1 = F(8, dt=np.float64, lo=-4, hi=4)
m1, m2 = F(32, 33), F(33, 8)
hm1, hm2 = F(32, 32, dt=np.float16, lo=-1, hi=1), F(32, 32, dt=np.float16, lo=-1, hi=1)
pos = F(8, lo=0.05, hi=8)
u32a = Ints(16, dt=np.uint32, lo=0, hi=2**32 - 1)
s16 = Ints(16, dt=np.int16, lo=-3000, hi=3000)

# name -> (tensor builder, numpy reference, rtol, atol); references computed the way the kernel rounds
CASES = {
  "add_f32": (lambda: T(a32) + T(b32), lambda: a32 + b32, 1e-6, 0),
  "half": (lambda: (T(h1) * 2 + T(h2)).exp2(), lambda: np.exp2((h1 * np.float16(2) + h2).astype(np.float32)).astype(np.float16), 2e-3, 1e-3),
  "bf16": (lambda: (T(bfx, dtypes.bfloat16) * 2).sqrt().cast(dtypes.float16),
           lambda: np.sqrt(bfx * 2).astype(np.float16), 1e-2, 0),
  "int_divmod": (lambda: (T(i1) // T(i2)) % 3, lambda: (i1 // i2) % 3, 0, 0),   # Python (floor) semantics, as numpy
  "int8": (lambda: T(i8a) * 3 + T(u8b).cast(dtypes.int8), lambda: (i8a.astype(np.int32) * 3 + u8b.astype(np.int8)).astype(np.int8), 0, 0),
  "int64_shift": (lambda: (T(l1) << 3) ^ T(l2), lambda: (l1 << 3) ^ l2, 0, 0),
  "where_bool": (lambda: (T(a32) < 0.5).where(T(b32), 0), lambda: np.where(a32 < 0.5, b32, 0).astype(np.float32), 0, 0),
  "f64_math": (lambda: T(d1) * T(d1) + 1.5, lambda: d1 * d1 + 1.5, 1e-15, 0),
  "f64_exp_max": (lambda: T(d1).exp2().max(), lambda: np.exp2(d1).max(), 1e-15, 0),   # f64math.py: double precision
  "sum": (lambda: T(m1).sum(1), lambda: m1.sum(1), 1e-5, 1e-5),
  "max0": (lambda: T(m1).max(0), lambda: m1.max(0), 0, 0),
  "matmul": (lambda: T(m1) @ T(m2), lambda: m1 @ m2, 1e-5, 1e-5),
  "hmatmul_wmma": (lambda: T(hm1) @ T(hm2), lambda: (hm1.astype(np.float32) @ hm2.astype(np.float32)).astype(np.float16), 2e-3, 2e-3),
  "pad_permute": (lambda: T(a32[:3, :4]).pad(((1, 1), (0, 2))).permute(1, 0) + 1,
                  lambda: np.pad(a32[:3, :4], ((1, 1), (0, 2))).T + 1, 1e-6, 0),
  "bitcast": (lambda: T(pos).bitcast(dtypes.int32) + 1, lambda: pos.view(np.int32) + 1, 0, 0),
  "transcendental": (lambda: T(pos).sin() + T(pos).log2() + T(pos).sqrt() + T(pos).exp() + T(pos).reciprocal(),
                     lambda: np.sin(pos) + np.log2(pos) + np.sqrt(pos) + np.exp(pos) + 1 / pos, 2e-5, 2e-5),
  "uint32": (lambda: (T(u32a) >> 3) + T(u32a) * 7, lambda: (u32a >> 3) + u32a * np.uint32(7), 0, 0),
  "int16": (lambda: T(s16) * 5 - T(s16) // 3, lambda: (s16 * np.int16(5) - s16 // np.int16(3)).astype(np.int16), 0, 0),
  "cast_chain": (lambda: T(a32).cast(dtypes.float16).cast(dtypes.int32).cast(dtypes.float64) * 0.5,
                 lambda: np.trunc(a32.astype(np.float16).astype(np.float32)).astype(np.float64) * 0.5, 0, 0),
  # shapes the op suite found emulator gaps with: scalar float ops and pseudo-scalar transcendentals (RDNA4), v_fma_mix,
  # s_bitset1 (int -> bf16 rounding on the scalar unit), v_cls (int64 -> float)
  "var_logsumexp": (lambda: T(m1).var(1) + T(m1).logsumexp(1), lambda: m1.var(1, ddof=1) + _logsumexp(m1), 2e-5, 2e-5),
  "softmax": (lambda: T(m1).softmax(1), lambda: np.exp(m1 - m1.max(1, keepdims=True)) / np.exp(m1 - m1.max(1, keepdims=True)).sum(1, keepdims=True),
              2e-5, 1e-6),
  "hmatmul_small": (lambda: T(hm1[:10, :24]) @ T(hm2[:24, :6]),
                    lambda: (hm1[:10, :24].astype(np.float32) @ hm2[:24, :6].astype(np.float32)).astype(np.float16), 2e-3, 2e-3),
  "int_sum_bf16": (lambda: T(i1[:1]).sum().cast(dtypes.bfloat16), lambda: bf16_float(bf16_bits(np.float32(i1[:1].sum()))), 1e-2, 0),
  "fp8": (lambda: (T(fp8x, dtypes.fp8e4m3).cast(dtypes.float32) * 3).cast(dtypes.fp8e5m2), lambda: _fp8_ref(fp8x), 0, 0),   # HIP only
  "long_mean": (lambda: T(l1).cast(dtypes.float64).mean(), lambda: l1.astype(np.float64).mean(), 1e-15, 0),
}
fp8x = F(16, lo=-20, hi=20)
def _fp8_ref(x):
  """The fp8e5m2 bits of 3 * (x rounded to fp8e4m3), by tinycore's host-side fp8 conversions."""
  from tinycore.engine.numeric import float_to_bits, bits_to_float
  return float_to_bits(bits_to_float(float_to_bits(x, dtypes.fp8e4m3), dtypes.fp8e4m3).astype(np.float32) * 3, dtypes.fp8e5m2)
def _logsumexp(x):
  m = x.max(1)
  return m + np.log(np.exp(x - m[:, None]).sum(1))

def check(case, kind, arch):
  if case == "fp8" and kind == "LLVM": pytest.skip("the LLVM renderer has no fp8 (it says so: use AMD:HIP)")
  build, ref, rtol, atol = CASES[case]
  out, rep = run(build(), kind, arch)
  want = np.asarray(ref())
  if out.dtype == np.uint16 and want.dtype != np.uint16: out = bf16_float(out)
  np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, err_msg=f"{case} {kind} {arch}")
  return rep

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["LLVM", "HIP"])
def test_isa_elementwise(kind, arch):
  rep = check("add_f32", kind, arch)
  assert rep.stats.waves == 4 and {"global_load_b32", "global_store_b32", "v_add_f32"} <= rep.stats.opcodes

@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["LLVM", "HIP"])
def test_isa_kernel_matrix(case, kind, arch):
  check(case, kind, arch)

@pytest.mark.parametrize("arch", ARCHS)
def test_isa_wmma(arch):
  """A half matmul with 16-multiple dims compiles to v_wmma (opt_tc.py); its result proves codegen's fragment layout
  and the emulator's (written separately from the ISA guide) agree."""
  rep = check("hmatmul_wmma", "LLVM", arch)
  assert any(o.startswith("v_wmma_f32_16x16x16_f16") for o in rep.stats.opcodes), rep.stats.opcodes

# ---- LDS and barriers in a hand-written HIP kernel (the staged GEMMs of test_amd_gemm.py are the generated ones)
BLOCK_SUM = r"""#define __global__ __attribute__((global))
extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(1, 256))) void block_sum(float* out, const float* in, int lds_index_bias) {
  __attribute__((shared)) float part[256];
  unsigned t = __builtin_amdgcn_workitem_id_x(), g = __builtin_amdgcn_workgroup_id_x();
  part[t + lds_index_bias] = in[g * 256 + t];
  __builtin_amdgcn_s_barrier();
  for (unsigned s = 128; s > 0; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  }
  if (t == 0) out[g] = part[0];
}
"""
def compile_hip(src: str, arch: str) -> bytes:
  renderer("HIP", arch, linked=True)   # skips without clang / lld
  from tinycore_amd.compiler import HIPCompiler
  return HIPCompiler(arch).compile(src)

def dispatch_block_sum(arch: str, bias: int = 0):
  from tinycore_amd.isa import dispatch, ArenaMemory
  lib = compile_hip(BLOCK_SUM, arch)
  mem = ArenaMemory()
  x = F(3, 256)
  out, inp = mem.alloc(12), mem.put(x)
  ka = mem.put(np.array([out, inp, bias], np.uint64))
  stats = dispatch(lib, "block_sum", arch, (3, 1, 1), (256, 1, 1), ka, mem)
  return x, mem.get(out, np.float32, 3), stats

@pytest.mark.parametrize("arch", ARCHS)
def test_isa_lds_barrier_reduction(arch):
  """8 waves per work-group reduce through LDS with a barrier per step: every wave must see the others' stores."""
  x, got, stats = dispatch_block_sum(arch)
  np.testing.assert_allclose(got, x.sum(1), rtol=1e-5, atol=1e-5)
  assert stats.waves == 24 and stats.workgroups == 3
  assert any(o.startswith("ds_store") for o in stats.opcodes) and any(o.startswith("ds_load") for o in stats.opcodes)
  assert stats.opcodes & {"s_barrier", "s_barrier_signal"}

@pytest.mark.parametrize("arch", ARCHS)
def test_isa_lds_out_of_bounds_is_caught(arch):
  from tinycore_amd.isa import ExecutionError
  with pytest.raises(ExecutionError, match="LDS"): dispatch_block_sum(arch, bias=4096)

# ---- what the emulator refuses, and says why
def _add_kernel(arch: str):
  from tinycore_amd.isa import ArenaMemory
  r = renderer("HIP", arch, linked=True)
  from tinycore.codegen import get_program
  p = get_program((T(a32) + T(b32)).schedule()[-1].ast, r)
  mem = ArenaMemory()
  out, pa, pb = mem.alloc(80), mem.put(a32), mem.put(b32)
  return r.compiler.compile(p.src), p, mem, mem.put(np.array([out, pa, pb], np.uint64)), out

def _patch_first(lib: bytes, arch: str, name: str, words: bytes) -> bytes:
  """lib with the first instruction called `name` overwritten by `words` (same length)."""
  from tinycore_amd.isa import load, decode
  from tinycore_amd.codeobject import read
  img = load(lib)
  k = next(iter(img.kernels.values()))
  pc = k.entry
  text_off = next(off for nm, off in read(lib).symbols.items() if nm == k.name) - k.entry   # file offset - vaddr of .text
  while True:
    ins = decode(img.memory, pc, arch)
    if ins.op.startswith(name): break
    if ins.op == "s_endpgm": raise AssertionError(f"no {name} in the kernel")
    pc += ins.size
  b = bytearray(lib)
  b[pc + text_off:pc + text_off + len(words)] = words
  return bytes(b)

@pytest.mark.parametrize("arch", ARCHS)
def test_isa_missing_waitcnt_is_caught(arch):
  """Loads complete at once in the emulator; reading their registers before the s_waitcnt that covers them is a bug
  real hardware would turn into garbage, so it raises."""
  from tinycore_amd.isa import dispatch, ExecutionError
  lib, p, mem, ka, _ = _add_kernel(arch)
  wait = "s_wait_loadcnt" if arch.startswith("gfx12") else "s_waitcnt"
  nop = (0xBF800000).to_bytes(4, "little")
  bad = _patch_first(_patch_first(lib, arch, wait, nop), arch, wait, nop) if arch == "gfx1100" else _patch_first(lib, arch, wait, nop)
  with pytest.raises(ExecutionError, match="before an s_waitcnt"):
    dispatch(bad, p.name, arch, p.global_size, p.local_size, ka, mem)

@pytest.mark.parametrize("arch", ARCHS)
def test_isa_unknown_instruction_names_its_encoding(arch):
  from tinycore_amd.isa import dispatch, UnknownInstruction
  lib, p, mem, ka, _ = _add_kernel(arch)
  bad = _patch_first(lib, arch, "v_add_f32", (0xFFFFFFFF).to_bytes(4, "little"))
  with pytest.raises(UnknownInstruction, match="FFFFFFFF"): dispatch(bad, p.name, arch, p.global_size, p.local_size, ka, mem)

def test_isa_refuses_bad_inputs():
  from tinycore_amd.isa import dispatch, ArenaMemory, BadCodeObject, MemoryFault
  with pytest.raises(BadCodeObject): dispatch(b"\x7fELF" + bytes(100), "k", "gfx1100", (1, 1, 1), (1, 1, 1), 0, ArenaMemory())
  with pytest.raises(ValueError, match="RDNA3/RDNA4"): dispatch(b"", "k", "gfx942", (1, 1, 1), (1, 1, 1), 0, ArenaMemory())
  lib, p, mem, ka, _ = _add_kernel("gfx1100")
  with pytest.raises(ValueError, match="is for gfx1100"): dispatch(lib, p.name, "gfx1201", (1, 1, 1), (5, 1, 1), ka, mem)
  with pytest.raises(ValueError, match="no kernel 'nope'"): dispatch(lib, "nope", "gfx1100", (1, 1, 1), (5, 1, 1), ka, mem)
  with pytest.raises(ValueError, match="at most 1024"): dispatch(lib, p.name, "gfx1100", (1, 1, 1), (2048, 1, 1), ka, mem)
  with pytest.raises(MemoryFault, match="outside every allocated buffer"):
    dispatch(lib, p.name, "gfx1100", p.global_size, p.local_size, 0xDEAD0000, mem)

def test_arena_memory_bounds():
  from tinycore_amd.isa import ArenaMemory, MemoryFault
  m = ArenaMemory()
  a = m.put(np.arange(4, dtype=np.uint32))
  assert m.load(np.array([a + 4], np.uint64), 4).view(np.uint32)[0, 0] == 1
  with pytest.raises(MemoryFault): m.load(np.array([a + 14], np.uint64), 4)   # straddles the end
  m.store(np.array([a, a + 8], np.uint64), np.array([[1, 0, 0, 0], [2, 0, 0, 0]], np.uint8))
  assert list(m.get(a, np.uint32, 4)) == [1, 1, 2, 3]

# ---- float64 transcendentals: double-precision helpers (f64math.py), checked in ulps against numpy
_rng64 = np.random.default_rng(3)
F64_INPUTS = {
  "exp2": (np.concatenate([_rng64.uniform(-30, 30, 40), _rng64.uniform(-1070, 1023, 20), [0.0, -0.0, 1e-310, 1023.9, -1074.5, 1e-20]]), np.exp2, 2),
  "log2": (np.concatenate([_rng64.uniform(1e-6, 1e6, 40), np.exp(_rng64.uniform(-700, 700, 20)), [1.0, 2.0, 1e-310, 5e-324, 1 + 1e-15]]), np.log2, 3),
  "sin": (np.concatenate([_rng64.uniform(-10, 10, 40), _rng64.uniform(-1e5, 1e5, 20), [0.0, np.pi, -np.pi / 2, 1e-300, 1e6, 7.0]]), np.sin, 8),
}
SPECIALS = np.array([np.inf, -np.inf, np.nan, -1.0, 0.0])

def check_f64(fn: str, kind: str, arch: str):
  x, ref, max_ulp = F64_INPUTS[fn]
  x = np.concatenate([x, SPECIALS])
  out, rep = run(getattr(T(x, dtypes.float64), fn)(), kind, arch)
  with np.errstate(all="ignore"): want = ref(x)
  fin = np.isfinite(want)
  err = np.abs(out[fin] - want[fin]) / np.spacing(np.maximum(np.abs(want[fin]), np.finfo(np.float64).tiny))
  assert err.max() <= max_ulp, f"{fn} {kind} {arch}: {err.max():.1f} ulp at x={x[fin][np.argmax(err)]!r}"
  np.testing.assert_array_equal(out[~fin], want[~fin])   # inf/-inf/nan where numpy gives them
  assert "v_exp_f32" not in rep.stats.opcodes and "v_log_f32" not in rep.stats.opcodes   # nothing goes through float32

@pytest.mark.parametrize("fn", sorted(F64_INPUTS))
def test_isa_f64_transcendentals(fn):
  check_f64(fn, "LLVM", "gfx1201")

@pytest.mark.slow
@pytest.mark.parametrize("fn", sorted(F64_INPUTS))
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["LLVM", "HIP"])
def test_isa_f64_transcendentals_matrix(fn, kind, arch):
  check_f64(fn, kind, arch)

def test_isa_behind_the_emu_device():
  """hostdev.use_isa: Tensor code on DEV=EMU+AMD:<renderer>:<arch> runs as machine code on the emulator (in a child
  process: the swap lasts as long as the opened device)."""
  import subprocess, sys, textwrap
  renderer("LLVM", "gfx1201", linked=True)
  code = textwrap.dedent("""
    import numpy as np
    from tinycore import Tensor
    from tinycore_amd.isa.hostdev import use_isa, ISAProgram
    use_isa("EMU+AMD:LLVM:gfx1201")
    a = np.arange(96, dtype=np.float32).reshape(8, 12) / 7
    got = (Tensor(a, device="EMU+AMD:LLVM:gfx1201").exp() * 2).sum(1).numpy()
    assert np.allclose(got, (np.exp(a) * 2).sum(1), rtol=1e-5), got
    assert ISAProgram.totals.instructions > 100 and "v_exp_f32" in ISAProgram.totals.opcodes
    print("ok", ISAProgram.totals.instructions)
  """)
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
