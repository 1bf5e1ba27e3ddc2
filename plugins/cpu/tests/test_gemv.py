"""Matrix-vector products (LLM decode: 1..8 rows of activations against a weight read once) on the CPU: values against
numpy in float64 at the decode shapes and at sizes no vector width divides, and the shape of the kernels codegen
builds for them: the kernel that reads (nearly) the whole weight uses vector loads, and `vector @ row-major matrix` is
cut into row chunks (schedule.py) so both cores stream whole rows."""
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.codegen import lower_kernel
from tinycore.codegen.opt import _heuristic
from tinycore.codegen.split import split_ranges
from tinycore.rewrite import graph_rewrite
from tinycore.symbolic import symbolic
from tinycore.uop import Ops
pytestmark = pytest.mark.needs_device

SHAPES = [(1, 4096, 4096), (1, 576, 1536), (1, 1536, 576), (2, 4096, 4096), (4, 1024, 1000), (8, 4096, 4096),
          (1, 4095, 4097), (1, 4097, 4095), (1, 4095, 4096), (1, 4096, 4097), (3, 4097, 4095), (1, 100, 70), (1, 64, 4097),
          (1, 1024, 4098), (1, 1024, 1028), (1, 4096, 11008), (3, 2048, 1024), (5, 2048, 1024), (6, 1024, 512),
          (7, 2048, 1024), (1, 1088, 256),
          # sizes around the vector width and the row-chunk threshold (1024), odd primes, single rows and columns
          (1, 1, 33), (1, 33, 1), (1, 15, 17), (1, 17, 15), (1, 16, 16), (1, 31, 33), (2, 33, 31), (1, 1535, 576),
          (1, 1537, 576), (1, 576, 1535), (1, 576, 1537), (4, 1537, 577), (8, 1535, 33), (1, 1023, 1024),
          (1, 1025, 1024), (1, 2048, 2048), (1, 3, 4096)]
LAYOUTS = ["xw", "wx"]   # x @ W with W [K, N] row-major; x @ W.T with W [N, K] (each output reads a row of W)

def _operands(M, K, N, lay, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((M, K)).astype(np.float32)
  w = rng.standard_normal((K, N) if lay == "xw" else (N, K)).astype(np.float32)
  return x, w

def _product(x: Tensor, w: Tensor, lay: str) -> Tensor: return x @ w if lay == "xw" else x @ w.T

@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("M,K,N", SHAPES)
def test_gemv_values(M, K, N, lay):
  x, w = _operands(M, K, N, lay)
  out = _product(Tensor(x, device="CPU"), Tensor(w, device="CPU"), lay).numpy()
  ref = x.astype(np.float64) @ (w if lay == "xw" else w.T).astype(np.float64)
  assert out.shape == ref.shape
  # float32 sums of K products of unit normals: error ~ sqrt(K) * eps * |terms|, far below 1e-5 of the largest output
  np.testing.assert_allclose(out, ref, rtol=0, atol=2e-5 * np.abs(ref).max())

def test_gemv_values_with_bias_and_in_a_chain():
  """The split parts fuse with what follows (a bias, an activation) and a second product reads the result."""
  rng = np.random.default_rng(1)
  x, w1, b, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((1, 4095), (4095, 1537), (1537,), (1537, 577)))
  out = ((Tensor(x) @ Tensor(w1) + Tensor(b)).relu() @ Tensor(w2)).numpy()
  ref = np.maximum(x.astype(np.float64) @ w1 + b, 0) @ w2
  np.testing.assert_allclose(out, ref, rtol=0, atol=2e-5 * np.abs(ref).max())

def _kernels(out: Tensor):
  """(lowered kernel, its output buffer's size, loop iterations) per kernel of the schedule."""
  res = []
  for it in out.schedule():
    if it.ast.op is Ops.COPY: continue
    k = split_ranges(graph_rewrite(lower_kernel(it.ast), symbolic))
    iters = 1
    for u in {u for u in k.toposort() if u.op is Ops.RANGE}: iters *= u.src[0].arg
    res.append((k, it.bufs[0].size, iters))
  return res

@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("M,K,N", [(1, 4096, 4096), (1, 4095, 4097), (1, 4097, 4095), (2, 4095, 4097), (1, 4096, 11008),
                                   (2, 4096, 4096), (4, 4096, 4096), (8, 4096, 4096), (3, 1024, 1000)])
def test_gemv_path(M, K, N, lay):
  """The kernel doing most of the multiply-adds gets vector loads (VEC on the output axis the weight is contiguous
  along, or VEC_R on a contiguous reduce); x @ W is cut into row chunks (its output holds several partial rows); and
  with several activation rows, every row is unrolled: no output loop is left that the weight doesn't depend on (one
  the threads would split, each streaming the whole weight)."""
  from tinycore import Device
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  x, w = Tensor.empty(M, K, device="CPU"), Tensor.empty(*((K, N) if lay == "xw" else (N, K)), device="CPU")
  ks = _kernels(_product(x, w, lay))
  k, out_size, iters = max(ks, key=lambda t: t[2])
  assert iters >= 0.9 * M * K * N, f"no kernel covers most of the product: {[t[2] for t in ks]}"
  opts, opt_k = _heuristic(k, r)
  assert any(o[0] in ("VEC", "VEC_R") and o[2] >= 8 for o in opts), opts
  if lay == "xw" and K >= 1024: assert out_size >= 4 * M * (N - N % 16), f"x @ W not cut into row chunks (output of {out_size})"
  loads = [u.src[0] for u in opt_k.toposort() if u.op is Ops.LOAD]
  weight = max(loads, key=lambda ind: ind.src[0].dtype.size)
  left = [u.arg for u in opt_k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g" and u not in weight.toposort()]
  assert not left, f"output loops the weight doesn't depend on: {left} (opts {opts})"
  # the tails (what no vector width divides) stay a small part of the work
  assert sum(t[2] for t in ks) - iters <= 0.1 * M * K * N

@pytest.mark.parametrize("N,streams", [(4096, 4), (1028, 4), (4098, 2), (4097, 1)])
def test_long_rows_streamed_side_by_side(N, streams):
  """x @ W.T at one activation row with rows of at least 1024: each thread reads ROW_STREAMS rows of W at once (2 where
  N allows only that), one accumulator chain per row (no second one per row on top of four chains)."""
  from tinycore import Device
  from tinycore.codegen import opt_gemv
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  assert opt_gemv.ROW_STREAMS == 4
  x, w = Tensor.empty(1, 1024, device="CPU"), Tensor.empty(N, 1024, device="CPU")
  k = max(_kernels(_product(x, w, "wx")), key=lambda t: t[2])[0]
  opts, _ = _heuristic(k, r)
  ups = [o[2] for o in opts if o[0] == "UPCAST"]
  assert ups == ([streams] if streams > 1 else []), opts
  assert any(o[0] == "UPCAST_R" for o in opts) == (streams < 4), opts

@pytest.mark.parametrize("M,streams", [(2, 8), (3, 8), (4, 8), (5, 4), (8, 4)])
def test_batched_rows_take_more_weight_rows(M, streams):
  """x @ W.T at 2..8 activation rows and rows of W of >= 1024: up to 8 rows of W side by side, as many as ROW_ACCS
  accumulators allow (M x streams <= ROW_ACCS), each load of x feeding that many FMAs, and no second accumulator per
  product on top."""
  from tinycore import Device
  from tinycore.codegen import opt_gemv
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  assert opt_gemv.ROW_ACCS == 32
  budget = opt_gemv.register_share(r, opt_gemv.ROW_ACCS)   # 32 with AVX-512 (the figures above); AVX2 holds a quarter
  if budget != 32: streams = next((s for s in (8, 4, 2) if M * s <= budget), 1)
  x, w = Tensor.empty(M, 4096, device="CPU"), Tensor.empty(4096, 4096, device="CPU")
  k = max(_kernels(_product(x, w, "wx")), key=lambda t: t[2])[0]
  opts, _ = _heuristic(k, r)
  ups = sorted(o[2] for o in opts if o[0] == "UPCAST")
  assert ups == sorted([M, streams]), opts
  assert not any(o[0] == "UPCAST_R" for o in opts), opts

def test_register_share_scales_to_the_register_file():
  """The accumulator budgets are AVX-512's (32 registers x 16 floats); AVX2/NEON's 16 x 8 hold a quarter, at least 1."""
  from types import SimpleNamespace
  from tinycore.codegen.opt_gemv import register_share
  assert register_share(SimpleNamespace(attention_vector=(16, 32)), 32) == 32
  assert register_share(SimpleNamespace(attention_vector=None), 16) == 16
  assert register_share(SimpleNamespace(attention_vector=(8, 16)), 32) == 8
  assert register_share(SimpleNamespace(attention_vector=(8, 16)), 16) == 4
  assert register_share(SimpleNamespace(attention_vector=(4, 8)), 2) == 1

def _chunk_kernel(M: int, K: int, N: int):
  x, w = Tensor.empty(M, K, device="CPU"), Tensor.empty(K, N, device="CPU")
  return max(_kernels(_product(x, w, "xw")), key=lambda t: t[2])[0]

@pytest.mark.parametrize("M", [1, 2, 5, 8])
def test_row_chunk_streams_rows_side_by_side(M):
  """x @ W in row chunks: CHUNK_UNROLL rows of the weight per trip of the reduce loop, all summed into the same
  accumulators (UNROLL), and each accumulator updated by one FMA chain that starts from it (one load and store of an
  L1-resident accumulator per CHUNK_UNROLL weight vectors, not one per vector)."""
  from tinycore import Device
  from tinycore.codegen import opt_gemv, get_program
  from tinycore.codegen.mma_accumulate import FMA_CHAIN
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  assert opt_gemv.CHUNK_UNROLL == 4
  x, w = Tensor.empty(M, 4096, device="CPU"), Tensor.empty(4096, 4096, device="CPU")
  it = max((it for it in _product(x, w, "xw").schedule() if it.ast.op is not Ops.COPY), key=lambda it: it.bufs[0].size)
  k = split_ranges(graph_rewrite(lower_kernel(it.ast), symbolic))
  opts, _ = _heuristic(k, r)
  assert [o for o in opts if o[0] == "UNROLL"] == [("UNROLL", next(o[1] for o in opts if o[0] == "UNROLL"), 4)], opts
  uops = get_program(it.ast, r).uops
  accs = [u for u in uops if u.op is Ops.DEFINE_REG and u.dtype.count == 16]
  assert accs and len(accs) % M == 0 and len(accs) <= opt_gemv.CHUNK_ACCS, len(accs)
  starts = {u.src[2] for u in uops if u.op is Ops.MULACC and u.arg == FMA_CHAIN and u.src[2].op is Ops.DEFINE_REG}
  assert starts == set(accs), f"{len(set(accs) - starts)} accumulators not updated by an FMA chain that starts from them"
  chain = lambda u: 1 + chain(u.src[2]) if u.op is Ops.MULACC and u.arg == FMA_CHAIN else 0
  ends = [u.src[1] for u in uops if u.op is Ops.ASSIGN and u.src[0] in starts]
  assert ends and all(chain(e) == 4 for e in ends), sorted({chain(e) for e in ends})

def test_unroll_replays_and_checks_its_amount():
  """UNROLL is an action like the others: BEAM and the kernel cache replay it from the opts alone (same numbers as the
  heuristic's kernel), and an amount that doesn't divide the reduce is refused, not applied to the wrong elements."""
  from tinycore import Device
  from tinycore.codegen.opt import apply_opt, InvalidOpt
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  k = _chunk_kernel(1, 4096, 4096)
  opts, _ = _heuristic(k, r)
  rax = next(o[1] for o in opts if o[0] == "UNROLL")
  with pytest.raises(InvalidOpt, match="doesn't divide"): apply_opt(k, ("UNROLL", rax, 3))
  with pytest.raises(InvalidOpt, match="reduce axis"): apply_opt(k, ("UNROLL", next(o[1] for o in opts if o[0] == "VEC"), 2))
  # replayed with other amounts: the same partial sums per row chunk as numpy's
  from tinycore.codegen import get_program
  dev = Device["CPU"]
  x, w = _operands(1, 2048, 512, "xw", seed=3)
  xt, wt = Tensor(x, device="CPU").realize(), Tensor(w, device="CPU").realize()
  it = max((it for it in (xt @ wt).schedule() if it.ast.op is not Ops.COPY), key=lambda it: it.bufs[0].size)
  k = split_ranges(graph_rewrite(lower_kernel(it.ast), symbolic))
  opts, _ = _heuristic(k, r)
  assert any(o[0] == "UNROLL" for o in opts), opts
  out = it.bufs[0]
  if not out.is_allocated(): out.allocate()
  chunks = out.size // 512
  ref = (x[0].astype(np.float64).reshape(chunks, -1, 1) * w.astype(np.float64).reshape(chunks, -1, 512)).sum(axis=1)
  for amt in (2, 4, 8):
    p = get_program(it.ast, r, tuple(o if o[0] != "UNROLL" else (o[0], o[1], amt) for o in opts))
    prg = dev.compiler.load_cached(p.src, lambda lib, p=p: dev.runtime(p.name, lib))
    prg(*[b._buf for b in it.bufs], global_size=p.global_size, local_size=p.local_size, vals=(), wait=True, work=p.ops + p.mem)
    got = np.frombuffer(out.as_buffer(), dtype=np.float32).reshape(chunks, 512)
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5 * np.abs(ref).max(), err_msg=f"UNROLL {amt}")

@pytest.mark.parametrize("M,K,N", [(1, 4096, 4096), (4, 1536, 576), (1, 2048, 1024)])
def test_row_chunk_sum_reads_vectors(M, K, N):
  """The second stage of x @ W in row chunks (each output the sum of a few chunks' partial rows, a reduce of <= 16 down
  a column) reads and adds whole vectors along the outputs, not one scalar per output (9 -> 2 us at 4096 wide)."""
  from tinycore import Device
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  ks = _kernels(_product(Tensor.empty(M, K, device="CPU"), Tensor.empty(K, N, device="CPU"), "xw"))
  assert len(ks) == 2, [t[2] for t in ks]
  k = min(ks, key=lambda t: t[2])[0]
  assert max(u.src[0].arg for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "r") <= 16
  inner = max((u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda u: u.arg)   # contiguous outputs
  opts, _ = _heuristic(k, r)
  assert ("VEC", inner.arg, 16) in opts, opts

@pytest.mark.parametrize("rows", [1, 2, 3, 8, 15, 16])
@pytest.mark.parametrize("cols", [1, 15, 16, 17, 33, 48, 1535, 1537, 4096])
def test_column_sums(rows, cols):
  """Sums down <= 16 rows (the short-reduce tile, vectorized along the outputs where 16 divides them) against numpy."""
  x = np.random.default_rng(rows * 7919 + cols).standard_normal((rows, cols)).astype(np.float32)
  out = Tensor(x, device="CPU").sum(0).numpy()
  ref = x.astype(np.float64).sum(0)
  np.testing.assert_allclose(out, ref, rtol=0, atol=1e-6 * rows * max(1.0, np.abs(x).max()))
