"""Sharded (multi-device) tensors over CPU instances: layout, ops, gathers and gradients, compared with numpy and with the
same computation on one device."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.engine.multi import lower, sharding
from tinycore.uop import Ops, UOp

pytestmark = pytest.mark.needs_device
D2 = ("CPU:0", "CPU:1")
D4 = ("CPU:0", "CPU:1", "CPU:2", "CPU:3")
C2, C4 = ("CPU", "CPU:1"), ("CPU", "CPU:1", "CPU:2", "CPU:3")   # the canonical names
AXES = [0, 1, None]
rng = np.random.default_rng(0)
A = rng.standard_normal((4, 6)).astype(np.float32)
B = rng.standard_normal((4, 6)).astype(np.float32)

def close(t: Tensor, ref, rtol=1e-5, atol=1e-5):
  out = t.numpy()
  assert out.shape == np.shape(ref), (out.shape, np.shape(ref))
  np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)

def sh(a, axis, devs=D2): return Tensor(a).shard(devs, axis)
def axis_of(t: Tensor): return sharding(t.uop)[0]

# ---- the IR
@pytest.mark.parametrize("axis", AXES)
def test_shard_layout(axis):
  x = sh(A, axis)
  assert x.uop.op is Ops.MULTI and x.uop.arg == (axis, C2)
  assert x.device == C2 and x.shape == (4, 6) and x.dtype == dtypes.float32
  want = (4, 6) if axis is None else (2, 6) if axis == 0 else (4, 3)
  assert [s.shape for s in x.uop.src] == [want, want] and [s.device for s in x.uop.src] == list(C2)
  close(x, A)
  x.realize()   # each shard is a buffer on its own device
  assert x.is_realized() and [s.base.arg.device for s in x.uop.src] == list(C2) and all(s.base.op is Ops.BUFFER for s in x.uop.src)
  close(x, A)

def test_lazy_graph_is_logical_and_lowers_to_single_device_graphs():
  x, y = sh(A, 0), sh(B, 0)
  z = (x + y).sum(1)
  assert z.shape == (4,) and z.device == C2 and z.uop.op is not Ops.MULTI   # ops stay ops: the MULTI is below them
  assert [n.op for n in z.uop.toposort()].count(Ops.MULTI) == 2
  low = lower(z.uop)
  assert low.op is Ops.MULTI and low.arg == (0, C2)
  for s, d in zip(low.src, C2):   # every shard's graph is on its device alone
    assert s.device == d and not any(n.op is Ops.MULTI for n in s.toposort()) and not s.has_multi
  assert not Tensor(A).uop.has_multi and x.uop.has_multi and z.uop.has_multi

def test_multi_and_mselect_nodes():
  shards = (Tensor(A[:2], device="CPU").uop, Tensor(A[2:], device="CPU:1").uop)
  m = UOp(Ops.MULTI, dtypes.float32, shards, (0, C2))
  assert m.shape == (4, 6) and m.device == C2 and m.has_multi
  assert UOp(Ops.MULTI, dtypes.float32, (shards[0], shards[0]), (None, C2)).shape == (2, 6)
  five = Tensor(np.zeros((5, 2), np.float32)).uop
  f = UOp(Ops.MULTI, dtypes.float32, (five, five, five), (None, ("CPU", "CPU:1", "CPU:2")))
  sel = [UOp(Ops.MSELECT, dtypes.float32, (f,), (i, 0)) for i in range(3)]
  assert [u.shape for u in sel] == [(2, 2), (2, 2), (1, 2)] and [u.device for u in sel] == ["CPU", "CPU:1", "CPU:2"]
  assert UOp(Ops.MSELECT, dtypes.float32, (f,), (2, None)).shape == (5, 2)
  np.testing.assert_equal(Tensor(m).numpy(), A)

def test_shard_views_and_realized_sources():
  close(Tensor(A).T.shard(D2, 0), A.T); close(Tensor(A)[:, ::2].shard(D2, 1), A[:, ::2])
  t = (Tensor(A) + 1).realize()
  close(t.shard(D2, 0) * 2, (A + 1) * 2)

def test_long_chain():
  x, y = sh(A, 0), A.astype(np.float64)
  for _ in range(60): x, y = x * 0.5 + x * 0.5 + 0.001, y * 0.5 + y * 0.5 + 0.001
  close(x, y, rtol=1e-4, atol=1e-4)

def test_shard_negative_axis_and_shard_():
  x = Tensor(A)
  assert x.shard_(D2, -1) is x and x.uop.arg[0] == 1
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

def test_bad_shard_is_value_error():
  with pytest.raises(ValueError, match="empty"): Tensor([[1.0, 2.0]]).shard(D2, 0)
  with pytest.raises(ValueError, match="distinct"): Tensor(A).shard(("CPU:1", "CPU:1"), 0)
  with pytest.raises(ValueError, match="at least one"): Tensor(A).shard((), 0)
  with pytest.raises(ValueError, match=r"shape \(\) along axis 0"): Tensor(3.0).shard(D2, 0)
  from tinycore.device import UnknownDeviceError
  with pytest.raises(UnknownDeviceError, match="NOPE"): Tensor(A).shard(("CPU:0", "NOPE"), 0)
  with pytest.raises(ValueError, match="different devices"): sh(A, 0) + Tensor(B)
  with pytest.raises(ValueError, match="different devices"): sh(A, 0) + sh(B, 0, ("CPU:1", "CPU:2"))

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
  close(x.cast(dtypes.int32), A.astype(np.int32)); close(x.half(), A.astype(np.float16), rtol=1e-3, atol=1e-3)
  m = x > 0
  assert m.dtype == dtypes.bool
  np.testing.assert_equal(m.numpy(), A > 0)
  i = sh(np.arange(24, dtype=np.int32).reshape(4, 6), axis)
  r = np.arange(24).reshape(4, 6)
  np.testing.assert_equal(((i * 3) % 5 + (i >> 1)).numpy(), (r * 3) % 5 + (r >> 1))

def test_mixed_layouts():
  # a replicated operand is cut to each shard's rows; one sharded on another axis is resharded; both orders
  x, r, c = sh(A, 0), sh(B, None), sh(B, 1)
  close(x + r, A + B); close(r * x, B * A); close(x + sh(B[0], None), A + B[0])
  s = x + c
  assert axis_of(s) == 0 and axis_of(c + x) == 1
  close(s, A + B); close(c - x, B - A)

def test_replicated_constants_and_like():
  x = sh(A, 1)
  close(x + x.ones_like(), A + 1); close(x.zeros_like(), np.zeros_like(A))
  t = Tensor(B, device=D2)   # data built for a device tuple is replicated, like tinygrad
  assert t.device == C2 and t.uop.arg[0] is None and t.is_realized()
  close(t + x, A + B)

def test_creation_on_device_tuple():
  for t, ref in [(Tensor.zeros(2, 3, device=D2), np.zeros((2, 3))), (Tensor.arange(5, device=D2), np.arange(5)),
                 (Tensor.eye(3, device=D2), np.eye(3)), (Tensor.full((2,), 7, device=D2), np.full((2,), 7))]:
    assert t.device == C2 and sharding(t.uop) == (None, C2)
    close(t, ref)
  e = Tensor.empty(2, 3, device=D2)
  assert e.realize().is_realized() and [s.base.arg.device for s in e.uop.src] == list(C2)
  r = Tensor.rand(3, 4, device=D2).realize()
  a, b = (Tensor(r.uop.src[i]).numpy() for i in (0, 1))
  np.testing.assert_equal(a, b)   # the same stream on every device
  assert 0 <= r.numpy().min() and r.numpy().max() < 1

# ---- reductions
@pytest.mark.parametrize("axis", AXES)
def test_reductions(axis):
  x = sh(A, axis)
  close(x.sum(), A.sum()); close(x.sum(0), A.sum(0)); close(x.sum(1), A.sum(1)); close(x.sum(1, keepdim=True), A.sum(1, keepdims=True))
  close(x.max(0), A.max(0)); close(x.min(1), A.min(1)); close(x.mean(), A.mean()); close(x.prod(0), A.prod(0), rtol=1e-4)
  close(x.std(0), A.std(0, ddof=1), rtol=1e-4); close(x.softmax(0), np.exp(A) / np.exp(A).sum(0), rtol=1e-4)
  close(x.argmax(0), A.argmax(0)); close(x.cumsum(1), A.cumsum(1), rtol=1e-4, atol=1e-5)

def test_allreduce_is_replicated_and_bitwise_equal():
  a = rng.standard_normal((64, 33)).astype(np.float32)
  x = sh(a, 0, D4)
  s = x.sum(0)
  assert s.device == C4 and axis_of(s) is None
  s.realize()
  reps = [Tensor(u).numpy() for u in s.uop.src]
  for r in reps[1:]: np.testing.assert_array_equal(r, reps[0])   # every device summed the partials in the same order
  close(s, a.sum(0), rtol=1e-5, atol=1e-4)
  close(x - x.mean(0), a - a.mean(0), atol=1e-5)   # and it combines with the sharded tensor again
  t = x.sum()
  assert t.shape == () and abs(t.item() - float(a.sum())) < 1e-3

def test_allreduce_reduce_scatter_path():
  from tinycore.engine.multi import SCATTER_MIN
  a = rng.standard_normal((8, 64, 80)).astype(np.float32)
  assert 64 * 80 >= SCATTER_MIN   # the partials are big enough to be scattered, then all-gathered
  s = sh(a, 0, D4).realize().sum(0)
  low = lower(s.uop)
  assert low.arg == (None, C4) and any(n.op is Ops.SHRINK for n in low.src[0].toposort())
  copies = [si for si in s.schedule() if si.is_copy]
  assert len(copies) == 2 * 4 * 3 and sum(si.bufs[0].nbytes for si in copies) == 2 * 3 * 64 * 80 * 4   # 1.5 partials a device, not 3
  s.realize()
  reps = [Tensor(u).numpy() for u in s.uop.src]
  for r in reps[1:]: np.testing.assert_array_equal(r, reps[0])
  close(s, a.sum(0), rtol=1e-5, atol=1e-4)
  close(sh(a, 1, D4).max(1), a.max(1)); close(sh(a, 2, ("CPU:0", "CPU:1", "CPU:2")).sum(2, keepdim=True), a.sum(2, keepdims=True), atol=1e-4)

def test_relayout_all_to_all():
  a = rng.standard_normal((7, 9, 5)).astype(np.float32)
  D3 = ("CPU:0", "CPU:1", "CPU:2")
  for src_ax in (0, 1, 2, None):
    for dst_ax in (0, 1, 2, None):
      y = sh(a, src_ax, D3).shard(D3, dst_ax)
      assert y.uop.arg == (dst_ax, ("CPU", "CPU:1", "CPU:2"))
      y.realize()
      assert [s.shape for s in y.uop.src] == [s.shape for s in sh(a, dst_ax, D3).uop.src]
      close(y, a)

# ---- movement
@pytest.mark.parametrize("axis", AXES)
def test_movement(axis):
  x = sh(A, axis)
  close(x.T, A.T); close(x.permute(1, 0) * 2, A.T * 2); close(x.unsqueeze(0), A[None]); close(x.reshape(1, 4, 1, 6), A.reshape(1, 4, 1, 6))
  close(x.unsqueeze(1).expand(4, 3, 6), np.broadcast_to(A[:, None], (4, 3, 6)))
  close(x[:, 1:4].flip(1), A[:, 1:4][:, ::-1]); close(x.pad(((0, 0), (1, 2))), np.pad(A, ((0, 0), (1, 2))))
  close(x[1:3], A[1:3]); close(x.reshape(2, 2, 6), A.reshape(2, 2, 6)); close(x.flip(0), A[::-1]); close(x.reshape(24), A.reshape(24))
  close(x.pad(((1, 0), (0, 0))), np.pad(A, ((1, 0), (0, 0)))); close(x[::2, ::3], A[::2, ::3])
  close(x.cat(x, dim=0), np.concatenate([A, A], 0)); close(x.cat(x, dim=1), np.concatenate([A, A], 1))

def test_movement_keeps_the_shard_axis_where_it_can():
  x = sh(rng.standard_normal((2, 4, 6)).astype(np.float32), 1)
  assert axis_of(x.permute(2, 0, 1)) == 2 and axis_of(x.reshape(1, 2, 4, 6)) == 2 and axis_of(x.reshape(2, 4, 3, 2)) == 1
  assert axis_of(x[:, :, 1:3]) == 1 and axis_of(x.unsqueeze(0).expand(3, 2, 4, 6)) == 2
  assert axis_of(x[:, 1:3]) is None and axis_of(x.reshape(8, 6)) is None   # these touch the axis: all-gathered

# ---- matmul
def test_matmul_along_and_across_the_shard_axis():
  x = rng.standard_normal((8, 5)).astype(np.float32)
  w = rng.standard_normal((5, 3)).astype(np.float32)
  b = rng.standard_normal((3,)).astype(np.float32)
  xs, ws, bs = sh(x, 0), sh(w, None), sh(b, None)
  out = xs.linear(ws, bs).relu()
  assert out.shape == (8, 3) and axis_of(out) == 0 and out.device == C2
  close(out, np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-5)
  y = sh(x, 1) @ sh(w, 0)   # on the contraction axis: per-shard partial products, then an all-reduce
  assert axis_of(y) is None
  close(y, x @ w, rtol=1e-4, atol=1e-5); close(sh(x, 1) @ ws, x @ w, rtol=1e-4, atol=1e-5)
  z = sh(x, None) @ sh(w, 1)   # column-parallel: output sharded on its features
  assert axis_of(z) == 1
  close(z, x @ w, rtol=1e-4, atol=1e-5)
  close(xs @ sh(w, 1), x @ w, rtol=1e-4, atol=1e-5)   # two different axes: one is resharded
  close(sh(x, 0, D4) @ sh(w, 0, D4), x @ w, rtol=1e-4, atol=1e-5)

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
    low = lower(y.uop)
    assert y.device == d and low.device == d and not low.has_multi and y.uop.has_multi
    close(y, A * 3)
  m = sh(A, axis) > 0
  np.testing.assert_equal(m.to("CPU").numpy(), A > 0)   # bool gather
  assert sh(A, axis).tolist() == A.tolist()

def test_realize_many():
  x, y = sh(A, 0), sh(B, 1)
  a, b, c = x + 1, y * 2, Tensor(A) - 1
  Tensor.realize(a, b, c)
  for t in (a, b): assert t.uop.op is Ops.MULTI and all(s.base.op is Ops.BUFFER for s in t.uop.src)
  close(a, A + 1); close(b, B * 2); close(c, A - 1)
  assert len((x * 2).schedule()) >= 2   # one kernel per shard

def test_reshard_and_shard_like():
  x = sh(A, 0)
  y = x.shard(D2, 1)
  assert y.uop.arg == (1, C2) and x.shard(D2, 0).uop is x.uop
  close(y, A); close(x.to(("CPU:1", "CPU:2")), A); close(x.shard(D4, 1), A)
  lazy = x * 2 + sh(B, 0)   # shard_like reads the layout of a lazy result too
  t = Tensor(B).shard_like(lazy)
  assert t.uop.arg == (0, C2)
  close(t, B); close(Tensor(B).shard_like(Tensor(A)), B)
  assert Tensor(B).shard_like(x.sum(0)).uop.arg == (None, C2)

def test_assign_into_shards_in_place():
  x = sh(A, 0).realize()
  bufs = [s.base.arg for s in x.uop.src]
  x.assign(x * 2 + sh(B, None)).realize()   # a replicated value is cut to the target's shards
  assert [s.base.arg for s in x.uop.src] == bufs
  close(x, A * 2 + B)
  x.assign(sh(B, 1)).realize()   # another layout is resharded into the target's
  assert [s.base.arg for s in x.uop.src] == bufs
  close(x, B)

# ---- gradients: the same function on one device gives the reference
def _grads(fn, arrays, shard_axes, devs=D2):
  ts = [Tensor(a, requires_grad=True) for a in arrays]
  fn(*ts).backward()
  ref = [t.grad.numpy() for t in ts]
  ms = []
  for a, ax in zip(arrays, shard_axes):
    t = Tensor(a).shard(devs, ax).realize()
    t.requires_grad = True
    ms.append(t)
  loss = fn(*ms)
  assert isinstance(loss.device, tuple)
  loss.backward()
  for t, r in zip(ms, ref):
    assert t.grad is not None and t.grad.shape == t.shape and isinstance(t.grad.device, tuple)
    np.testing.assert_allclose(t.grad.numpy(), r, rtol=1e-4, atol=1e-5)

X = rng.standard_normal((8, 6)).astype(np.float32)
W = rng.standard_normal((6, 4)).astype(np.float32)
CASES = {
  "elementwise": (lambda x, y: (x * y + x.exp() - y.relu() / 3).sum(), [A, B]),
  "reduce_rows": (lambda x, y: (x.sum(0) * y.max(0)).sum(), [A, B]),
  "reduce_cols": (lambda x, y: (x.sum(1) * y.max(1)).sum(), [A, B]),
  "softmax": (lambda x, y: (x.softmax(1) * y).sum() + x.log_softmax(0).mean(), [A, B]),
  "movement": (lambda x, y: (x.T.reshape(3, 8)[1:, ::2] * y.reshape(24)[4:12].reshape(2, 4)).sum(), [A, B]),
  "matmul": (lambda x, w: ((x @ w).relu() ** 2).mean(), [X, W]),
}
LAYOUTS = [(0, None), (1, 0), (None, 1), (0, 0), (None, None), (1, 1)]

@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_gradients_match_one_device(case, layout):
  fn, arrays = CASES[case]
  _grads(fn, arrays, layout)

def test_gradients_on_four_devices():
  _grads(CASES["matmul"][0], [X, W], (0, None), D4)
  _grads(CASES["reduce_rows"][0], [A, B], (1, 0), D4)

def test_gradient_through_shard_of_a_single_device_leaf():
  for ax in AXES:
    w = Tensor(A, requires_grad=True)
    y = w.shard(D2, ax)
    ((y * y).sum() + (y * sh(B, 0)).sum()).backward()
    assert w.grad.device == "CPU"
    np.testing.assert_allclose(w.grad.numpy(), 2 * A + B, rtol=1e-5, atol=1e-5)
  x = sh(A, 0).realize()
  x.requires_grad = True
  (x.to("CPU:2") * Tensor(B, device="CPU:2")).sum().backward()   # through a gather
  close(x.grad, B)
  t = sh(A, 1).realize()
  g, = (t * t * 3).sum().gradient(t)   # Tensor.gradient too
  assert g.device == C2
  close(g, 6 * A)

def test_gradient_through_reshard():
  # the forward graph holds MSELECTs (each device's part of the other layout): their gradient rule runs
  for src_ax, dst_ax in [(0, 1), (1, None), (None, 0), (0, 0)]:
    x = sh(A, src_ax).realize()
    x.requires_grad = True
    y = x.shard(D2, dst_ax)
    (y * y * sh(B, dst_ax)).sum().backward()
    close(x.grad, 2 * A * B)

# ---- communication: only what the layouts require
def _copies(*ts: Tensor) -> int: return sum(1 for si in ts[0].schedule(*ts[1:]) if si.is_copy)

def test_copies_data_parallel():
  x = sh(X, 0, D4).realize()
  w = sh(W, None, D4).realize()
  w.requires_grad = True
  out = (x @ w).relu()
  assert _copies(out) == 0   # the forward pass of data parallelism moves nothing
  loss = out.square().sum()
  assert _copies(loss) == 4 * 3   # the loss all-reduce: every device gets the 3 other partials
  loss.backward()
  assert _copies(w.grad) == 4 * 3   # w's gradient all-reduce (a sum's gradient doesn't read the loss's value)
  y = sh(X, 1, D4).realize()
  assert _copies(y.shard(D4, 0)) == 4 * 3   # all-to-all: each device gets one piece from each other device
  assert _copies(y.shard(D4, None)) == 4 * 3   # all-gather: every device gets every other shard
  assert _copies(sh(X, None, D4).realize().shard(D4, 0)) == 0   # cutting a replica is local

# ---- the IR spec checks MULTI and MSELECT, and every graph here (logical and lowered) passes it
def test_spec():
  from tinycore.spec import SpecError, verify
  x, w = sh(X, 0, D4), sh(W, None, D4)
  x.requires_grad = True
  loss = ((x @ w).relu().sum(1) + sh(X, 1, D4).sum(1)).mean()
  loss.backward()
  for u in (loss.uop, x.grad.uop, x.shard(D4, 1).uop):
    assert verify(u, "tensor") and verify(lower(u), "tensor")
  a, b = Tensor(A[:2]).uop, Tensor(A[2:], device="CPU:1").uop
  with pytest.raises(SpecError, match="shards are on"): verify(UOp(Ops.MULTI, dtypes.float32, (a, b), (0, ("CPU:1", "CPU"))), "tensor")
  with pytest.raises(SpecError, match="2 shards for 3"): verify(UOp(Ops.MULTI, dtypes.float32, (a, b), (0, ("CPU", "CPU:1", "CPU:2"))), "tensor")
  c = Tensor(A[1:], device="CPU:1").uop   # 1 + 3 rows is not an even split of 4
  with pytest.raises(SpecError, match="even split"): verify(UOp(Ops.MULTI, dtypes.float32, (Tensor(A[:1]).uop, c), (0, C2)), "tensor")
  with pytest.raises(SpecError, match="different shapes"): verify(UOp(Ops.MULTI, dtypes.float32, (Tensor(A[:1]).uop, c), (None, C2)), "tensor")
  with pytest.raises(SpecError, match="MSELECT 2"): verify(UOp(Ops.MSELECT, dtypes.float32, (sh(A, 0).uop,), (2, 0)), "tensor")
  with pytest.raises(SpecError, match="tensor-level"): verify(x.uop, "kernel")
