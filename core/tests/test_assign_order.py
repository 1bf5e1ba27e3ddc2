"""A kernel that reads a buffer's old contents runs before the kernel assigning into that buffer (engine/assign_order.py).
Nothing in the graph links them: the reader points at the BUFFER, and the walk order used to put the assign first (an
MLP's weight gradient recomputed relu(z + b) from the bias after the SGD update had overwritten it)."""
import numpy as np
import pytest
from tinycore import Tensor, TinyJit
pytestmark = pytest.mark.needs_device

@pytest.mark.parametrize("a_first", [True, False])
def test_reader_of_the_old_value_runs_before_the_assign(a_first):
  a = Tensor(np.ones(4, np.float32)).realize()
  b = Tensor(np.zeros(4, np.float32)).realize()
  v = a * 2                        # lazy: computed inside b's kernel, from a's buffer
  a.assign(a + 1)
  b.assign(b + v)
  Tensor.realize(*((a, b) if a_first else (b, a)))
  np.testing.assert_array_equal(a.numpy(), np.full(4, 2, np.float32))
  np.testing.assert_array_equal(b.numpy(), np.full(4, 2, np.float32))

def test_old_value_read_inside_a_reduction_and_a_broadcast():
  rng = np.random.default_rng(0)
  wn, bn, xn = (rng.standard_normal(s).astype(np.float32) for s in ((8, 5), (5,), (3, 8)))
  w, b, x = Tensor(wn).realize(), Tensor(bn).realize(), Tensor(xn).realize()
  h = (x @ w + b).relu()           # read by both updates below, through b's and w's old values
  b.assign(b - 0.5 * h.sum(0))
  w.assign(w - 0.5 * (x.T @ h))
  Tensor.realize(b, w)
  hn = np.maximum(xn @ wn + bn, 0)
  np.testing.assert_allclose(b.numpy(), bn - 0.5 * hn.sum(0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(w.numpy(), wn - 0.5 * (xn.T @ hn), rtol=1e-5, atol=1e-5)

def test_jit_replays_keep_the_order():
  a = Tensor(np.ones(4, np.float32)).realize()
  b = Tensor(np.zeros(4, np.float32)).realize()
  @TinyJit
  def step():
    v = a * 2
    a.assign(a + 1)
    b.assign(b + v)
    Tensor.realize(a, b)
  an, bn = np.ones(4, np.float32), np.zeros(4, np.float32)
  for _ in range(4):
    step()
    an, bn = an + 1, bn + 2 * an
  np.testing.assert_array_equal(a.numpy(), an)
  np.testing.assert_array_equal(b.numpy(), bn)

def test_reader_of_old_and_new_contents_reads_a_copy_of_the_old():
  # c needs a's old value (through v) and its new one: it can't run before the assign, so it reads a copy taken first
  a = Tensor(np.ones(4, np.float32)).realize()
  v = a * 2
  a.assign(a + 1)
  c = v + a
  Tensor.realize(c, a)
  np.testing.assert_array_equal(c.numpy(), np.full(4, 4, np.float32))
  np.testing.assert_array_equal(a.numpy(), np.full(4, 2, np.float32))
