"""engine/operand_strides.py: the strides it reads off a chain of views agree with numpy's own strides for the same
views (numpy keeps a view without copying exactly when the strides can be written per axis), and the walk is bounded:
scheduling a deep graph of products costs about the same per reduction at 40 layers as at 160."""
import time
import numpy as np
from tinycore import dtypes
from tinycore.engine.schedule import create_schedule
from tinycore.uop import UOp, Ops
from tinycore.device import Buffer
from tinycore.engine.operand_strides import operand_reads, MAX_NODES, _reshape

def _buffer(n: int) -> UOp: return UOp(Ops.BUFFER, dtypes.float32, (), Buffer("NULL", n, dtypes.float32))

def _random_chain(rng, a: np.ndarray, u: UOp):
  """The same random movement op applied to a numpy view and to a lazy node."""
  op = rng.integers(0, 5)
  if op == 0:   # permute
    p = tuple(rng.permutation(a.ndim))
    return a.transpose(p), u.permute(p)
  if op == 1:   # shrink (a slice with a start)
    arg = tuple((int(b), int(s)) for b, s in ((rng.integers(0, max(1, s // 3)), s) for s in a.shape))
    return a[tuple(slice(b, e) for b, e in arg)], u.shrink(arg)
  if op == 2:   # flip
    f = tuple(bool(rng.integers(0, 2)) for _ in a.shape)
    return a[tuple(slice(None, None, -1) if x else slice(None) for x in f)], u.flip(f)
  if op == 3:   # expand a size-1 axis: insert one, broadcast it
    ax = int(rng.integers(0, a.ndim + 1))
    shape = a.shape[:ax] + (1,) + a.shape[ax:]
    big = shape[:ax] + (3,) + shape[ax + 1:]
    return np.broadcast_to(a.reshape(shape), big), u.reshape(shape).expand(big)
  # reshape: merge two neighbours or split one axis in two
  if a.ndim >= 2 and rng.integers(0, 2):
    ax = int(rng.integers(0, a.ndim - 1))
    shape = a.shape[:ax] + (a.shape[ax] * a.shape[ax + 1],) + a.shape[ax + 2:]
  else:
    ax = int(rng.integers(0, a.ndim))
    d = next((d for d in (2, 3, 5) if a.shape[ax] % d == 0), a.shape[ax])
    shape = a.shape[:ax] + (d, a.shape[ax] // d) + a.shape[ax + 1:]
  return a.reshape(shape), u.reshape(shape)

def test_strides_match_numpy_views():
  rng = np.random.default_rng(0)
  agreed = none = 0
  for trial in range(300):
    base = np.arange(360, dtype=np.float32)
    a, u = base.reshape(6, 60), _buffer(360).reshape((6, 60))
    for _ in range(int(rng.integers(1, 6))):
      a, u = _random_chain(rng, a, u)
      if not np.shares_memory(a, base): break   # numpy copied: a reshape of a non-mergeable view
    src = u * 2.0   # elementwise on top: the walk goes through it to the buffer
    got = operand_reads(src)
    assert got is not None and len(got.reads) == 1 and got.reads[0].size == 360
    st = got.reads[0].strides
    if np.shares_memory(a, base):
      # numpy's strides (bytes) of axes longer than 1; ours may be None only where a reshape merged a gap
      want = tuple(s // 4 if n > 1 else 0 for s, n in zip(a.strides, a.shape))
      if st is None: none += 1; continue
      assert tuple(x if n > 1 else 0 for x, n in zip(st, a.shape)) == want, (trial, a.shape, st, want)
      agreed += 1
    else: assert st is None, (trial, a.shape, st)
  assert agreed > 200 and none < 10, (agreed, none)

def test_reshape_strides():
  assert _reshape((4, 6), (6, 1), (24,)) == (1,)
  assert _reshape((4, 6), (1, 4), (24,)) is None            # a transposed matrix flattened: needs a copy
  assert _reshape((4, 6), (1, 4), (4, 2, 3)) == (1, 12, 4)  # splitting one axis is always a view
  assert _reshape((1, 8), (0, 1), (2, 1, 4)) == (4, 0, 1)

def _matmul(x: UOp, w: UOp) -> UOp:
  """x [M, K] @ w [K, N] as the frontend builds it: a broadcast product summed over K."""
  (M, K), N = x.shape, w.shape[1]
  return (x.reshape((M, K, 1)).expand((M, K, N)) * w.reshape((1, K, N)).expand((M, K, N))).r(Ops.ADD, (1,)).reshape((M, N))

def test_matvec_reads_and_cutoffs():
  """x @ W: the weight is read with unit stride along the output axis; a long fused chain or another reduction stops
  the walk (None, or a nested reduce) instead of following the graph."""
  x, w = _buffer(64).reshape((1, 64)), _buffer(64 * 96).reshape((64, 96))
  r = _matmul(x, w).src[0]
  got = operand_reads(r.src[0])
  big = max(got.reads, key=lambda rd: rd.size)
  assert big.size == 64 * 96 and big.strides == (0, 96, 1) and Ops.MUL in got.ops and not got.nested_reduce
  h = x
  for _ in range(MAX_NODES): h = h * 1.5 + 0.25
  assert operand_reads(_matmul(h, w).src[0].src[0]) is None
  wt = _buffer(64 * 96).reshape((96, 64)).permute((1, 0))
  assert max(operand_reads(_matmul(x, wt).src[0].src[0]).reads, key=lambda rd: rd.size).strides == (0, 1, 64)
  y = _matmul(x, w).alu(Ops.EXP2)
  assert operand_reads(_matmul(y, _buffer(96 * 8).reshape((96, 8))).src[0].src[0]).nested_reduce

def _schedule_cpu_time(layers: int) -> float:
  x = _buffer(1024).reshape((1, 1024))
  for _ in range(layers): x = _matmul(x, _buffer(1024 * 1024).reshape((1024, 1024))).maximum(0.0) + x
  t = time.process_time()
  create_schedule([x])
  return time.process_time() - t

def test_schedule_cost_grows_linearly():
  """Each reduction's check reads only its own kernel's views: 4x the layers is about 4x the scheduling work (the
  lowering it replaced walked each reduction's whole upstream graph: ~16x). CPU time, best of 2 (a loaded machine)."""
  small = min(_schedule_cpu_time(40) for _ in range(2))
  big = min(_schedule_cpu_time(160) for _ in range(2))
  assert big < 8 * small, (small, big)
