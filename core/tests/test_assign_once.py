"""An assign runs once however many graphs hold it (engine/assign_once.py): torch's eager semantics, where the update
happened at the assign and every later read sees it exactly once."""
import gc
import numpy as np
import pytest
from tinycore import Tensor

pytestmark = pytest.mark.needs_device

def _zeros(): return Tensor(np.zeros(4, np.float32)).realize()

def test_reading_the_target_after_a_graph_built_from_it_ran():
  a = _zeros()
  a.assign(a + 1)
  b = a * 2
  np.testing.assert_equal(b.numpy(), 2)
  np.testing.assert_equal(a.numpy(), 1)
  np.testing.assert_equal(a.numpy(), 1)

def test_a_second_lazy_reader_does_not_run_it_again():
  a = _zeros()
  a.assign(a + 1)
  b, c = a * 2, a * 3
  np.testing.assert_equal(b.numpy(), 2)
  np.testing.assert_equal(c.numpy(), 3)
  np.testing.assert_equal(a.numpy(), 1)

def test_the_same_assign_built_again_runs_again():
  # a.assign(a + 1) after the first one ran builds the very same node (hash-consing) while c still holds the old one
  a = _zeros()
  a.assign(a + 1)
  c = a * 3
  a.realize()
  a.assign(a + 1)
  np.testing.assert_equal(a.numpy(), 2)   # swallowed as "already ran", a would stay 1
  c.numpy()   # lazy: c reads a's buffer when it runs (as tinygrad); what matters here is that it runs no assign
  np.testing.assert_equal(a.numpy(), 2)

def test_two_tensors_on_one_buffer_assign_twice():
  a = _zeros()
  a2 = Tensor(a.uop)
  a.assign(a + 1)
  a2.assign(a2 + 1)
  Tensor.realize(a, a2)
  got = a.numpy()
  # both updates ran once each, in order (each read the buffer's contents before its own write)
  assert got[0] in (1, 2) and np.all(got == got[0])
  np.testing.assert_equal(a2.numpy(), got)

def test_chained_assigns_read_through():
  a = _zeros()
  a.assign(a + 1)
  a.assign(a * 5)
  b = a + 0
  np.testing.assert_equal(b.numpy(), 5)
  np.testing.assert_equal(a.numpy(), 5)

def test_the_tables_forget_assigns_no_graph_holds():
  from tinycore.engine import assign_once
  gc.collect()
  before = len(assign_once._ran)
  a = _zeros()
  for _ in range(20):
    a.assign(a + 1)
    (a * 2).realize()
  np.testing.assert_equal(a.numpy(), 20)
  gc.collect()
  assert len(assign_once._ran) <= before + 2 and len(assign_once._pending) == 0

@pytest.mark.parametrize("depth", [3, 17, 40])
def test_a_long_chain_read_through_another_graph(depth):
  # b holds the whole chain: realizing it runs every link once; a then reads the end of the chain
  a = _zeros()
  for _ in range(depth): a.assign(a + 1)
  b = a * 2
  c = a * 3   # a second lazy reader of the same chain, realized after it ran
  np.testing.assert_equal(b.numpy(), 2 * depth)
  np.testing.assert_equal(c.numpy(), 3 * depth)
  np.testing.assert_equal(a.numpy(), depth)
  np.testing.assert_equal((a + 0).numpy(), depth)
