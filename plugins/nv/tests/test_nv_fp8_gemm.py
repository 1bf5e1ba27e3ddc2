"""fp8 (e4m3, e5m2) matmuls on NVIDIA tensor cores (mma.sync.m16n8k32, sm_89+), provable without a GPU:
- the tensor core is declared for sm_89/sm_90 and not for sm_80/sm_86 (there fp8 stays emulated in software);
- EMU+NV runs the staged kernel bit-exact against numpy with an fp8 decoder of its own (small integers: every product
  and partial sum is exact in fp32, so the accumulation order cannot matter), for fp32/half/bf16/fp8 outputs and both
  operand layouts (B k-major: fragments gathered from shared memory; B n-major: ldmatrix for both operands), and
  random codes within fp32's accumulation error;
- ldmatrix's .b16 rows carry 8-bit elements byte for byte (the emulator's table, checked on a hand-built warp);
- ptxas -v for sm_89 and sm_90: no spills, >= 2 blocks per SM for the default tile; the SASS has LDSM, LDGSTS and on
  sm_89 QMMA.16832.F32.E4M3.E4M3 (.E5M2); sm_90 has no fp8 mma.sync in hardware (its fp8 tensor cores are wgmma's):
  ptxas widens the fragments to half pairs (F2FP) for two HMMA.16816.F32 each."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.codegen import get_program
from tinycore.uop import Ops
from tinycore_nv.renderer_cuda import CUDARenderer
from tinycore_nv.occupancy import ptxas_usage, blocks_per_sm, H200, ADA

FP8 = {"e4m3": dtypes.fp8e4m3, "e5m2": dtypes.fp8e5m2}

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = "EMU+NV"

# ---- an fp8 reference independent of the framework's: the formats' definitions, by code

def decode(codes, dt) -> np.ndarray:
  """float64 value of each fp8 code: e4m3 (bias 7, no inf, 0x7f/0xff NaN), e5m2 (bias 15, IEEE-like inf/NaN)."""
  e, m, fn = (4, 3, True) if dt == dtypes.fp8e4m3 else (5, 2, False)
  c = np.asarray(codes, np.int64)
  bias, ex, man = (1 << (e - 1)) - 1, (c >> m) & ((1 << e) - 1), c & ((1 << m) - 1)
  sign = np.where(c & 0x80, -1.0, 1.0)
  v = sign * np.where(ex == 0, man / 2 ** m * 2.0 ** (1 - bias), (1 + man / 2 ** m) * 2.0 ** (ex - bias))
  if fn: return np.where((c & 0x7f) == 0x7f, np.nan, v)
  return np.where(ex == (1 << e) - 1, np.where(man == 0, sign * np.inf, np.nan), v)

def encode(x, dt) -> np.ndarray:
  """Nearest finite code, ties to the even code, saturating (x finite)."""
  mags = decode(np.arange(128), dt)
  finite = np.flatnonzero(np.isfinite(mags))
  ax = np.minimum(np.abs(np.asarray(x, np.float64)), mags[finite].max())
  d = np.abs(mags[finite][None, :] - ax.reshape(-1, 1))
  i = np.argmin(d, axis=1)   # the smaller code of a tie (magnitudes grow with the code)
  j = np.minimum(i + 1, len(finite) - 1)
  rows = np.arange(len(i))
  c = np.where((j > i) & (d[rows, j] == d[rows, i]) & (finite[i] % 2 == 1), finite[j], finite[i])
  return (c | np.where(np.signbit(np.asarray(x, np.float64).reshape(-1)), 0x80, 0)).astype(np.uint8).reshape(np.shape(x))

def test_reference_decoder_knows_the_formats():
  assert decode([0x7e], dtypes.fp8e4m3)[0] == 448 and np.isnan(decode([0x7f, 0xff], dtypes.fp8e4m3)).all()
  assert decode([0x01], dtypes.fp8e4m3)[0] == 2.0 ** -9 and decode([0x38], dtypes.fp8e4m3)[0] == 1
  assert decode([0x7b], dtypes.fp8e5m2)[0] == 57344 and decode([0x7c, 0xfc], dtypes.fp8e5m2).tolist() == [np.inf, -np.inf]
  assert decode([0x3c], dtypes.fp8e5m2)[0] == 1 and np.isnan(decode([0x7d], dtypes.fp8e5m2)[0])
  for dt in FP8.values():
    codes = np.array([c for c in range(256) if np.isfinite(decode([c], dt)[0])], np.uint8)
    np.testing.assert_array_equal(decode(encode(decode(codes, dt), dt), dt), decode(codes, dt))
  assert encode([1000.0, 17.0, 19.0], dtypes.fp8e4m3).tolist() == [0x7e, 0x58, 0x5a]   # saturates; 17, 19: ties to the even code (16, 20)

# ---- the tensor core is an arch capability

def test_fp8_tensor_core_only_from_sm_89():
  for arch, want in (("sm_80", False), ("sm_86", False), ("sm_89", True), ("sm_90", True)):
    names = [t.name for t in CUDARenderer(arch).tensor_cores]
    assert ("mma_m16n8k32_fp8e4m3_float" in names and "mma_m16n8k32_fp8e5m2_float" in names) == want, (arch, names)

def _ast(M, K, N, dt, out="float32", nmajor_b=False):
  a = Tensor.empty(M, K, dtype=dt)
  b = Tensor.empty(N, K, dtype=dt).transpose() if nmajor_b else Tensor.empty(K, N, dtype=dt)
  return (a @ b if out == "fp8" else a.matmul(b, dtype=getattr(dtypes, out))).schedule()[-1].ast

def test_sm_86_keeps_fp8_emulated(nv):
  p = nv.program(_ast(128, 128, 128, dtypes.fp8e4m3), "sm_86")
  assert not any(u.op is Ops.WMMA for u in p.uops)

# ---- EMU+NV: the staged kernel, bit for bit

OUT_NP = {"float32": np.float32, "half": np.float16}

def _mm(nv, M, K, N, dt, out="float32", nmajor_b=False, arch="sm_89", a=None, b=None, tile=None):
  p = nv.program(_ast(M, K, N, dt, out, nmajor_b), arch, tile)
  assert nv.is_staged(p) and any(u.op is Ops.WMMA and "m16n8k32" in u.arg[0] for u in p.uops), "not an fp8 tensor-core kernel"
  A, B = encode(a, dt), encode(b, dt)
  np.testing.assert_array_equal(decode(A, dt), a)   # the inputs are exactly representable
  res = np.zeros((M, N), OUT_NP.get(out, np.uint8 if out == "fp8" else np.uint16))
  nv.run(p, [res, A, np.ascontiguousarray(B.T) if nmajor_b else B], arch)
  if out == "bfloat16": got = (res.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
  elif out == "fp8": got = decode(res, dt)
  else: got = res.astype(np.float64)
  return got, p

@pytest.mark.needs_device
@pytest.mark.parametrize("nmajor_b", [False, True], ids=["b_kmajor", "b_nmajor"])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_gemm_bit_exact(nv, fmt, nmajor_b):
  rng = np.random.default_rng(1)
  M, K, N = 128, 128, 128
  a, b = rng.integers(-3, 4, (M, K)).astype(np.float64), rng.integers(-3, 4, (K, N)).astype(np.float64)
  got, p = _mm(nv, M, K, N, FP8[fmt], nmajor_b=nmajor_b, a=a, b=b)
  np.testing.assert_array_equal(got, a @ b)
  lds = [u.src[0].arg for u in p.uops if u.op is Ops.LOAD and isinstance(u.src[0].arg, tuple) and u.src[0].arg[0] == "ldmatrix"]
  # A is k-contiguous: ldmatrix x4; B through ldmatrix x2 only where it is k-contiguous too (no 8-bit .trans)
  assert {x[1] for x in lds} == ({4, 2} if nmajor_b else {4}) and not any(x[2] for x in lds), lds

@pytest.mark.needs_device
@pytest.mark.parametrize("out", ["half", "bfloat16", "fp8"])
def test_fp8_gemm_epilogue_casts(nv, out):
  """The f32 accumulators cast in the epilogue: to half/bf16 (exact for these sums), or back to e4m3 (rounded to
  nearest even, saturating at 448: the sums here reach past it)."""
  rng = np.random.default_rng(2)
  M, K, N = 64, 64, 128
  a, b = rng.integers(-3, 4, (M, K)).astype(np.float64), rng.integers(-3, 4, (K, N)).astype(np.float64)
  a[0, :] = 3; b[:, 0] = 3   # out[0, 0] = 9 * 64 = 576 > 448
  got, _ = _mm(nv, M, K, N, dtypes.fp8e4m3, out, a=a, b=b)
  want = a @ b
  if out == "fp8": want = decode(encode(want, dtypes.fp8e4m3), dtypes.fp8e4m3)
  assert got[0, 0] == (448 if out == "fp8" else 576)
  np.testing.assert_array_equal(got, want)

@pytest.mark.needs_device
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_fp8_gemm_random_codes(nv, fmt):
  """Random finite codes of moderate magnitude: the products are exact in fp32 (the hardware doesn't round them to fp8),
  so the only error is fp32 accumulation: within K * 2^-24 of the sum of |products|."""
  dt, rng = FP8[fmt], np.random.default_rng(3)
  M, K, N = 128, 256, 64
  codes = np.array([c for c in range(256) if np.isfinite(v := decode([c], dt)[0]) and 2.0 ** -6 <= abs(v) <= 64], np.uint8)
  a, b = decode(rng.choice(codes, (M, K)), dt), decode(rng.choice(codes, (K, N)), dt)
  got, _ = _mm(nv, M, K, N, dt, a=a, b=b)
  want, bound = a @ b, np.abs(a) @ np.abs(b) * K * 2.0 ** -24
  assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()
  assert np.abs(want).max() > 1 and np.abs(got - want).max() < 1e-3 * np.abs(want).max()

@pytest.mark.needs_device
def test_fp8_gemm_tails_and_other_tiles(nv):
  """Sizes that aren't tile multiples (zero-filled copies, gated stores) and a 2-stage 64x64x32 tile."""
  from tinycore.codegen.opt_smem import GemmTile
  rng = np.random.default_rng(4)
  M, K, N = 96, 96, 80
  a, b = rng.integers(-2, 3, (M, K)).astype(np.float64), rng.integers(-2, 3, (K, N)).astype(np.float64)
  got, _ = _mm(nv, M, K, N, dtypes.fp8e4m3, a=a, b=b, tile=GemmTile(64, 64, 32, 2, 2, 2, True))
  np.testing.assert_array_equal(got, a @ b)

def _ldmatrix_warp(trans=False, count=16):
  """A hand-built warp: fill a 4 x 128-byte fp8 panel from global memory, ldmatrix x4 it, store each lane's `count` elements."""
  from tinycore.uop import UOp
  dt = dtypes.fp8e4m3
  lds = UOp(Ops.DEFINE_LOCAL, dt.ptr(4 * 128, "local"), (), 0)
  out = UOp(Ops.DEFINE_GLOBAL, dt.ptr(32 * 16), (), 0)
  inp = UOp(Ops.DEFINE_GLOBAL, dt.ptr(4 * 128), (), 1)
  lane = UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, 32),), ("gidx0", 32))
  def st(buf, idx, val): return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, buf.dtype, (buf, idx)), val))
  fill = [st(lds, lane * 16 + e, UOp(Ops.LOAD, dt, (UOp(Ops.INDEX, inp.dtype, (inp, lane * 16 + e)),))) for e in range(16)]
  bar = UOp(Ops.BARRIER, dtypes.void, tuple(fill))
  frag = UOp(Ops.LOAD, dt.vec(count), (UOp(Ops.INDEX, lds.dtype, (lds, lane * 16), ("ldmatrix", 4, trans)), bar))
  nodes: list = []
  for u in [st(out, lane * 16 + e, UOp(Ops.GEP, dt, (frag,), (e,))) for e in range(count)]:
    nodes += [s for s in u.toposort() if s not in nodes]
  return nodes

@pytest.mark.needs_device
def test_ldmatrix_moves_bytes(nv):
  """lane 8j+i gives row i of matrix j (16 bytes); lane l receives bytes 4(l%4)..4(l%4)+3 of row l//4 of each matrix
  (the .b16 layout, byte for byte)."""
  dt, nodes = dtypes.fp8e4m3, _ldmatrix_warp()
  codes = encode(decode(np.arange(512) % 120, dt), dt)   # finite codes, each row different
  got = np.zeros(32 * 16, np.uint8)
  nv.run_nodes("ldm8", nodes, (got, codes), (32, 1, 1))
  M = codes.reshape(4, 8, 16)
  for l in range(32):
    for j in range(4):
      want = M[j, l // 4, 4 * (l % 4):4 * (l % 4) + 4]
      np.testing.assert_array_equal(got.reshape(32, 16)[l, 4 * j:4 * j + 4], want, err_msg=f"lane {l} matrix {j}")

# ---- structure: registers, occupancy and SASS of the compiled default kernels

@pytest.mark.parametrize("arch,sm", [("sm_89", ADA), ("sm_90", H200)])
@pytest.mark.parametrize("nmajor_b", [False, True], ids=["b_kmajor", "b_nmajor"])
def test_ptxas_no_spills_and_two_blocks_per_sm(nv, arch, sm, nmajor_b):
  p = get_program(_ast(4096, 4096, 4096, dtypes.fp8e4m3, nmajor_b=nmajor_b), CUDARenderer(arch))
  assert nv.is_staged(p)
  _, log = nv.cubin(p, arch)
  use = ptxas_usage(log)
  assert use["spill_stores"] == 0 and use["spill_loads"] == 0 and use["stack"] == 0, log
  # the default fp8 tile is 128x64 on 4 warps (opt_smem.default_tile: sm_90 widens fp8 fragments to half pairs, which
  # would spill 8 warps' tiles): 3 stages of 128x64 + 64x64 bytes
  assert use["smem"] == 3 * (128 + 64) * 64
  assert blocks_per_sm(use["registers"], use["smem"], p.local_size[0], sm) >= 2, use

@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_sass_has_fp8_mma_ldsm_ldgsts(nv, arch, fmt):
  import re
  p = get_program(_ast(4096, 4096, 4096, FP8[fmt], nmajor_b=True), CUDARenderer(arch))
  cubin, _ = nv.cubin(p, arch)
  text = nv.sass_text(cubin)
  mmas = set(re.findall(r"\b([A-Z]*MMA\.[A-Z0-9_.]+)", text))
  ops = re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)", text, re.M)
  # per k32 step a warp's 64x32 tile is 4x4 mma.m16n8k32, 4 A (x4) + 4 B (x2) ldmatrix; 2 steps per 64-byte panel row
  if arch == "sm_89":   # Ada has an fp8 tensor-core instruction: one QMMA per mma
    assert mmas == {f"QMMA.16832.F32.{fmt.upper()}.{fmt.upper()}"}, mmas
    assert ops.count("QMMA") == 2 * ops.count("LDSM"), (ops.count("QMMA"), ops.count("LDSM"))
  else:   # Hopper's fp8 tensor cores are wgmma's only: ptxas turns each mma.sync into 2 HMMAs on fragments widened by F2FP
    assert mmas == {"HMMA.16816.F32"} and ops.count("HMMA") == 4 * ops.count("LDSM") and ops.count("F2FP") > 0, (mmas, ops.count("HMMA"))
  assert ops.count("LDSM") >= 16 and ops.count("LDGSTS") >= 12, (ops.count("LDSM"), ops.count("LDGSTS"))

@pytest.mark.needs_device
@pytest.mark.parametrize("smem", [1, 0], ids=["staged", "unstaged"])
def test_fp8_matmul_through_the_tensor_api(nv, smem):
  """The user's view on an sm_89 target: fp8 tensors (cast, realized) multiplied into fp32, and fp8 @ fp8 -> fp8 (one
  rounding of the f32 sum, as the tensor-core kernel does); staged, and with SMEM_GEMM=0 (codegen/opt_tc.py:
  fragments straight from global memory)."""
  from tinycore.helpers import Context
  rng = np.random.default_rng(5)
  a, b = rng.integers(-3, 4, (128, 64)).astype(np.float32), rng.integers(-3, 4, (64, 128)).astype(np.float32)
  dev = "EMU+NV:CUDA:sm_89"
  with Context(SMEM_GEMM=smem):
    p = nv.program(_ast(128, 64, 128, dtypes.fp8e4m3), "sm_89")
    assert nv.is_staged(p) == bool(smem) and any(u.op is Ops.WMMA and "m16n8k32" in u.arg[0] for u in p.uops)
    ta, tb = (Tensor(x, device=dev).cast(dtypes.fp8e4m3).realize() for x in (a, b))
    np.testing.assert_array_equal(ta.matmul(tb, dtype=dtypes.float32).numpy(), a @ b)
    out = ta @ tb
    assert out.dtype == dtypes.fp8e4m3
    np.testing.assert_array_equal(out.float().numpy(), decode(encode(a @ b, dtypes.fp8e4m3), dtypes.fp8e4m3))

@pytest.mark.needs_device
def test_emulator_rejects_8bit_ldmatrix_it_cannot_do(nv):
  """.trans swaps 16-bit elements (no 8-bit form before sm_100), and x4 of 8-bit rows gives 16 elements a lane."""
  from tinycore.emulator import EmulatorError
  bufs = (np.zeros(32 * 16, np.uint8), np.zeros(512, np.uint8))
  with pytest.raises(EmulatorError, match=r"ldmatrix .trans moves 16-bit elements, not dtypes.fp8e4m3"):
    nv.run_nodes("ldm8t", _ldmatrix_warp(trans=True), bufs, (32, 1, 1))
  with pytest.raises(EmulatorError, match=r"ldmatrix of 4 matrices can't give dtypes.fp8e4m3.vec\(8\)"):
    nv.run_nodes("ldm8n", _ldmatrix_warp(count=8), bufs, (32, 1, 1))
