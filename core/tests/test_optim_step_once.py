"""One optimizer step is one update (engine/assign_once.py): under TinyJit (capture, then replays) and when something
reads a parameter through another graph right after the step, SGD and Adam match torch.optim step for step. A step
whose assigns ran twice (once in the step's realize, again when a graph still holding them is realized) would
move the parameter twice."""
import numpy as np
import pytest
from tinycore import Tensor, TinyJit
from tinycore.nn import optim

pytestmark = pytest.mark.needs_device
torch = pytest.importorskip("torch")

rng = np.random.default_rng(1)
W0 = rng.standard_normal((7, 5)).astype(np.float32)
XS = [rng.standard_normal((9, 7)).astype(np.float32) for _ in range(6)]
YS = [rng.standard_normal((9, 5)).astype(np.float32) for _ in range(6)]

OPTS = {
  "sgd_momentum": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
  "adam": (lambda p: optim.Adam(p, lr=0.03), lambda p: torch.optim.Adam(p, lr=0.03)),
}

def _torch_trace(make):
  w = torch.tensor(W0.copy(), requires_grad=True)
  opt, out = make([w]), []
  for x, y in zip(XS, YS):
    opt.zero_grad()
    ((torch.tensor(x) @ w - torch.tensor(y)) ** 2).mean().backward()
    opt.step()
    out.append(w.detach().numpy().copy())
  return out

def _ours_trace(make, jit: bool, read_through: bool):
  w = Tensor(W0.copy(), requires_grad=True)
  opt = make([w])
  def step(x, y):
    opt.zero_grad()
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss.realize()
  f = TinyJit(step) if jit else step
  out = []
  for x, y in zip(XS, YS):
    f(Tensor(x), Tensor(y))
    if read_through:   # a second graph on the parameter, realized before the parameter itself is read
      doubled = w * 2
      got = doubled.numpy() / 2
      np.testing.assert_allclose(w.numpy(), got, rtol=1e-6, atol=1e-6)
    out.append(w.numpy().copy())
  return out

@pytest.mark.parametrize("name", list(OPTS))
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("read_through", [False, True], ids=["plain", "read_through"])
def test_one_update_per_step(name, jit, read_through):
  ours, theirs = OPTS[name]
  want = _torch_trace(theirs)
  got = _ours_trace(ours, jit, read_through)
  for i, (g, t) in enumerate(zip(got, want)):
    np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-5, err_msg=f"after step {i + 1}")

def test_read_through_a_graph_built_before_the_step():
  # b holds the step's assign on w (built from the pending update): realizing b runs the step, w then reads the result
  w = Tensor(W0.copy()).realize()
  w.assign(w - 0.5)
  b = w * 3
  np.testing.assert_allclose(b.numpy(), (W0 - 0.5) * 3, rtol=1e-6)
  np.testing.assert_allclose(w.numpy(), W0 - 0.5, rtol=1e-6)
  np.testing.assert_allclose((w + 0).numpy(), W0 - 0.5, rtol=1e-6)
