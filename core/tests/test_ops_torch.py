"""Ops where PyTorch is the reference (conv, pooling, resize, losses, attention, activations, scatter_reduce), skipped without torch."""
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
torch = pytest.importorskip("torch")
F = torch.nn.functional
from tinycore import Tensor

def close(got, exp, atol=1e-4, rtol=1e-4):
  g, e = got.numpy(), exp.detach().numpy()
  assert g.shape == e.shape, f"shape {g.shape} != torch {e.shape}"
  np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, equal_nan=True)

R = np.random.default_rng(0)
X = R.standard_normal((2, 3, 7, 6)).astype(np.float32)
TX = torch.tensor(X)

@pytest.mark.parametrize("ws,kw",
                         [((4, 3, 3, 2), {}), ((4, 3, 3, 2), {"stride": 2, "padding": 1, "dilation": (2, 1)}),
                          ((6, 1, 3, 3), {"groups": 3, "padding": (1, 2)}),
                                   ((4, 3, 3, 2), {"stride": 3}), ((4, 3, 3, 3), {"padding": "same"})], ids=str)
def test_conv2d(ws, kw):
  w, b = R.standard_normal(ws).astype(np.float32), R.standard_normal(ws[0]).astype(np.float32)
  close(Tensor(X).conv2d(Tensor(w), Tensor(b), **kw), F.conv2d(TX, torch.tensor(w), torch.tensor(b), **kw))

def test_conv1d():
  x, w = R.standard_normal((2, 3, 10)).astype(np.float32), R.standard_normal((5, 3, 3)).astype(np.float32)
  close(Tensor(x).conv1d(Tensor(w), padding=1, stride=2), F.conv1d(torch.tensor(x), torch.tensor(w), padding=1, stride=2))

@pytest.mark.parametrize("ws,kw",
                         [((3, 4, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}), ((3, 2, 2, 3), {"groups": 3, "dilation": 2}),
                          ((3, 1, 1, 1), {})], ids=str)
def test_conv_transpose2d(ws, kw):
  w = R.standard_normal(ws).astype(np.float32)
  close(Tensor(X).conv_transpose2d(Tensor(w), **kw), F.conv_transpose2d(TX, torch.tensor(w), **kw))

@pytest.mark.parametrize("kw", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1}, {"kernel_size": 3, "stride": 2, "ceil_mode": True},
                                {"kernel_size": (2, 3), "stride": 1, "dilation": (2, 1)}], ids=str)
def test_pools(kw):
  close(Tensor(X).max_pool2d(**kw), F.max_pool2d(TX, **kw))
  if "dilation" not in kw:
    close(Tensor(X).avg_pool2d(**kw), F.avg_pool2d(TX, **kw))
    if kw.get("padding"): close(Tensor(X).avg_pool2d(**kw, count_include_pad=False), F.avg_pool2d(TX, **kw, count_include_pad=False))
  _, i = Tensor(X).max_pool2d(**kw, return_indices=True)
  close(i, F.max_pool2d(TX, **kw, return_indices=True)[1].int())

@pytest.mark.parametrize("mode,ac", [("nearest", False), ("nearest-exact", False), ("linear", False), ("linear", True)])
def test_interpolate(mode, ac):
  tm = "bilinear" if mode == "linear" else mode
  kw = {"align_corners": ac} if mode == "linear" else {}
  for size in [(10, 4), (3, 9)]: close(Tensor(X).interpolate(size, mode=mode, **kw), F.interpolate(TX, size, mode=tm, **kw))

def test_losses():
  logits, y = R.standard_normal((4, 5)).astype(np.float32), np.array([1, 0, 4, 2])
  L, TL, Y, TY = Tensor(logits), torch.tensor(logits), Tensor(y.astype(np.int32)), torch.tensor(y)
  close(L.cross_entropy(Y), F.cross_entropy(TL, TY))
  close(L.cross_entropy(Y, label_smoothing=0.1, reduction="sum"), F.cross_entropy(TL, TY, label_smoothing=0.1, reduction="sum"))
  l3, y3 = R.standard_normal((2, 5, 3)).astype(np.float32), R.integers(0, 5, (2, 3))
  close(Tensor(l3).cross_entropy(Tensor(y3.astype(np.int32)), reduction="none"),
        F.cross_entropy(torch.tensor(l3), torch.tensor(y3), reduction="none"))
  probs = F.softmax(torch.tensor(R.standard_normal((4, 5)).astype(np.float32)), 1)
  close(L.cross_entropy(Tensor(probs.numpy())), F.cross_entropy(TL, probs))
  close(L.sparse_categorical_crossentropy(Tensor(np.array([1, -1, 4, 2], np.int32))),
        F.cross_entropy(TL, torch.tensor([1, -1, 4, 2]), ignore_index=-1))
  close(L.sparse_categorical_crossentropy(Y, label_smoothing=0.2), F.cross_entropy(TL, TY, label_smoothing=0.2))
  lp = F.log_softmax(TL, 1)
  w = R.random(5).astype(np.float32)
  close(Tensor(lp.numpy()).nll_loss(Y), F.nll_loss(lp, TY))
  close(Tensor(lp.numpy()).nll_loss(Y, weight=Tensor(w), ignore_index=0), F.nll_loss(lp, TY, weight=torch.tensor(w), ignore_index=0))
  p, t, z = R.random(10).astype(np.float32), (R.random(10) > 0.5).astype(np.float32), R.standard_normal(10).astype(np.float32) * 3
  close(Tensor(p).binary_crossentropy(Tensor(t)), F.binary_cross_entropy(torch.tensor(p), torch.tensor(t)))
  close(Tensor(z).binary_crossentropy_logits(Tensor(t)), F.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(t)))
  close(Tensor(z).binary_crossentropy_logits(Tensor(t), pos_weight=Tensor([2.0])),
        F.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(t), pos_weight=torch.tensor([2.0])))

def test_sdpa():
  q, k, v = [R.standard_normal((2, 3, 5, 8)).astype(np.float32) for _ in range(3)]
  T, TT = [Tensor(a) for a in (q, k, v)], [torch.tensor(a) for a in (q, k, v)]
  close(T[0].scaled_dot_product_attention(T[1], T[2]), F.scaled_dot_product_attention(*TT))
  close(T[0].scaled_dot_product_attention(T[1], T[2], is_causal=True), F.scaled_dot_product_attention(*TT, is_causal=True))
  m = R.random((5, 5)) > 0.3; np.fill_diagonal(m, True)
  close(T[0].scaled_dot_product_attention(T[1], T[2], attn_mask=Tensor(m)), F.scaled_dot_product_attention(*TT, attn_mask=torch.tensor(m)))
  fm = R.standard_normal((5, 5)).astype(np.float32)
  close(T[0].scaled_dot_product_attention(T[1], T[2], attn_mask=Tensor(fm)), F.scaled_dot_product_attention(*TT, attn_mask=torch.tensor(fm)))

def test_activations():
  a = R.standard_normal((3, 17)).astype(np.float32) * 3
  A, TA = Tensor(a), torch.tensor(a)
  for f, tf in [(Tensor.relu6, F.relu6), (Tensor.leaky_relu, F.leaky_relu), (Tensor.elu, F.elu), (lambda t: t.celu(0.5), lambda t: F.celu(t, 0.5)),
                (Tensor.selu, F.selu), (Tensor.gelu, lambda t: F.gelu(t, approximate="tanh")), (Tensor.silu, F.silu),
                (Tensor.hardsigmoid, F.hardsigmoid),
                (Tensor.hardswish, F.hardswish), (Tensor.hardtanh, F.hardtanh), (Tensor.softplus, F.softplus), (Tensor.mish, F.mish),
                (Tensor.logsigmoid, F.logsigmoid), (Tensor.softsign, F.softsign), (Tensor.erf, torch.erf), (Tensor.atan, torch.atan)]:
    close(f(A), tf(TA), atol=1e-5)
  close(A.layernorm(), F.layer_norm(TA, (17,)), atol=1e-5)

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(reduce):
  src, idx, base = R.standard_normal((2, 4)).astype(np.float32), np.array([[0, 1, 2, 0], [2, 0, 0, 1]]), np.ones((3, 4), np.float32)
  for inc in (True, False):
    close(Tensor(base).scatter_reduce(0, Tensor(idx.astype(np.int32)), Tensor(src), reduce, include_self=inc),
          torch.tensor(base).scatter_reduce(0, torch.tensor(idx), torch.tensor(src), reduce, include_self=inc))

def test_topk_sort():
  a = R.standard_normal((3, 9)).astype(np.float32)
  v, i = Tensor(a).topk(4); tv, ti = torch.topk(torch.tensor(a), 4)
  close(v, tv); close(i, ti.int())
  v, i = Tensor(a).sort(0, descending=True); tv, ti = torch.sort(torch.tensor(a), 0, descending=True)
  close(v, tv); close(i, ti.int())
