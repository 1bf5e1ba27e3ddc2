"""Reduces that share a range but not their outer loops: upcasting a masked max splits it into lanes whose values are
all masked out (constants, free of the output loops) and lanes that load data. The linearizer once opened the shared
range for the constant lanes outside the output loops and placed the data lanes' loads between the two loops, reading
a loop variable that no longer existed (a C compile error)."""
import numpy as np
import pytest
from tinycore import Tensor

pytestmark = pytest.mark.needs_device

def _masked_scores(rng, keys: int, pad: int):
  q, kt = rng.random((2, 4, 6, 8), dtype=np.float32), rng.random((2, 4, 8, keys), dtype=np.float32)
  s = q @ np.pad(kt, ((0, 0), (0, 0), (0, 0), (0, pad))) * np.float32(0.35)
  n = keys + pad
  vis = (np.arange(n) < keys) & (np.arange(6).reshape(6, 1) >= np.arange(n))
  t = (Tensor(q) @ Tensor(kt).pad(((0, 0), (0, 0), (0, 0), (0, pad)))) * 0.35
  tvis = (Tensor.arange(n) < keys) & (Tensor.arange(6).reshape(6, 1) >= Tensor.arange(n))
  return t, tvis, s, vis

@pytest.mark.parametrize("keys,pad", [(6, 58), (6, 10), (17, 47), (1, 15)])
def test_masked_max_over_padded_keys(keys, pad):
  t, tvis, s, vis = _masked_scores(np.random.default_rng(keys), keys, pad)
  np.testing.assert_allclose(tvis.where(t, -float("inf")).max(-1).numpy(), np.where(vis, s, -np.inf).max(-1), rtol=1e-6)

@pytest.mark.parametrize("keys,pad", [(6, 58), (17, 47)])
def test_masked_sum_and_max_together(keys, pad):
  t, tvis, s, vis = _masked_scores(np.random.default_rng(keys + 1), keys, pad)
  got = tvis.where(t, 0.0).sum(-1) + tvis.where(t, -float("inf")).max(-1)
  np.testing.assert_allclose(got.numpy(), np.where(vis, s, 0).sum(-1) + np.where(vis, s, -np.inf).max(-1), rtol=1e-5)
