"""Column sums (a bias gradient: the rows of a batch added per column) on the CPU: the heuristic reads 4 vectors of
columns side by side so the long reduce down the rows runs as 4 independent add chains (codegen/opt.py's fallback),
and the values at row and column counts around the vector width and the 4-vector tile agree with numpy in float64."""
import numpy as np
import pytest
from tinycore import Tensor, Device
from tinycore.codegen import lower_kernel
from tinycore.codegen.opt import heuristic_opts
from tinycore.codegen.split import split_ranges
from tinycore.rewrite import graph_rewrite
from tinycore.symbolic import symbolic
pytestmark = pytest.mark.needs_device

def _opts(out: Tensor):
  k = split_ranges(graph_rewrite(lower_kernel(out.schedule()[-1].ast), symbolic))
  return heuristic_opts(k, Device["CPU"].renderer)

def test_long_column_sum_takes_four_vectors():
  if not Device["CPU"].renderer.vector_types: pytest.skip("a renderer without vector types")
  assert _opts(Tensor.empty(256, 512, device="CPU").sum(0)) == (("VEC", ("g", 0), 16), ("UPCAST", ("g", 0), 4))
  # and the SGD update of a bias fused after it keeps the tile
  b = Tensor.empty(512, device="CPU")
  assert _opts(b - Tensor.empty(256, 512, device="CPU").sum(0) * 0.01)[1:] == (("UPCAST", ("g", 0), 4),)
  # a short reduce has little add chain to hide (24 rows), too few columns leave no second tile for another thread
  assert _opts(Tensor.empty(24, 512, device="CPU").sum(0)) == (("VEC", ("g", 0), 16),)
  assert _opts(Tensor.empty(256, 64, device="CPU").sum(0)) == (("VEC", ("g", 0), 16),)

@pytest.mark.parametrize("rows", [1, 15, 16, 17, 31, 32, 33, 257])
@pytest.mark.parametrize("cols", [16, 64, 128, 192, 512, 1024])
def test_column_sum_values(rows, cols):
  a = np.random.default_rng(rows * 7919 + cols).standard_normal((rows, cols)).astype(np.float32)
  b = np.random.default_rng(cols).standard_normal(cols).astype(np.float32)
  np.testing.assert_allclose(Tensor(a).sum(0).numpy(), a.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5 * np.sqrt(rows))
  # the bias step: b - lr * column sum, in place like an SGD update
  bt = Tensor(b).realize()
  bt.assign(bt - Tensor(a).sum(0) * 0.01).realize()
  np.testing.assert_allclose(bt.numpy(), b - 0.01 * a.astype(np.float64).sum(0), rtol=1e-5, atol=1e-6 * np.sqrt(rows))
