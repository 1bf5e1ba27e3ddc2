"""The memory plan (engine/run.py): a schedule's intermediates are freed after their last reader and their blocks reused,
so a long chain peaks at a few buffers; results and TinyJit replays are unchanged."""
import numpy as np
import pytest
from tinycore import Tensor, TinyJit
from tinycore.helpers import GlobalCounters
pytestmark = pytest.mark.needs_device
N = 1 << 18   # 1 MB of float32

def _chain(x: Tensor, n: int = 8) -> Tensor:
  for _ in range(n): x = (x * 1.0001 + 1).contiguous()
  return x

def _ref(x: np.ndarray, n: int = 8) -> np.ndarray:
  for _ in range(n): x = x * np.float32(1.0001) + np.float32(1)
  return x

def test_chain_peaks_at_two_buffers():
  x = Tensor(np.random.default_rng(0).random(N, dtype=np.float32)).realize()
  GlobalCounters.reset()
  before = GlobalCounters.mem_used
  out = _chain(x).realize()
  assert GlobalCounters.kernel_count == 8
  # the result and one intermediate alive at a time (8 kernels would otherwise hold 8 buffers)
  assert GlobalCounters.mem_peak - before <= 2 * 4 * N, (GlobalCounters.mem_peak - before) / (4 * N)
  np.testing.assert_allclose(out.numpy(), _ref(x.numpy()), rtol=1e-6)

def test_results_and_inputs_survive():
  a = Tensor(np.arange(N, dtype=np.float32)).realize()
  b, c = (a + 1).contiguous(), (a * 2).contiguous()
  d = (b + c).contiguous()
  Tensor.realize(d, b)   # b is a result here: kept although d was its last reader
  np.testing.assert_array_equal(b.numpy(), np.arange(N, dtype=np.float32) + 1)
  np.testing.assert_array_equal(d.numpy(), np.arange(N, dtype=np.float32) * 3 + 1)
  np.testing.assert_array_equal(a.numpy(), np.arange(N, dtype=np.float32))

def test_jit_replays_with_planned_buffers():
  f = TinyJit(lambda x: _chain(x, 5).realize())
  rng = np.random.default_rng(1)
  for _ in range(4):
    x = rng.random(N, dtype=np.float32)
    np.testing.assert_allclose(f(Tensor(x)).numpy(), _ref(x, 5), rtol=1e-6)
