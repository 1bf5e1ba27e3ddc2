"""Optimizers: a few steps on a small problem against torch.optim with identical settings, plus the API around step()."""
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
from tinycore import Tensor, nn
from tinycore.nn import optim

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)
W0, X = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
Y = rng.standard_normal((5, 4)).astype(np.float32)

def _run_ours(make, steps=3):
  w = Tensor(W0.copy(), requires_grad=True)
  opt = make([w])
  for _ in range(steps):
    opt.zero_grad()
    ((Tensor(X) @ w - Tensor(Y)) ** 2).mean().backward()
    opt.step()
  return w.numpy()

def _run_torch(make, steps=3):
  w = torch.tensor(W0.copy(), requires_grad=True)
  opt = make([w])
  for _ in range(steps):
    opt.zero_grad()
    ((torch.tensor(X) @ w - torch.tensor(Y)) ** 2).mean().backward()
    opt.step()
  return w.detach().numpy()

@pytest.mark.parametrize("name,ours,theirs", [
  ("sgd", lambda p: optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
  ("sgd_momentum_wd", lambda p: optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
   lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01)),
  ("sgd_nesterov", lambda p: optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True)),
  ("adam", lambda p: optim.Adam(p, lr=0.05), lambda p: torch.optim.Adam(p, lr=0.05)),
  ("adamw", lambda p: optim.AdamW(p, lr=0.05, weight_decay=0.1), lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1)),
])
def test_against_torch(name, ours, theirs):
  np.testing.assert_allclose(_run_ours(ours), _run_torch(theirs), atol=1e-5, rtol=1e-5)

def _lamb_reference(steps=3, lr=0.01, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
  """LAMB by hand in numpy (You et al.): Adam direction plus decoupled decay, scaled by the trust ratio ||w|| / ||update||."""
  w, m, v = W0.astype(np.float64).copy(), 0, 0
  for t in range(1, steps + 1):
    g = 2 * X.T @ (X @ w - Y) / Y.size
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    up = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wd * w
    w = w - lr * (np.linalg.norm(w) / np.linalg.norm(up)) * up
  return w

def test_lamb_by_hand():
  np.testing.assert_allclose(_run_ours(lambda p: optim.LAMB(p, lr=0.01, weight_decay=0.01)), _lamb_reference(), atol=1e-5, rtol=1e-4)

def test_optimizer_group_and_lr_tensor():
  a, b = Tensor(np.ones(3, np.float32), requires_grad=True), Tensor(np.ones(2, np.float32), requires_grad=True)
  g = optim.OptimizerGroup(optim.SGD([a], lr=0.5), optim.SGD([b], lr=0.25))
  g.zero_grad()
  ((a * 2).sum() + (b * 4).sum()).backward()
  g.step()
  np.testing.assert_allclose(a.numpy(), [0, 0, 0]); np.testing.assert_allclose(b.numpy(), [0, 0])
  assert g[0].params[0] is a
  g[1].lr.assign(g[1].lr * 0 + 1.0).realize()  # a new learning rate is data, not a recompile
  g.zero_grad(); assert a.grad is None
  (b * 4).sum().backward(); g[1].step()
  np.testing.assert_allclose(b.numpy(), [-4, -4])

def test_params_get_requires_grad_and_model_trains():
  l = nn.Linear(3, 1)
  assert l.weight.requires_grad is None
  opt = optim.Adam(nn.state.get_parameters(l), lr=0.1)
  assert l.weight.requires_grad is True
  x, y = Tensor(X), Tensor(X @ np.array([[1.0], [-2.0], [0.5]], np.float32))
  losses = []
  for _ in range(20):
    opt.zero_grad()
    loss = ((l(x) - y) ** 2).mean()
    loss.backward(); opt.step()
    losses.append(loss.item())
  assert losses[-1] < 0.2 * losses[0]

def test_skips_params_without_grad_and_lr_scheduler():
  a, b = Tensor(np.ones(2, np.float32), requires_grad=True), Tensor(np.ones(2, np.float32), requires_grad=True)
  opt = optim.SGD([a, b], lr=1.0)
  (a * 3).sum().backward()
  opt.step()
  np.testing.assert_allclose(a.numpy(), [-2, -2]); np.testing.assert_allclose(b.numpy(), [1, 1])
  sched = optim.StepLR(opt, step_size=1, gamma=0.5)
  sched.step()
  np.testing.assert_allclose(opt.lr.numpy(), [0.5])

def test_sgd_update_writes_in_place_and_shifted_reads_still_copy():
  """The update of a weight the forward pass read through a transpose is computed straight into the weight (the forward
  kernel has already run), while an assign that itself reads the target shifted goes through a temporary."""
  import numpy as np
  from tinycore import Tensor
  rng = np.random.default_rng(3)
  x, w0 = rng.standard_normal((32, 24)).astype(np.float32), rng.standard_normal((16, 24)).astype(np.float32)
  X, W = Tensor(x), Tensor(w0.copy()).realize()
  y = (X @ W.T).relu()
  loss = y.sum()
  (g,) = loss.gradient(W)
  sched = [si for si in Tensor.schedule(loss, W.assign(W - g * 0.1)) if not si.is_copy]
  from tinycore.uop import GroupOp, Ops
  # no copy kernel (loss's sum reads relu(X @ W.T), which the matmul wrote as its epilogue: a reduction, not a copy)
  assert not [si for si in sched if len(si.bufs) == 2 and not any(u.op in GroupOp.ALU or u.op is Ops.REDUCE_AXIS for u in si.ast.toposort())]
  Tensor.realize(loss, W)
  gy = (x @ w0.T > 0).astype(np.float32)
  np.testing.assert_allclose(W.numpy(), w0 - 0.1 * (gy.T @ x), rtol=1e-5, atol=1e-5)
  a = Tensor(np.arange(6, dtype=np.float32)).realize()
  a.assign(a.flip(0) + 1).realize()
  np.testing.assert_array_equal(a.numpy(), np.arange(6, dtype=np.float32)[::-1] + 1)
