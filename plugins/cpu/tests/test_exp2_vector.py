"""The C renderer's 16-lane exp2 (renderer_c.py: vrndscaleps/vscalefps where the compiler targets AVX-512, the
integer-exponent version elsewhere) against numpy: relative error within 2 ulp-ish over the whole range, and the
edges every exp2 here keeps: 0 below 2^-126 (no denormals), inf from 128 up, -inf -> 0, inf -> inf, nan -> nan."""
import numpy as np
import pytest
from tinycore import Tensor
pytestmark = pytest.mark.needs_device

def _exp2(x: np.ndarray) -> np.ndarray:
  assert x.size % 16 == 0   # whole 16-lane vectors: the vector helper, not the scalar one
  return Tensor(x).exp2().numpy()

def test_range_matches_numpy():
  x = np.concatenate([np.linspace(-126, 127.9, 1 << 16), np.random.default_rng(0).uniform(-30, 30, 1 << 14)]).astype(np.float32)
  got, ref = _exp2(x), np.exp2(x.astype(np.float64))
  np.testing.assert_allclose(got, ref, rtol=4e-7, atol=0)

def test_edges():
  x = np.array([-np.inf, np.inf, np.nan, -126.0, -126.01, -126.5, -127.0, -127.5, -200.0, -1e30, 127.9, 128.0, 128.5, 1e30,
                0.5, -0.5, 1.5, -2.5, 0.0, -0.0, 3e-8, -3e-8, 64.49999, -64.5, 100.25, -100.25, 1.0, 2.0, -125.5, -125.51, 5.0, 9.5],
               dtype=np.float32)
  got = _exp2(x)
  with np.errstate(over="ignore"): ref = np.exp2(x.astype(np.float64)).astype(np.float32)
  ref[(x < -126) | np.isneginf(x)] = 0.0   # flushed, never denormal
  np.testing.assert_allclose(got, ref, rtol=4e-7, atol=0)
  assert np.isnan(got[2]) and np.isinf(got[1]) and np.isinf(got[11]) and got[0] == 0 and got[-3] > 0
