"""An MLP's SGD train step with fused epilogues: relu' read off relu's output, bias + relu written by the matmul before
it, the relu' mask applied by the matmul producing the gradient (gradient.py, engine/epilogue.py, engine/schedule.py).
Numerics against torch over three steps (with units tied at relu's kink, which must stay dead as in torch), the relu'
mask at ties, -0 and NaN under a non-uniform upstream gradient, and the kernels one step takes."""
import math
import numpy as np
import pytest
from tinycore import Tensor, TinyJit
from tinycore.engine.schedule import create_schedule
from tinycore.uop import Ops, GroupOp
pytestmark = pytest.mark.needs_device
torch = pytest.importorskip("torch")

LR = 0.05

def _params(rng, dims):
  ps = []
  for i in range(len(dims) - 1):
    w = (rng.standard_normal((dims[i], dims[i + 1])) * math.sqrt(2 / dims[i])).astype(np.float32)
    b = (rng.standard_normal(dims[i + 1]) * 0.1).astype(np.float32)
    ps += [w, b]
  # a hidden unit of each relu layer tied at the kink for every row: its pre-activation is exactly 0 (zero weights
  # in, zero bias), so relu'(0) = 0 keeps it at 0 forever; a gradient of 1 there would move it away from torch's
  for w, b in ((ps[0], ps[1]), (ps[2], ps[3])): w[:, 3] = 0; b[3] = 0
  return ps

def _inputs(rng, bs, dims):
  x = rng.standard_normal((bs, dims[0])).astype(np.float32)
  x[:2] = 0   # whole rows tied at the kink in the first layer where the bias is 0 too
  return x, np.eye(dims[-1], dtype=np.float32)[rng.integers(0, dims[-1], bs)]

def _loss(T, x, oh, ps):
  w1, b1, w2, b2, w3, b3 = ps
  h = (x @ w1 + b1).relu()
  h = (h @ w2 + b2).relu()
  return -((h @ w3 + b3).log_softmax(-1) * oh).sum(1).mean()

def _torch_steps(x, oh, ps, n):
  tp = [torch.tensor(p, requires_grad=True) for p in ps]
  F, losses = torch.nn.functional, []
  for _ in range(n):
    w1, b1, w2, b2, w3, b3 = tp
    h = F.relu(F.relu(torch.tensor(x) @ w1 + b1) @ w2 + b2)
    loss = -(F.log_softmax(h @ w3 + b3, -1) * torch.tensor(oh)).sum(1).mean()
    gs = torch.autograd.grad(loss, tp)
    with torch.no_grad():
      for p, g in zip(tp, gs): p -= LR * g
    losses.append(loss.item())
  return losses, [p.detach().numpy() for p in tp]

def _step(params):
  def step(x, oh):
    loss = _loss(Tensor, x, oh, params)
    for p, g in zip(params, loss.gradient(*params)): p.assign(p - g * LR)
    Tensor.realize(loss, *params)
    return loss
  return step

@pytest.mark.parametrize("jit", [False, True])
def test_three_sgd_steps_match_torch(jit):
  dims, bs = (48, 32, 32, 10), 16
  rng = np.random.default_rng(0)
  ps = _params(rng, dims)
  x, oh = _inputs(rng, bs, dims)
  exp_losses, exp_params = _torch_steps(x, oh, ps, 3)
  params = [Tensor(p).realize() for p in ps]
  step = _step(params)
  if jit: step = TinyJit(step)
  xt, oht = Tensor(x).realize(), Tensor(oh).realize()
  losses = [step(xt, oht).item() for _ in range(3)]
  np.testing.assert_allclose(losses, exp_losses, rtol=1e-4)
  for i, (got, exp) in enumerate(zip(params, exp_params)):
    np.testing.assert_allclose(got.numpy(), exp, rtol=1e-4, atol=1e-6, err_msg=f"parameter {i} after 3 steps")
  # the tied units stayed dead (torch: relu'(0) = 0), so a frontend passing the gradient at 0 can't match by luck
  for w, b in (params[0:2], params[2:4]):
    assert not w.numpy()[:, 3].any() and b.numpy()[3] == 0

def test_relu_mask_from_output_at_ties_signed_zero_and_nan():
  # a non-uniform upstream gradient, so a mask that passed or dropped the wrong elements shows in the values
  x = np.array([-2.0, -0.0, 0.0, 1e-30, -1e-30, 3.0, math.inf, -math.inf, math.nan], np.float32)
  up = np.arange(1, len(x) + 1, dtype=np.float32)
  xt = torch.tensor(x, requires_grad=True)
  (torch.relu(xt) * torch.tensor(up)).sum().backward()
  ours = Tensor(x)
  g, = (ours.relu() * Tensor(up)).sum().gradient(ours)
  np.testing.assert_array_equal(g.numpy(), xt.grad.numpy())
  # the other spelling, where(x > 0, x, 0), is 0 at NaN (so is its gradient): its mask read off the output agrees
  xt2 = torch.tensor(x, requires_grad=True)
  (torch.where(xt2 > 0, xt2, 0.0) * torch.tensor(up)).sum().backward()
  g2, = ((ours > 0).where(ours, 0.0) * Tensor(up)).sum().gradient(ours)
  np.testing.assert_array_equal(g2.numpy(), xt2.grad.numpy())

def test_relu_backward_reads_the_output_not_the_preactivation():
  x = Tensor(np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32))
  pre = x * 2 + 1
  out = pre.relu()
  g, = (out * 3).sum().gradient(x)
  # the mask compares relu's output (the WHERE node) with 0, so the pre-activation needn't outlive the forward
  fwd = set(out.uop.toposort())
  masks = [u for u in g.uop.toposort() if u.op in (Ops.CMPLT, Ops.CMPEQ) and u not in fwd]
  assert masks and all(u.src[0] is out.uop for u in masks), masks

def _schedule_kinds(bs, dims):
  """(reduction kernels, elementwise-only kernels) with an output of batch x hidden for one step's schedule."""
  rng = np.random.default_rng(2)
  params = [Tensor(p).realize() for p in _params(rng, dims)]
  x, oh = [Tensor(a).realize() for a in _inputs(rng, bs, dims)]
  loss = _loss(Tensor, x, oh, params)
  new = [(p - g * LR) for p, g in zip(params, loss.gradient(*params))]
  items = create_schedule([loss.uop] + [p.assign(n).uop for p, n in zip(params, new)])
  # (a kernel without arithmetic is a layout copy of an operand, panels for the next matmul: not counted)
  hidden = [it for it in items if not it.is_copy and it.bufs[0].size == bs * dims[1] and
            any(u.op in GroupOp.ALU or u.op is Ops.REDUCE_AXIS for u in it.ast.toposort())]
  reduces = [it for it in hidden if any(u.op is Ops.REDUCE_AXIS for u in it.ast.toposort())]
  return len(reduces), len(hidden) - len(reduces)

def test_each_batch_by_hidden_activation_and_gradient_is_one_matmul_kernel():
  # h1 = relu(x@w1+b1), h2 = relu(h1@w2+b2) and the masked gradients g2, g1: each written once, by the matmul that
  # produces it. Before the epilogues the pre-activations z1, z2 and the unmasked dh2, dh1 were kernels of their own,
  # and h1, g2, g1 were elementwise kernels reading them (3 matmul outputs + 4 more of this size per step)
  n_matmul, n_elementwise = _schedule_kinds(64, (96, 128, 128, 10))
  assert (n_matmul, n_elementwise) == (4, 0), (n_matmul, n_elementwise)
