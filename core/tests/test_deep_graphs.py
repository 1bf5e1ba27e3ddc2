"""Long op chains: a loop of elementwise updates is one kernel as deep as the loop; it must compute at Python's default
recursion limit (every pass over a kernel's graph is iterative) in time linear in its length."""
import sys, time
import numpy as np
import pytest
from tinycore import Tensor, Device

pytestmark = pytest.mark.needs_device

@pytest.fixture
def default_recursion_limit():
  """Python's default limit for the test (pytest or hypothesis may have raised it): nothing may depend on a higher one."""
  old = sys.getrecursionlimit()
  sys.setrecursionlimit(1000)
  yield
  sys.setrecursionlimit(old)

def test_a_chain_of_1200_elementwise_ops_computes(default_recursion_limit):
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

def _mixed_chain(y, n: int, c: float):
  """n ops of x*a, x+b, relu (a MAX: its value range is asked for at each step of index folding), x-d."""
  for i in range(n):
    k = i % 4
    y = y * (1.001 + c) if k == 0 else y + 0.001 if k == 1 else y.relu() if k == 2 else y - 0.0005
  return y

def test_a_chain_of_2500_mixed_ops_computes(default_recursion_limit):
  x = np.linspace(-1, 2, 33).astype(np.float32)
  ref = x.astype(np.float64)
  for i in range(2500): ref = [lambda r: r * 1.001, lambda r: r + 0.001, lambda r: np.maximum(r, 0), lambda r: r - 0.0005][i % 4](ref)
  np.testing.assert_allclose(_mixed_chain(Tensor(x), 2500, 0.0).numpy(), ref, rtol=1e-4, atol=1e-5)

def _passes_time(n: int, c: float) -> float:
  """CPU seconds of everything tinycore itself does to turn an n-op chain into kernel source (schedule, lower, rewrite,
  render), not the C compiler's time: that one is the compiler's own business (and cached on disk)."""
  from tinycore.engine.schedule import create_schedule
  from tinycore.codegen import get_program
  y = _mixed_chain(Tensor(np.ones(16, np.float32)).realize(), n, c)   # c: a fresh graph each time, nothing cached from before
  st = time.process_time()
  sched = create_schedule([y.uop])
  get_program(sched[-1].ast, Device[Device.DEFAULT].renderer, None, device=Device.DEFAULT)
  return time.process_time() - st

def test_passes_scale_linearly_with_chain_length(default_recursion_limit):
  """A value range asked for while folding used to walk the whole chain below it, and the vectorizer toposorted per
  node (quadratic: 2000 ops took 5.8 s of passes, so 4000 ops ~23 s). Now 4000 ops take 0.5-1 s of CPU; the ratio to
  1000 ops measured 3-10x (the garbage collector's full passes grow with the heap), so the bounds sit well above that
  and well below the quadratic."""
  t1 = min(_passes_time(1000, 1e-6 * k) for k in range(2))
  t4 = min(_passes_time(4000, 1e-6 * (k + 2)) for k in range(2))
  assert t4 < 6, f"4000 ops took {t4:.1f}s of passes (1000 ops: {t1:.2f}s)"
  assert t4 / t1 < 20, f"1000 ops: {t1:.2f}s, 4000 ops: {t4:.2f}s: superlinear"
