"""Long op chains: a loop of elementwise updates is one kernel as deep as the loop; it must compute, not hit Python's
recursion limit (the scheduler's walks are iterative; the recursive passes get a higher limit in realize)."""
import numpy as np
import pytest
from tinycore import Tensor

pytestmark = pytest.mark.needs_device

def test_a_chain_of_1200_elementwise_ops_computes():
  x = np.linspace(1, 2, 17).astype(np.float32)   # positive: relative error stays meaningful (no zero crossing)
  y, ref = Tensor(x), x.astype(np.float64)
  for _ in range(1200):
    y = y * 1.001 + 0.001
    ref = ref * 1.001 + 0.001
  # float32 rounding over 1200 steps stays near 1200 * 6e-8 relative; one step lost or repeated moves it by 1e-3
  np.testing.assert_allclose(y.numpy(), ref, rtol=3e-4, atol=1e-6)

def test_a_deep_chain_realized_in_steps_keeps_its_value():
  y = Tensor(np.ones(5, np.float32))
  for i in range(400):
    y = (y + 1).relu() - 1
    if i % 100 == 99: y = y.realize()
  np.testing.assert_array_equal(y.numpy(), np.ones(5, np.float32))
