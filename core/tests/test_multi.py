"""Sharded (multi-device) tensors over CPU instances, compared with numpy."""
import numpy as np, pytest
from tinycore import Tensor, dtypes
from tinycore.tensor_multi import is_multi
from tinycore.uop import Ops

pytestmark = pytest.mark.needs_device
D2 = ("CPU:0", "CPU:1")
AXES = [0, 1, None]
rng = np.random.default_rng(0)
A = rng.standard_normal((4, 6)).astype(np.float32)
B = rng.standard_normal((4, 6)).astype(np.float32)

def close(t: Tensor, ref, rtol=1e-5, atol=1e-5):
  out = t.numpy()
  assert out.shape == np.shape(ref), (out.shape, np.shape(ref))
  np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)

def sh(a, axis, devs=D2): return Tensor(a).shard(devs, axis)

# ---- layout
@pytest.mark.parametrize("axis", AXES)
def test_shard_layout(axis):
  x = sh(A, axis)
  assert x.device == ("CPU", "CPU:1") and x.shape == (4, 6) and x.dtype == dtypes.float32 and is_multi(x.uop)
  want = (4, 6) if axis is None else (2, 6) if axis == 0 else (4, 3)
  assert [s.shape for s in x.uop.src] == [want, want] and [s.device for s in x.uop.src] == ["CPU", "CPU:1"]
  close(x, A)
  x.realize()   # each shard is a buffer on its own device
  assert [s.base.arg.device for s in x.uop.src] == ["CPU", "CPU:1"] and all(s.base.op.name == "BUFFER" for s in x.uop.src)
  close(x, A)

def test_shard_views_and_realized_sources():
  close(Tensor(A).T.shard(D2, 0), A.T); close(Tensor(A)[:, ::2].shard(D2, 1), A[:, ::2])
  t = (Tensor(A) + 1).realize()
  close(t.shard(D2, 0) * 2, (A + 1) * 2)

def test_long_chain():
  # a long chain with shared operands: pushing ops down and scheduling the shards stay linear
  x, y = sh(A, 0), A.astype(np.float64)
  for _ in range(60): x, y = x * 0.5 + x * 0.5 + 0.001, y * 0.5 + y * 0.5 + 0.001
  close(x, y, rtol=1e-4, atol=1e-4)

def test_shard_negative_axis_and_shard_():
  x = Tensor(A)
  assert x.shard_(D2, -1) is x and x.uop.arg[1] == 1
  close(x, A)

def test_uneven_split():
  a = rng.standard_normal((5, 3)).astype(np.float32)
  x = sh(a, 0)
  assert [s.shape for s in x.uop.src] == [(3, 3), (2, 3)]
  close(x * 2 + 1, a * 2 + 1); close(x.sum(0), a.sum(0)); close(x.max(), a.max())
  b = rng.standard_normal((7, 2)).astype(np.float32)   # 3 devices, 7 rows: 3, 2, 2
  y = sh(b, 0, ("CPU:0", "CPU:1", "CPU:2"))
  assert [s.shape[0] for s in y.uop.src] == [3, 2, 2]
  close(y.exp().sum(0), np.exp(b).sum(0)); close(y, b)

def test_empty_shard_is_value_error():
  with pytest.raises(ValueError, match="empty"): Tensor([[1.0, 2.0]]).shard(D2, 0)
  with pytest.raises(ValueError, match="distinct"): Tensor(A).shard(("CPU:1", "CPU:1"), 0)

# ---- elementwise and casts
@pytest.mark.parametrize("axis", AXES)
def test_elementwise(axis):
  x, y = sh(A, axis), sh(B, axis)
  close(x + y, A + B); close(x * y - x / 2, A * B - A / 2); close(x.maximum(y), np.maximum(A, B))
  close((x < y).where(x, y), np.where(A < B, A, B)); close(x.exp(), np.exp(A), rtol=1e-4); close(x.relu(), np.maximum(A, 0))
  close(2 - x, 2 - A); close(x ** 2, A ** 2); close(-x.abs(), -np.abs(A)); close(x.sigmoid(), 1 / (1 + np.exp(-A)), rtol=1e-4)

@pytest.mark.parametrize("axis", AXES)
def test_casts_and_dtypes(axis):
  x = sh(A, axis)
  assert (x.cast(dtypes.int32)).dtype == dtypes.int32
  close(x.cast(dtypes.int32), A.astype(np.int32)); close(x.half(), A.astype(np.float16), rtol=1e-3, atol=1e-3)
  m = x > 0
  assert m.dtype == dtypes.bool
  np.testing.assert_equal(m.numpy(), A > 0)
  i = sh(np.arange(24, dtype=np.int32).reshape(4, 6), axis)
  np.testing.assert_equal(((i * 3) % 5 + (i >> 1)).numpy(), (np.arange(24).reshape(4, 6) * 3) % 5 + (np.arange(24).reshape(4, 6) >> 1))

def test_sharded_with_replicated():
  # a replicated operand is cut to each shard's rows; both orders
  x, r = sh(A, 0), sh(B, None)
  close(x + r, A + B); close(r * x, B * A)
  close(x + sh(B[0], None), A + B[0])   # broadcast a replicated row

def test_replicated_constants_and_like():
  x = sh(A, 1)
  close(x + x.ones_like(), A + 1); close(x.zeros_like(), np.zeros_like(A))
  t = Tensor(B, device=D2)   # data built for a device tuple is replicated, like tinygrad
  assert t.device == ("CPU", "CPU:1") and t.uop.arg[1] is None
  close(t + x, A + B)

def test_creation_on_device_tuple():
  # made on each device directly (no copies), replicated
  for t, ref in [(Tensor.zeros(2, 3, device=D2), np.zeros((2, 3))), (Tensor.arange(5, device=D2), np.arange(5)),
                 (Tensor.eye(3, device=D2), np.eye(3)), (Tensor.full((2,), 7, device=D2), np.full((2,), 7))]:
    assert t.device == ("CPU", "CPU:1") and t.uop.arg[1] is None
    close(t, ref)
  e = Tensor.empty(2, 3, device=D2)
  assert e.realize().is_realized() and [s.base.arg.device for s in e.uop.src] == ["CPU", "CPU:1"]
  r = Tensor.rand(3, 4, device=D2)
  a, b = (r.uop.src[i] for i in (0, 1))
  np.testing.assert_equal(Tensor(a).numpy(), Tensor(b).numpy())   # the same stream on every device
  assert 0 <= r.numpy().min() and r.numpy().max() < 1

# ---- reductions
@pytest.mark.parametrize("axis", AXES)
def test_reductions(axis):
  x = sh(A, axis)
  close(x.sum(), A.sum()); close(x.sum(0), A.sum(0)); close(x.sum(1), A.sum(1)); close(x.sum(1, keepdim=True), A.sum(1, keepdims=True))
  close(x.max(0), A.max(0)); close(x.min(1), A.min(1)); close(x.mean(), A.mean()); close(x.prod(0), A.prod(0), rtol=1e-4)
  close(x.std(0), A.std(0, ddof=1), rtol=1e-4); close(x.softmax(0), np.exp(A) / np.exp(A).sum(0), rtol=1e-4)

def test_sum_over_sharded_axis_is_replicated():
  x = sh(A, 0)
  s = x.sum(0)
  assert s.device == ("CPU", "CPU:1") and s.uop.arg[1] is None   # all-reduce: replicated on every device
  close(s, A.sum(0))
  close(x - x.mean(0), A - A.mean(0))   # and it combines with the sharded tensor again
  t = x.sum()
  assert t.shape == () and t.uop.arg[1] is None
  assert abs(t.item() - float(A.sum())) < 1e-4

# ---- movement
@pytest.mark.parametrize("axis", AXES)
def test_movement(axis):
  x = sh(A, axis)
  close(x.T, A.T); close(x.permute(1, 0) * 2, A.T * 2); close(x.unsqueeze(0), A[None]); close(x.reshape(1, 4, 1, 6), A.reshape(1, 4, 1, 6))
  close(x.unsqueeze(1).expand(4, 3, 6), np.broadcast_to(A[:, None], (4, 3, 6)))
  if axis != 1: close(x[:, 1:4].flip(1), A[:, 1:4][:, ::-1]); close(x.pad(((0, 0), (1, 2))), np.pad(A, ((0, 0), (1, 2))))
  if axis != 0: close(x[1:3], A[1:3]); close(x.reshape(2, 2, 6), A.reshape(2, 2, 6))

def test_permute_remaps_axis():
  x = sh(rng.standard_normal((2, 4, 6)).astype(np.float32), 1)
  assert x.permute(2, 0, 1).uop.arg[1] == 2 and x.reshape(1, 2, 4, 6).uop.arg[1] == 2

# ---- matmul: data parallel
def test_data_parallel_linear():
  x = rng.standard_normal((8, 5)).astype(np.float32)
  w = rng.standard_normal((5, 3)).astype(np.float32)
  b = rng.standard_normal((3,)).astype(np.float32)
  xs, ws, bs = sh(x, 0), sh(w, None), sh(b, None)
  out = xs.linear(ws, bs).relu()
  assert out.shape == (8, 3) and out.uop.arg[1] == 0 and out.device == ("CPU", "CPU:1")
  close(out, np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-5)
  close(xs @ ws, x @ w, rtol=1e-4, atol=1e-5)
  loss = (xs @ ws).square().mean()   # over the sharded batch too
  assert abs(loss.item() - float(np.square(x @ w).mean())) < 1e-4
  # x sharded on the contraction axis: per-shard partial products, then the sum's all-reduce (result replicated)
  y = sh(x, 1) @ sh(w, 0)
  assert y.uop.arg[1] is None
  close(y, x @ w, rtol=1e-4, atol=1e-5); close(sh(x, 1) @ ws, x @ w, rtol=1e-4, atol=1e-5)
  z = sh(x, None) @ sh(w, 1)   # column-parallel: output sharded on its features
  assert z.uop.arg[1] == 1
  close(z, x @ w, rtol=1e-4, atol=1e-5)
  with pytest.raises(NotImplementedError, match="different axes"): xs @ sh(w, 1)   # would need an all-gather

def test_nn_linear_forward():
  from tinycore import nn
  lin = nn.Linear(5, 4)
  x = rng.standard_normal((6, 5)).astype(np.float32)
  ref = lin(Tensor(x)).numpy()
  lin.weight.shard_(D2); lin.bias.shard_(D2)
  close(lin(sh(x, 0)), ref, rtol=1e-4, atol=1e-5)

# ---- gather, realize, reshard
@pytest.mark.parametrize("axis", AXES)
def test_to_single_device(axis):
  x = sh(A, axis) * 3
  for d in ("CPU", "CPU:1", "CPU:2"):
    y = x.to(d)
    assert y.device == d and not is_multi(y.uop)
    close(y, A * 3)
  m = sh(A, axis) > 0
  np.testing.assert_equal(m.to("CPU").numpy(), A > 0)   # bool gather
  assert sh(A, axis).tolist() == A.tolist()

def test_realize_many():
  x, y = sh(A, 0), sh(B, 1)
  a, b, c = x + 1, y * 2, Tensor(A) - 1
  Tensor.realize(a, b, c)
  for t in (a, b): assert is_multi(t.uop) and all(s.base.op.name == "BUFFER" for s in t.uop.src)
  close(a, A + 1); close(b, B * 2); close(c, A - 1)
  assert len((x * 2).schedule()) >= 2   # one kernel per shard

def test_reshard():
  x = sh(A, 0)
  y = x.shard(D2, 1)
  assert y.uop.arg[1] == 1 and x.shard(D2, 0) is not None and x.shard(D2, 0).uop is x.uop
  close(y, A); close(x.to(("CPU:1", "CPU:2")), A)

# ---- what isn't supported says so
def test_not_supported():
  x = sh(A, 0)
  with pytest.raises(NotImplementedError, match="shrink"): x[1:3]
  with pytest.raises(NotImplementedError, match="pad"): x.pad(((1, 0), (0, 0)))
  with pytest.raises(NotImplementedError, match="flip"): x.flip(0)
  with pytest.raises(NotImplementedError, match="merges the sharded axis"): x.reshape(24)
  with pytest.raises(NotImplementedError, match="different axes"): x + sh(B, 1)
  with pytest.raises(NotImplementedError, match="shard it"): x._apply(Ops.ADD, Tensor(B))   # a single-device operand
  with pytest.raises(ValueError, match="different devices"): x + Tensor(B)
  with pytest.raises(ValueError, match="different devices"): x + sh(B, 0, ("CPU:1", "CPU:2"))

def test_autograd_not_supported():
  w = Tensor(sh(A, None).uop, requires_grad=True)
  with pytest.raises(NotImplementedError, match="autograd"): (w * 2).sum().backward()
  with pytest.raises(NotImplementedError, match="autograd"): (w * 2).sum().gradient(w)
