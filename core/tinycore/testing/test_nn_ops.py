"""Conv, pooling, resize, norms, attention, activations and losses against numpy reference implementations."""
import math
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view as swv
from tinycore import Tensor
from tinycore.testing.helpers import check, rand

def np_conv(x, w, stride=1, padding=0, dilation=1, groups=1):
  d = x.ndim - 2
  s_, p_, dl_ = [(v,) * d if isinstance(v, int) else tuple(v) for v in (stride, padding, dilation)]
  x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in p_])
  k_ = w.shape[2:]
  ek = [dl * (k - 1) + 1 for k, dl in zip(k_, dl_)]
  win = swv(x, ek, axis=tuple(range(2, 2 + d)))  # (bs, cin, *o_full, *ek)
  win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in s_) + tuple(slice(None, None, dl) for dl in dl_)]
  cg, rc = x.shape[1] // groups, w.shape[0] // groups
  outs = [np.tensordot(win[:, g * cg:(g + 1) * cg], w[g * rc:(g + 1) * rc], axes=([1] + list(range(2 + d, 2 + 2 * d)), [1] + list(range(2, 2 + d))))
          for g in range(groups)]
  return np.moveaxis(np.concatenate(outs, -1), -1, 1).astype(np.float32)

@pytest.mark.parametrize("xs,ws,kw", [((2, 3, 6, 5), (4, 3, 3, 2), {}), ((1, 4, 7, 7), (6, 2, 3, 3), {"groups": 2, "padding": 1, "stride": 2}),
                                      ((1, 2, 8, 6), (3, 2, 2, 2), {"dilation": (2, 1), "stride": (1, 2)}),
                                      ((2, 3, 9), (2, 3, 3), {"stride": 3, "padding": 2}),
                                      ((1, 1, 1, 1), (1, 1, 1, 1), {})], ids=str)
def test_conv(xs, ws, kw):
  x, w, b = rand(*xs), rand(*ws, seed=1), rand(ws[0], seed=2)
  f = Tensor.conv1d if len(xs) == 3 else Tensor.conv2d
  check(f(Tensor(x), Tensor(w), Tensor(b), **kw), np_conv(x, w, **kw) + b.reshape(-1, *[1] * (len(xs) - 2)), atol=1e-4)

def test_conv_transpose():
  # conv_transpose is the adjoint of conv: <conv(x, w), y> == <x, conv_transpose(y, w)>
  x, w = rand(1, 2, 7, 7), rand(3, 2, 3, 3, seed=1)   # sizes where conv_transpose restores the full input
  for kw in [{}, {"stride": 2, "padding": 1}, {"dilation": 2}]:
    y = np_conv(x, w, **kw)
    yt = rand(*y.shape, seed=3)
    xt = Tensor(yt).conv_transpose2d(Tensor(w), **kw, output_padding=0).numpy()
    assert xt.shape[:2] == x.shape[:2]
    xt = np.pad(xt, [(0, 0), (0, 0)] + [(0, a - b) for a, b in zip(x.shape[2:], xt.shape[2:])])
    np.testing.assert_allclose((y * yt).sum(), (x * xt).sum(), rtol=1e-4)

def test_conv_errors():
  with pytest.raises(ValueError, match="channels"): Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 2, 3, 3))
  with pytest.raises(ValueError, match="divisible"): Tensor.ones(1, 4, 5, 5).conv2d(Tensor.ones(3, 2, 3, 3), groups=2)
  with pytest.raises(ValueError): Tensor.ones(1, 3, 2, 2).conv2d(Tensor.ones(2, 3, 3, 3))

def test_pool():
  x = rand(2, 3, 7, 6)
  check(Tensor(x).max_pool2d(), x[:, :, :6].reshape(2, 3, 3, 2, 3, 2).max((3, 5)))
  check(Tensor(x).avg_pool2d(), x[:, :, :6].reshape(2, 3, 3, 2, 3, 2).mean((3, 5)))
  check(Tensor(x).max_pool2d(3, 1), swv(x, (3, 3), axis=(2, 3)).max((-1, -2)))
  check(Tensor(x).avg_pool2d((3, 2), (2, 2)), swv(x, (3, 2), axis=(2, 3))[:, :, ::2, ::2].mean((-1, -2)))
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
  check(Tensor(x).max_pool2d(3, 2, padding=1), swv(xp, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max((-1, -2)))
  xz = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  check(Tensor(x).avg_pool2d(3, 2, padding=1), swv(xz, (3, 3), axis=(2, 3))[:, :, ::2, ::2].mean((-1, -2)))
  cnt = swv(np.pad(np.ones_like(x), ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))[:, :, ::2, ::2].sum((-1, -2))
  check(Tensor(x).avg_pool2d(3, 2, padding=1, count_include_pad=False), swv(xz, (3, 3), axis=(2, 3))[:, :, ::2, ::2].sum((-1, -2)) / cnt)
  v, i = Tensor(x).max_pool2d(2, return_indices=True)
  flat = x.reshape(2, 3, -1)
  check(np.take_along_axis(flat, i.numpy().reshape(2, 3, -1).astype(np.int64), 2).reshape(v.shape), v.numpy())

def test_interpolate():
  x = rand(1, 2, 3, 4)
  check(Tensor(x).interpolate((6, 8), mode="nearest"), x.repeat(2, 2).repeat(2, 3))
  check(Tensor(x).interpolate((3, 4)), x)
  lin = Tensor(np.array([[[0.0, 1.0, 2.0]]], np.float32)).interpolate((5,), mode="linear", align_corners=True)
  check(lin, np.array([[[0, 0.5, 1, 1.5, 2]]], np.float32))
  check(Tensor(np.array([[[0.0, 2.0]]], np.float32)).interpolate((4,)), np.array([[[0, 0.5, 1.5, 2]]], np.float32))

def test_norms_attention():
  x = rand(2, 3, 4)
  mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  check(Tensor(x).layernorm(), (x - mu) / np.sqrt(var + 1e-5), atol=1e-5)
  w, b, m, s = rand(3, seed=1), rand(3, seed=2), rand(3, seed=3), rand(3, seed=4, low=0.5, high=2)
  check(Tensor(x).batchnorm(Tensor(w), Tensor(b), Tensor(m), Tensor(s)), (x - m[:, None]) * w[:, None] * s[:, None] + b[:, None], atol=1e-5)
  q, k, v = rand(2, 5, 4), rand(2, 6, 4, seed=1), rand(2, 6, 3, seed=2)
  def np_sdpa(mask=None):
    sc = q @ k.transpose(0, 2, 1) / 2.0
    if mask is not None: sc = np.where(mask, sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
    return (p @ v).astype(np.float32)
  check(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v)), np_sdpa(), atol=1e-5)
  causal = np.tril(np.ones((5, 6), bool))
  check(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True), np_sdpa(causal), atol=1e-5)
  mask = rand(5, 6, dtype=bool, seed=7) | causal
  check(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(mask)), np_sdpa(mask), atol=1e-5)

def _erf(x): return np.vectorize(math.erf)(x).astype(np.float32)
def _sp(x): return np.log1p(np.exp(x))
ACTS = {"relu6": lambda x: np.clip(x, 0, 6), "leaky_relu": lambda x: np.where(x < 0, 0.01 * x, x), "elu": lambda x: np.where(x > 0, x, np.exp(x) - 1),
        "celu": lambda x: np.maximum(x, 0) + np.minimum(0, np.exp(x) - 1), "selu": lambda x: 1.0507 * np.where(x >= 0, x, 1.67326 * (np.exp(x) - 1)),
        "gelu": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
        "quick_gelu": lambda x: x / (1 + np.exp(-1.702 * x)),
        "silu": lambda x: x / (1 + np.exp(-x)), "swish": lambda x: x / (1 + np.exp(-x)), "hardsigmoid": lambda x: np.clip(x / 6 + 0.5, 0, 1),
        "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6, "hardtanh": lambda x: np.clip(x, -1, 1), "softplus": _sp,
        "mish": lambda x: x * np.tanh(_sp(x)), "logsigmoid": lambda x: -_sp(-x), "softsign": lambda x: x / (1 + np.abs(x)), "erf": _erf}
@pytest.mark.parametrize("name", sorted(ACTS))
def test_activation(name):
  x = np.concatenate([rand(20, low=-6, high=6), np.array([0.0, -30.0, 30.0], np.float32)])
  check(getattr(Tensor(x), name)(), ACTS[name](x.astype(np.float64)).astype(np.float32), atol=2e-6, rtol=1e-5)

def test_softmax_family():
  x = rand(3, 5)
  e = np.exp(x - x.max(1, keepdims=True))
  check(Tensor(x).softmax(1), e / e.sum(1, keepdims=True), atol=1e-6)
  check(Tensor(x).log_softmax(0), x - np.log(np.exp(x).sum(0, keepdims=True)), atol=1e-5)

def test_losses():
  logits, y = rand(4, 5), np.array([1, 0, 4, 2], np.int32)
  logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  nll = -logp[np.arange(4), y]
  check(Tensor(logits).cross_entropy(Tensor(y)), np.float32(nll.mean()), atol=1e-5)
  check(Tensor(logits).cross_entropy(Tensor(y), reduction="none"), nll.astype(np.float32), atol=1e-5)
  check(Tensor(logits).sparse_categorical_crossentropy(Tensor(y)), np.float32(nll.mean()), atol=1e-5)
  check(Tensor(logits).sparse_categorical_crossentropy(Tensor(np.array([1, -1, 4, 2], np.int32)), reduction="sum"), np.float32(nll[[0, 2, 3]].sum()),
        atol=1e-5)
  check(Tensor(logp).nll_loss(Tensor(y)), np.float32(nll.mean()), atol=1e-5)
  p, t = rand(6, low=0.05, high=0.95), (rand(6, seed=3) > 0).astype(np.float32)
  check(Tensor(p).binary_crossentropy(Tensor(t)), np.float32(-(t * np.log(p) + (1 - t) * np.log(1 - p)).mean()), atol=1e-5)
  z = rand(6, seed=5, low=-4, high=4)
  sig = 1 / (1 + np.exp(-z))
  check(Tensor(z).binary_crossentropy_logits(Tensor(t)), np.float32(-(t * np.log(sig) + (1 - t) * np.log(1 - sig)).mean()), atol=1e-5)
  with pytest.raises(ValueError, match="reduction"): Tensor(logits).cross_entropy(Tensor(y), reduction="avg")
  with pytest.raises(ValueError, match="shape"): Tensor(logits).sparse_categorical_crossentropy(Tensor(y[:3]))
