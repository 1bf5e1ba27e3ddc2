"""Realizing while assigns are pending or have run somewhere in the process (engine/assign_once.py's tables non-empty)
leaves the user's graph as garbage that one collection frees: test_schedule_cache's test_no_buffer_kept_alive failed in
full runs when the bookkeeping cached UOp.toposort() (a list holding the node itself) on every root it walked. A
realized Tensor(x)'s BUFFER node became a self-cycle; the node above it, a cycle too, held it through its key in the
hash-cons table until the pass that freed it, so the buffer needed a second collection."""
import gc, weakref
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.engine import assign_once

pytestmark = pytest.mark.needs_device

def _rand(n, seed): return np.random.default_rng(seed).standard_normal(n).astype(np.float32)

@pytest.mark.parametrize("tables", ["ran", "pending", "both"])
def test_one_collection_frees_buffers_while_assigns_are_tracked(tables):
  keep = []
  if tables in ("ran", "both"):
    r = Tensor(np.zeros(4, np.float32)).realize()
    r.assign(r + 1)
    keep.append((r, r * 2))   # r * 2 still holds the assign that ran: it stays in _ran
    keep[-1][1].realize()
    assert len(assign_once._ran) > 0
  if tables in ("pending", "both"):
    p = Tensor(np.zeros(4, np.float32)).realize()
    p.assign(p + 1)   # never realized: stays pending
    keep.append(p)
    assert len(assign_once._pending) > 0
  for n in (1, 16, 17, 64):
    a = Tensor(_rand(n, seed=n)).realize()
    out = ((a + 1) * 2).sum().realize()
    np.testing.assert_allclose(out.numpy(), ((_rand(n, seed=n) + 1) * 2).sum(), rtol=1e-5)
    refs = [weakref.ref(a.uop.base.arg), weakref.ref(out.uop.base.arg)]
    del a, out
    gc.collect()
    assert all(r() is None for r in refs), "a realized buffer outlived its tensors and one collection"
