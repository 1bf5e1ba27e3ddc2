"""A conv tile's epilogue on the C renderer: 16 output channels per vector stored into NCHW (opt.py VEC_S), the 8 pixel
rows' lanes regrouped into 8-wide stores (codegen/lane_stores.py) and transposed with shuffles (__tc_t8x16), against
float64 torch; and where the rows aren't 8 (a 7-wide feature map), lane by lane."""
import numpy as np
import pytest
from tinycore import Tensor, Device
from tinycore.codegen import get_program
pytestmark = pytest.mark.needs_device
torch = pytest.importorskip("torch")

def _conv_src(x: Tensor, w: Tensor, **kw) -> str:
  sched = x.conv2d(w, **kw).schedule()
  return get_program(sched[-1].ast, Device["CPU"].renderer).src

@pytest.mark.parametrize("shape,transposed", [((2, 5, 10, 16, 32), True), ((1, 16, 9, 24, 48), True), ((1, 8, 7, 7, 32), False)])
def test_conv_epilogue(shape, transposed):
  r = Device["CPU"].renderer
  if r.register_block is None or not r.vector_types or r.register_block[1] < 32: pytest.skip("no AVX-512-sized register block")
  n, cin, h, wd, cout = shape
  rng = np.random.default_rng(1)
  xn, wn = rng.standard_normal((n, cin, h, wd)).astype(np.float32), rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
  x, w = Tensor(xn, device="CPU"), Tensor(wn, device="CPU")
  src = _conv_src(x, w, padding=1)
  assert ("__tc_t8x16(" in src) == transposed, src
  got = x.conv2d(w, padding=1).numpy()
  exp = torch.nn.functional.conv2d(torch.tensor(xn, dtype=torch.float64), torch.tensor(wn, dtype=torch.float64), padding=1).numpy()
  assert np.abs(got - exp).max() / np.abs(exp).max() < 1e-5
