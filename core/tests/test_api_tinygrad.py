"""tinygrad Tensor methods a ported script expects beyond the basics: rearrange, pad_to/shrink_to, max_unpool2d,
normalize, softmin, newton_schulz, short, const_like, shard_like. numpy (and torch, where installed) are the reference."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
pytestmark = pytest.mark.needs_device
X = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)

@pytest.mark.parametrize("formula,kw,ref", [
  ("b c h w -> b h w c", {}, lambda x: x.transpose(0, 2, 3, 1)),
  ("b c (h p) w -> b (c p) h w", {"p": 2}, lambda x: x.reshape(2, 3, 2, 2, 6).transpose(0, 1, 3, 2, 4).reshape(2, 6, 2, 6)),
  ("b ... -> b (...)", {}, lambda x: x.reshape(2, -1)),
  ("... w -> w ...", {}, lambda x: x.transpose(3, 0, 1, 2)),
  ("b c h (w q) -> (b q) c h w", {"q": 3}, lambda x: x.reshape(2, 3, 4, 2, 3).transpose(0, 4, 1, 2, 3).reshape(6, 3, 4, 2)),
  ("b c h w -> (w h) 1 (c b)", {}, lambda x: x.transpose(3, 2, 1, 0).reshape(24, 1, 6)),
  ("b c h w -> b c h w 1", {}, lambda x: x[..., None]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_rearrange(formula, kw, ref):
  np.testing.assert_array_equal(Tensor(X).rearrange(formula, **kw).numpy(), ref(X))

@pytest.mark.parametrize("formula,kw,msg", [("b c h -> b c h", {}, "left side has 3 axes"), ("b c h w -> b c h", {}, "same axes"),
  ("b c (h p q) w -> b c h p q w", {}, "give all but one"), ("b c (h p) w -> b c h p w", {"p": 5}, "divisible"),
  ("b c h w", {}, "one '->'"), ("b (c (h)) w -> b c h w", {}, "nested"), ("b c h w -> b c h w", {"z": 2}, "unknown axes")])
def test_rearrange_errors(formula, kw, msg):
  with pytest.raises(ValueError, match=msg): Tensor(X).rearrange(formula, **kw)

def test_pad_to_shrink_to():
  t = Tensor(X)
  np.testing.assert_array_equal(t.pad_to(3, None, 5, 7, value=-1).numpy(), np.pad(X, ((0, 1), (0, 0), (0, 1), (0, 1)), constant_values=-1))
  np.testing.assert_array_equal(t.shrink_to((1, 2, None, 3)).numpy(), X[:1, :2, :, :3])
  with pytest.raises(ValueError, match="can't shrink"): t.pad_to(1, 3, 4, 6)
  with pytest.raises(ValueError, match="can't grow"): t.shrink_to(3, 3, 4, 6)

def test_dtype_and_const_helpers():
  t = Tensor(X)
  assert t.short().dtype == dtypes.int16 and t.short().numpy().dtype == np.int16
  c = t.const_like(2.5)
  assert c.shape == t.shape and c.dtype == t.dtype and np.all(c.numpy() == 2.5)
  assert t.const_like(1, dtype=dtypes.int32).dtype == dtypes.int32

def test_normalize_softmin():
  r = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
  np.testing.assert_allclose(Tensor(r).normalize().numpy(), r / np.linalg.norm(r, axis=1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(Tensor(r).normalize(p=1, dim=0).numpy(), r / np.abs(r).sum(0, keepdims=True), rtol=1e-5)
  np.testing.assert_array_equal(Tensor(np.zeros((2, 3), np.float32)).normalize().numpy(), 0)   # eps: no nan
  e = np.exp(-(r - r.min(-1, keepdims=True)))
  np.testing.assert_allclose(Tensor(r).softmin(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5)

@pytest.mark.parametrize("shape", [(6, 9), (9, 6), (2, 4, 4)])
def test_newton_schulz_orthogonalizes(shape):
  m = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
  o = Tensor(m).newton_schulz(25, (2, -1.5, 0.5)).numpy()
  short = min(shape[-2:])
  g = o @ np.swapaxes(o, -1, -2) if shape[-2] <= shape[-1] else np.swapaxes(o, -1, -2) @ o
  np.testing.assert_allclose(g, np.broadcast_to(np.eye(short), g.shape), atol=1e-4)
  u, _, vt = np.linalg.svd(m.astype(np.float64), full_matrices=False)   # the polar factor U V^T is the fixed point
  np.testing.assert_allclose(o, u @ vt, atol=1e-3)

@pytest.mark.parametrize("kw", [{}, {"kernel_size": (3, 3), "stride": 2, "padding": 1}, {"kernel_size": (2, 3), "stride": (1, 2)}], ids=str)
def test_max_unpool2d(kw):
  x = np.random.default_rng(2).standard_normal((2, 3, 6, 8)).astype(np.float32)
  out, idx = Tensor(x).max_pool2d(**kw, return_indices=True)
  got = out.max_unpool2d(idx, **kw, output_size=(6, 8)).numpy()
  # reference: each window's max goes back to where it came from, zero elsewhere
  ref = np.zeros_like(x).reshape(2, 3, -1)
  np.put_along_axis(ref, idx.numpy().reshape(2, 3, -1).astype(np.int64), out.numpy().reshape(2, 3, -1), -1)
  np.testing.assert_array_equal(got, ref.reshape(x.shape))
  torch = pytest.importorskip("torch")
  F, k = torch.nn.functional, kw.get("kernel_size", 2)
  to, ti = F.max_pool2d(torch.tensor(x), k, kw.get("stride"), kw.get("padding", 0), return_indices=True)
  np.testing.assert_array_equal(idx.numpy(), ti.numpy())
  np.testing.assert_array_equal(got, F.max_unpool2d(to, ti, k, kw.get("stride"), kw.get("padding", 0), output_size=(6, 8)).numpy())
  with pytest.raises(ValueError, match="indices"): out.max_unpool2d(idx[:1], **kw)

def test_shard_like():
  a = Tensor(np.ones((4, 2), np.float32)).shard(("CPU:0", "CPU:1"), axis=0)
  b = Tensor(np.arange(8, dtype=np.float32).reshape(4, 2)).shard_like(a)
  assert b.device == a.device
  np.testing.assert_array_equal((a + b).numpy(), np.arange(8).reshape(4, 2) + 1)
  assert Tensor([1.0]).shard_like(Tensor([2.0])).device == Tensor([2.0]).device
