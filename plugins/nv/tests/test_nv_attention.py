"""The tensor-core flash attention forward (codegen/attention_tc.py) on NVIDIA, provable without a GPU:
- EMU+NV runs it against numpy float64 attention over every edge of the tiling (S = 1, 17, 64, 127, 128, 130, 256:
  one row, a partial query block, exact blocks, a partial key tile), head dims 64 and 128, causal on and off, fp16 and
  bf16; the emulator checks every shared-memory access for races, pending async copies and bounds as it runs;
- the emulator catches the kernel with a barrier or the cp.async wait removed;
- ptxas -v for sm_90: no spills, >= 2 blocks per SM at D = 64 and 128; the SASS has HMMA, LDSM, LDGSTS, SHFL and no local memory;
- scaled_dot_product_attention (and bench/gpu.py's attention row) schedules it as one kernel; with gradients asked
  for it keeps the log-sum-exp and the backward (ordinary kernels) matches float64.

Tolerance: the reference is float64 attention of the inputs as the device holds them (fp16/bf16 values). The kernel
rounds P to the input dtype before P @ V (relative error <= u = 2^-11 for fp16, 2^-8 for bf16, per element, so at most
u * max|v| in each output) and rounds the output to it (<= u * |out| <= u * max|v|); fp32 accumulation adds far less.
Hence |err| <= 2 u max|v| (+ a little for the accumulation order), which is what is asserted."""
import numpy as np
import pytest
from _nv_harness import NVHarness as NV
from tinycore import Tensor, dtypes
from tinycore.codegen import get_program
from tinycore.codegen.attention_tc import AttentionTCArg
from tinycore.emulator import MissingBarrier, AsyncCopyPending
from tinycore.uop import Ops
from tinycore_nv.renderer_cuda import CUDARenderer
from tinycore_nv.nvrtc import find_nvrtc, NVRTCCompiler
from tinycore_nv.ptxas import find_ptxas, ptxas_with_log
from tinycore_nv.occupancy import ptxas_usage, blocks_per_sm, H200, find_sass_tool

pytestmark = pytest.mark.usefixtures("emu_nv")   # EMU+NV the default device (conftest.py)

def _ast(shape_q, shape_kv, dt, causal):
  q, k, v = Tensor.empty(*shape_q, dtype=dt), Tensor.empty(*shape_kv, dtype=dt), Tensor.empty(*shape_kv, dtype=dt)
  return q.scaled_dot_product_attention(k, v, is_causal=causal).schedule()[-1].ast

def _reference(q, k, v, causal):
  q, k, v = (x.astype(np.float64) for x in (q, k, v))
  s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
  if causal: s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  return (p / p.sum(-1, keepdims=True)) @ v

def _bits(x: np.ndarray, dt) -> np.ndarray:
  """float32 values -> the device's 16-bit storage (bf16: truncated to values bf16 holds exactly)."""
  return x.astype(np.float16) if dt == dtypes.half else (x.view(np.uint32) >> 16).astype(np.uint16)
def _values(b: np.ndarray, dt) -> np.ndarray:
  return b.astype(np.float64) if dt == dtypes.half else (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

def _check(S, D, causal, dt=dtypes.half, batch=(2, 2), seed=0):
  rng = np.random.default_rng(seed)
  q, k, v = (_bits(rng.standard_normal(batch + (S, D)).astype(np.float32), dt) for _ in range(3))
  ast = _ast(batch + (S, D), batch + (S, D), dt, causal)
  assert isinstance(ast.src[0].arg, AttentionTCArg), "not the tensor-core attention kernel"
  out = np.zeros(batch + (S, D), q.dtype)
  NV.run(NV.program(ast), (out, q, k, v))
  qv, kv, vv = (_values(x, dt) for x in (q, k, v))
  want, got = _reference(qv, kv, vv, causal), _values(out, dt)
  u = 2.0 ** -11 if dt == dtypes.half else 2.0 ** -8
  np.testing.assert_allclose(got, want, rtol=0, atol=2.5 * u * np.abs(vv).max())

SIZES = (1, 17, 64, 127, 128, 130, 256)

@pytest.mark.needs_device
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("S", SIZES)
def test_matches_float64_d64(S, causal):
  _check(S, 64, causal)

@pytest.mark.needs_device
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("S", [pytest.param(s, marks=pytest.mark.slow) if s not in (17, 130) else s for s in SIZES])
def test_matches_float64_d128(S, causal):
  _check(S, 128, causal)

@pytest.mark.needs_device
@pytest.mark.parametrize("D", [64, 128])
def test_bfloat16(D):
  _check(130, D, True, dtypes.bfloat16, batch=(1, 2), seed=1)

@pytest.mark.needs_device
def test_through_the_tensor_api():
  """scaled_dot_product_attention on EMU+NV: one kernel, the right numbers."""
  rng = np.random.default_rng(3)
  q, k, v = (rng.standard_normal((1, 2, 70, 64)).astype(np.float16) for _ in range(3))
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True)
  sched = out.schedule()
  assert sum(isinstance(si.ast.src[0].arg, AttentionTCArg) for si in sched) == 1
  np.testing.assert_allclose(out.numpy().astype(np.float64), _reference(q, k, v, True), atol=2.5 * 2 ** -11 * np.abs(v).max())

def _reference_grads(q, k, v, g, causal):
  q, k, v, g = (x.astype(np.float64) for x in (q, k, v, g))
  sc = 1 / np.sqrt(q.shape[-1])
  s = q @ np.swapaxes(k, -1, -2) * sc
  if causal: s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  o = p @ v
  ds = p * (g @ np.swapaxes(v, -1, -2) - (g * o).sum(-1, keepdims=True))
  return ds @ k * sc, np.swapaxes(ds, -1, -2) @ q * sc, np.swapaxes(p, -1, -2) @ g

@pytest.mark.needs_device
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gradients_from_the_kept_log_sum_exp(causal):
  """With an input asking for gradients the kernel also writes each row's log-sum-exp (float32 output, one more
  column); the backward recomputes P from it. Gradients come back in half: |err| <= a few half ulps of the largest."""
  rng = np.random.default_rng(4)
  q, k, v, g = (rng.standard_normal((1, 2, 70, 64)).astype(np.float16) for _ in range(4))
  tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
  out = tq.scaled_dot_product_attention(tk, tv, is_causal=causal)
  fused = [si.ast.src[0].arg for si in out.schedule() if isinstance(si.ast.src[0].arg, AttentionTCArg)]
  assert len(fused) == 1 and fused[0].with_lse
  (out.float() * Tensor(g).float()).sum().backward()
  for got, want in zip((tq.grad, tk.grad, tv.grad), _reference_grads(q, k, v, g, causal)):
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=0, atol=4 * 2 ** -11 * np.abs(want).max())

def test_bench_attention_row_uses_it():
  """bench/gpu.py's attention: B=8, H=16, S=2048, D=128 half, causal, no gradients -> one tensor-core attention kernel."""
  ast = _ast((8, 16, 2048, 128), (8, 16, 2048, 128), dtypes.half, True)
  assert isinstance(ast.src[0].arg, AttentionTCArg) and ast.src[0].arg.causal

# ---- the emulator catches a broken kernel

def _broken(edit):
  S, D = 130, 64
  bufs = [np.zeros((S, D), np.float16)] + [np.ones((S, D), np.float16)] * 3
  NV.run(NV.program(_ast((1, 1, S, D), (1, 1, S, D), dtypes.half, True)), bufs, edit=edit)

@pytest.mark.needs_device
def test_emulator_reports_missing_barriers_and_waits():
  _broken(lambda nodes: None)   # intact, it runs
  with pytest.raises(MissingBarrier, match=r"missing barrier: .*local \d+ index \d+"):
    _broken(NV.drop(lambda n: n.op is Ops.BARRIER and n.arg is None))
  # the barrier closing each key tile: without it the next tile's copies overwrite a stage other warps still read
  def closing(n): return n.op is Ops.BARRIER and n.arg is None and n.src and all(x.op is Ops.LOAD for x in n.src)
  with pytest.raises(MissingBarrier, match=r"missing barrier: write to local \d+ index \d+ read by"):
    _broken(NV.drop(closing))
  with pytest.raises(AsyncCopyPending, match=r"ldmatrix read of local \d+ index \d+ while an async copy into it is in flight"):
    _broken(NV.drop(lambda n: n.op is Ops.BARRIER and n.arg is not None and n.arg[0] == "async_wait"))

# ---- structure: what ptxas and the SASS say for sm_90

needs_nvrtc = pytest.mark.skipif(find_nvrtc() is None or find_ptxas() is None, reason="NVRTC or ptxas not found (no CUDA toolkit)")

def _compiled(D, causal=True, dt=dtypes.half):
  p = get_program(_ast((8, 16, 2048, D), (8, 16, 2048, D), dt, causal), CUDARenderer("sm_90"))
  cubin, log = ptxas_with_log(NVRTCCompiler("sm_90").to_ptx(p.src), "sm_90")
  return p, cubin, ptxas_usage(log)

@needs_nvrtc
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
def test_ptxas_d64_no_spills_two_blocks_per_sm(dt):
  p, _, use = _compiled(64, dt=dt)
  threads = p.local_size[0] * p.local_size[1] * p.local_size[2]
  assert threads == 128 and use["smem"] == 2 * 64 * (64 + 64) * 2   # two stages of 64-key K and V tiles
  assert use["spill_stores"] == 0 and use["spill_loads"] == 0 and use["stack"] == 0, use
  assert blocks_per_sm(use["registers"], use["smem"], threads, H200) >= 2, use

@needs_nvrtc
def test_ptxas_d128_no_spills_two_blocks_per_sm():
  """D=128: 64 KB of K/V stages, past the static 48 KB, so dynamic shared memory (ptxas reports none): counted by hand."""
  p, _, use = _compiled(128)
  assert use["spill_stores"] == 0 and use["spill_loads"] == 0 and use["stack"] == 0, use
  assert use["smem"] == 0 and "extern __shared__" in p.src
  assert blocks_per_sm(use["registers"], 2 * 64 * (128 + 128) * 2, 128, H200) >= 2, use

@needs_nvrtc
@pytest.mark.skipif(find_sass_tool() is None, reason="cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
def test_sass_tensor_cores_matrix_loads_async_copies_shuffles():
  from tinycore_nv.occupancy import sass_counts
  _, cubin, _ = _compiled(64)
  c = sass_counts(cubin)
  # per 64-key tile a warp issues, for each of its two m16 tiles (D=64: 32 rows a warp), 8 n-tiles x 4 k16 steps of S and
  # 4 k16 steps x 8 n-tiles of O: 128 HMMA, and 64 LDSM (each fragment feeds both m16 tiles); both key loops
  # (unmasked, masked) have that body
  assert c["HMMA"] >= 256 and c["HMMA"] == 2 * c["LDSM"], c
  assert c["LDGSTS"] >= 16 and c["SHFL"] >= 8, c
  assert c["LDL"] == 0 and c["STL"] == 0, c
