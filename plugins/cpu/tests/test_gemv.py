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
          (1, 1024, 4098), (1, 1024, 1028)]
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
