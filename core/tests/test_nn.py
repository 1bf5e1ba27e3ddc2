"""nn layers against torch.nn with the same weights: forward values and input/weight gradients, plus init statistics."""
import math
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
from tinycore import Tensor, dtypes, nn
from tinycore.nn.state import get_state_dict

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)

def _copy_to_torch(ours, theirs, names):
  with torch.no_grad():
    for n in names: getattr(theirs, n).copy_(torch.tensor(getattr(ours, n).numpy()))

def _compare(layer, tlayer, x: np.ndarray, names, atol=1e-4, fwd=None, tfwd=None):
  """Same weights in both; compare y, dL/dx and dL/dw for L = sum(y * r) with a fixed random r."""
  _copy_to_torch(layer, tlayer, names)
  xt = Tensor(x, requires_grad=True)
  y = (fwd or layer)(xt)
  r = rng.standard_normal(y.shape).astype(np.float32)
  ws = [getattr(layer, n) for n in names]
  for w in ws: w.requires_grad = True
  grads = (y * Tensor(r)).sum().gradient(xt, *ws)
  Tensor.realize(y, *grads)
  tx = torch.tensor(x, requires_grad=True)
  ty = (tfwd or tlayer)(tx)
  (ty * torch.tensor(r)).sum().backward()
  np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), atol=atol, rtol=1e-3)
  np.testing.assert_allclose(grads[0].numpy(), tx.grad.numpy(), atol=atol, rtol=1e-3)
  for n, g in zip(names, grads[1:]): np.testing.assert_allclose(g.numpy(), getattr(tlayer, n).grad.numpy(), atol=atol, rtol=1e-3, err_msg=n)

def test_linear():
  l = nn.Linear(5, 3)
  assert l.weight.shape == (3, 5) and l.bias.shape == (3,)
  _compare(l, torch.nn.Linear(5, 3), rng.standard_normal((2, 5)).astype(np.float32), ["weight", "bias"])
  assert nn.Linear(5, 3, bias=False).bias is None

def test_linear_init_bounds():
  w = nn.Linear(64, 32).weight.numpy()
  bound = 1 / math.sqrt(64)  # kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  assert np.abs(w).max() <= bound + 1e-6 and np.abs(w).max() > 0.8 * bound and abs(w.mean()) < 0.02

def test_conv2d():
  c = nn.Conv2d(2, 3, 3, stride=2, padding=1)
  assert c.weight.shape == (3, 2, 3, 3)
  _compare(c, torch.nn.Conv2d(2, 3, 3, stride=2, padding=1), rng.standard_normal((1, 2, 6, 6)).astype(np.float32), ["weight", "bias"])

def test_conv2d_groups_dilation():
  c = nn.Conv2d(4, 2, (2, 3), dilation=2, groups=2, bias=False)
  _compare(c, torch.nn.Conv2d(4, 2, (2, 3), dilation=2, groups=2, bias=False), rng.standard_normal((1, 4, 6, 7)).astype(np.float32), ["weight"])

def test_conv1d():
  c = nn.Conv1d(2, 3, 3, padding=1)
  assert c.weight.shape == (3, 2, 3)
  _compare(c, torch.nn.Conv1d(2, 3, 3, padding=1), rng.standard_normal((2, 2, 7)).astype(np.float32), ["weight", "bias"])

def test_conv_transpose2d():
  c = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)
  assert c.weight.shape == (2, 3, 3, 3)
  _compare(c, torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1), rng.standard_normal((1, 2, 3, 3)).astype(np.float32),
           ["weight", "bias"])

def test_batchnorm_train_and_eval():
  bn, tbn = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
  x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32) * 2 + 1
  with torch.no_grad(): tbn.weight.copy_(torch.tensor([1.0, 2.0, 0.5])); tbn.bias.copy_(torch.tensor([0.0, 1.0, -1.0]))
  bn.weight, bn.bias = Tensor(np.array([1.0, 2.0, 0.5], np.float32)), Tensor(np.array([0.0, 1.0, -1.0], np.float32))
  with Tensor.train():
    _compare(bn, tbn, x, ["weight", "bias"])
  # running stats were updated exactly once, like torch's (realized first: an optimizer step does this via its buffers)
  Tensor.realize(bn.running_mean, bn.running_var, bn.num_batches_tracked)
  np.testing.assert_allclose(bn.running_mean.numpy(), tbn.running_mean.numpy(), atol=1e-5)
  np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), atol=1e-5)
  assert bn.num_batches_tracked.numpy()[0] == 1
  tbn.eval()
  y = bn(Tensor(x)).numpy()
  np.testing.assert_allclose(y, tbn(torch.tensor(x)).detach().numpy(), atol=1e-4)

def test_batchnorm1d():
  bn, tbn = nn.BatchNorm1d(4), torch.nn.BatchNorm1d(4)
  with Tensor.train(): _compare(bn, tbn, rng.standard_normal((5, 4)).astype(np.float32), ["weight", "bias"])

def test_layernorm():
  _compare(nn.LayerNorm(4), torch.nn.LayerNorm(4), rng.standard_normal((2, 3, 4)).astype(np.float32), ["weight", "bias"])
  _compare(nn.LayerNorm((3, 4)), torch.nn.LayerNorm((3, 4)), rng.standard_normal((2, 3, 4)).astype(np.float32), ["weight", "bias"])

def test_layernorm2d():
  ln, tln = nn.LayerNorm2d(3), torch.nn.LayerNorm(3)
  _compare(ln, tln, rng.standard_normal((2, 3, 2, 2)).astype(np.float32), ["weight", "bias"],
           tfwd=lambda x: tln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))

def test_rmsnorm():
  n, tn = nn.RMSNorm(4), torch.nn.RMSNorm(4, eps=1e-6)
  _compare(n, tn, rng.standard_normal((3, 4)).astype(np.float32), ["weight"])

def test_groupnorm():
  _compare(nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4), rng.standard_normal((2, 4, 3)).astype(np.float32), ["weight", "bias"])

def test_instancenorm():
  n, tn = nn.InstanceNorm(3), torch.nn.InstanceNorm2d(3, affine=True)
  _compare(n, tn, rng.standard_normal((2, 3, 2, 3)).astype(np.float32), ["weight", "bias"])

def test_embedding():
  e = nn.Embedding(5, 3)
  idx = np.array([[0, 4, 2], [2, 2, 1]])
  out = e(Tensor(idx, dtype=dtypes.int32))
  np.testing.assert_allclose(out.numpy(), e.weight.numpy()[idx], atol=1e-6)
  e.weight.requires_grad = True
  g, = out.sum().gradient(e.weight)
  np.testing.assert_allclose(g.numpy()[:, 0], np.bincount(idx.reshape(-1), minlength=5))

def test_lstmcell():
  c, tc = nn.LSTMCell(3, 4), torch.nn.LSTMCell(3, 4)
  names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
  _copy_to_torch(c, tc, names)
  x = rng.standard_normal((2, 3)).astype(np.float32)
  h0, c0 = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
  h, cc = c(Tensor(x), (Tensor(h0), Tensor(c0)))
  th, tcc = tc(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
  np.testing.assert_allclose(h.numpy(), th.detach().numpy(), atol=1e-5); np.testing.assert_allclose(cc.numpy(), tcc.detach().numpy(), atol=1e-5)
  h, _ = c(Tensor(x))
  np.testing.assert_allclose(h.numpy(), tc(torch.tensor(x))[0].detach().numpy(), atol=1e-5)

def test_state_dict_names_match_torch():
  assert set(get_state_dict(nn.BatchNorm2d(2))) == set(torch.nn.BatchNorm2d(2).state_dict())
  assert set(get_state_dict(nn.LSTMCell(2, 3))) == set(torch.nn.LSTMCell(2, 3).state_dict())

def test_same_shaped_layers_have_distinct_params():
  a, b = nn.LayerNorm(3), nn.LayerNorm(3)
  assert a.weight.uop is not b.weight.uop  # otherwise their gradients would be summed into one
  x = Tensor(rng.standard_normal((2, 3)).astype(np.float32))
  a.weight.requires_grad = b.weight.requires_grad = True
  ga, gb = (a(x) * 2 + b(x)).sum().gradient(a.weight, b.weight)
  np.testing.assert_allclose(ga.numpy(), 2 * gb.numpy(), atol=1e-5)
