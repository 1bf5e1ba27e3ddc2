"""Comparison helpers for the conformance kit: value, shape and dtype against numpy, with tolerances per dtype."""
from __future__ import annotations
import numpy as np
from tinycore import Tensor

TOL = {np.dtype(np.float16): (1e-2, 1e-2), np.dtype(np.float32): (1e-5, 1e-4), np.dtype(np.float64): (1e-10, 1e-9)}

def rng(seed: int = 0) -> np.random.Generator: return np.random.default_rng(seed)

def rand(*shape, dtype=np.float32, seed: int = 0, low=-2.0, high=2.0) -> np.ndarray:
  r = rng(seed + len(shape) * 7919 + int(np.prod(shape, dtype=np.int64)))
  if np.dtype(dtype).kind == "b": return r.random(shape) > 0.5
  if np.dtype(dtype).kind in "iu": return r.integers(int(max(low, np.iinfo(dtype).min)), int(min(high, np.iinfo(dtype).max)) + 1, shape).astype(dtype)
  return r.uniform(low, high, shape).astype(dtype)

def check(got, expected, atol=None, rtol=None, dtype=True):
  """Assert a Tensor (or numpy result) matches a numpy expectation in shape, dtype (unless dtype=False) and value."""
  g = got.numpy() if isinstance(got, Tensor) else np.asarray(got)
  e = np.asarray(expected)
  assert g.shape == e.shape, f"shape {g.shape} != expected {e.shape}"
  if dtype: assert g.dtype == e.dtype, f"dtype {g.dtype} != expected {e.dtype}"
  if e.dtype.kind in "biu" and g.dtype.kind in "biu": np.testing.assert_array_equal(g, e); return
  a, r = TOL.get(e.dtype, (1e-5, 1e-4))
  np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), atol=a if atol is None else atol, rtol=r if rtol is None else rtol,
                             equal_nan=True)
