"""TinyJit's memory plan (engine/jit_memory.py): a capture's intermediates share best-fit blocks when their lifetimes
don't overlap; anything still referenced outside the kernels keeps its own buffer; replays compute what numpy does."""
import gc
import numpy as np
import pytest
from hypothesis import given, strategies as st
from tinycore import Tensor, TinyJit
from tinycore.engine.jit_memory import _best_fit, _Desc
from tinycore.dtype import dtypes
from tinycore.helpers import GlobalCounters
from test_memory_plan import _chain, _ref   # the same 8-kernel chain the eager plan is tested on
N = 1 << 16

@pytest.mark.needs_device
def test_replay_holds_a_few_blocks_not_every_intermediate():
  # mem_peak counts every buffer in the process: what earlier tests left alive (in the same xdist worker) is not ours,
  # and neither is cyclic garbage that a collection at some later point in the loop would have freed
  gc.collect()
  before = GlobalCounters.mem_used
  f = TinyJit(lambda x: _chain(x).realize())
  rng = np.random.default_rng(0)
  for i in range(5):
    xn = rng.random(N, dtype=np.float32)
    x = Tensor(xn).realize()
    gc.collect()
    GlobalCounters.reset()
    out = f(x)
    if i >= 2:   # replays: the input, the output and two shared blocks (8 kernels would otherwise hold 7 intermediates)
      assert GlobalCounters.mem_peak - before <= 4 * 4 * N + 4096, (GlobalCounters.mem_peak - before) / (4 * N)
    np.testing.assert_allclose(out.numpy(), _ref(xn), rtol=1e-5)

@pytest.mark.needs_device
def test_buffer_kept_outside_the_kernels_is_not_shared():
  class Holder: h = None
  holder = Holder()
  @TinyJit
  def f(x):
    holder.h = (x + 1).contiguous().realize()   # a realized intermediate the caller reads after the call
    y = holder.h
    for _ in range(4): y = (y * 2).contiguous()
    return y.realize()
  rng = np.random.default_rng(1)
  for _ in range(5):
    xn = rng.random(N, dtype=np.float32)
    out = f(Tensor(xn).realize()).numpy()
    np.testing.assert_allclose(out, (xn + 1) * 16, rtol=1e-6)
    np.testing.assert_allclose(holder.h.numpy(), xn + 1, rtol=1e-6)   # not overwritten by a later kernel's block

@pytest.mark.needs_device
def test_train_step_under_jit_matches_eager():
  from tinycore import nn
  rng = np.random.default_rng(2)
  X, Y = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((16, 2)).astype(np.float32)
  w0 = [rng.standard_normal((8, 16)).astype(np.float32) * 0.3, rng.standard_normal((16, 2)).astype(np.float32) * 0.3]
  def run(jit: bool):
    ws = [Tensor(w.copy(), requires_grad=True) for w in w0]
    opt = nn.optim.SGD(ws, lr=0.05)
    def step(x, y):
      opt.zero_grad()
      loss = (((x @ ws[0]).relu() @ ws[1] - y) ** 2).mean()
      loss.backward()
      opt.step()
      return loss.realize()
    fn = TinyJit(step) if jit else step
    with Tensor.train():
      for _ in range(5): fn(Tensor(X), Tensor(Y))
    return [w.numpy() for w in ws]
  for a, b in zip(run(False), run(True)): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

@given(st.lists(st.tuples(st.integers(1, 64), st.integers(0, 12), st.integers(0, 5)), min_size=1, max_size=24))
def test_best_fit_never_shares_overlapping_lifetimes(bufs):
  descs = {i: _Desc("CPU", size, dtypes.float32, None, first, first + span) for i, (size, first, span) in enumerate(bufs)}
  blocks = _best_fit(descs, set(descs))
  for i, a in descs.items():
    assert blocks[i].nbytes >= a.nbytes
    for j, b in descs.items():
      if i < j and blocks[i] is blocks[j]: assert a.last < b.first or b.last < a.first, (a, b)
  # reuse does happen: buffers used one after another share one block
  seq = {i: _Desc("CPU", 16, dtypes.float32, None, i, i) for i in range(4)}
  assert len({id(b) for b in _best_fit(seq, set(seq)).values()}) == 1

@pytest.mark.needs_device
def test_views_at_one_address_read_back_their_own_bytes():
  """Two views starting where their base does (the JIT plan makes many): each reads its own size, the base all of it."""
  t = Tensor(np.arange(8, dtype=np.float32)).realize()
  base = t.uop.base.arg
  small, shifted = base.view(4, dtypes.float32, 0).ensure_allocated(), base.view(2, dtypes.float32, 8).ensure_allocated()
  np.testing.assert_array_equal(small.numpy(), np.arange(4))
  np.testing.assert_array_equal(shifted.numpy(), [2, 3])
  np.testing.assert_array_equal(t.numpy(), np.arange(8))   # read back short before: the view's size had replaced the base's

@pytest.mark.needs_device
def test_copy_out_of_a_shared_block():
  from tinycore import Device
  other = f"{Device.DEFAULT}:1"
  try: Device[other]
  except Exception as e: pytest.skip(f"no second {Device.DEFAULT}: {e}")
  @TinyJit
  def f(x):
    a = (x * 2).contiguous().to(other).realize()   # a small intermediate copied out of its block...
    big = (x.reshape(8, 1, 8).expand(8, 4, 8) * 3).contiguous().sum().to(other).realize()   # ...then a bigger one in that block
    return (a + big).realize()
  rng = np.random.default_rng(3)
  for _ in range(4):
    xn = rng.random(64, dtype=np.float32)
    np.testing.assert_allclose(f(Tensor(xn).realize()).numpy(), xn * 2 + xn.sum() * 12, rtol=1e-5)

def _realized_steps(x):
  for _ in range(8): x = (x * 2 + 1).contiguous().realize()   # a realize per step, the previous step's Tensor dropped
  return x

@pytest.mark.needs_device
@pytest.mark.parametrize("release", [True, False])
def test_capture_gives_back_what_only_the_kernels_hold(monkeypatch, release):
  """A capture made of separate realizes (an LLM layer at a time) holds each step's buffer only through its kernels
  once Python drops it: that memory goes back during the capture, so the capture peaks like an eager call does."""
  from tinycore.engine import jit_memory
  if not release: monkeypatch.setattr(jit_memory.CaptureRecorder, "_release", lambda self: None)   # the bound is not vacuous
  f = TinyJit(_realized_steps)
  rng = np.random.default_rng(2)
  for i in range(4):
    xn = rng.random(N, dtype=np.float32)
    x = Tensor(xn).realize()
    GlobalCounters.reset()
    before = GlobalCounters.mem_used
    out = f(x)
    np.testing.assert_allclose(out.numpy(), ((((((((xn * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1) * 2 + 1), rtol=1e-5)
    grew = (GlobalCounters.mem_peak - before) / (4 * N)
    if i == 1:   # the capture: two steps' buffers live at once (without the release: all 8 steps')
      assert (grew <= 2) == release, grew
