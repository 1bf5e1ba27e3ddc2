"""fp16 matmul accumulates in float32 and rounds once, as torch and tinygrad do: a half accumulator drifts (a 64-term
dot product was off by 0.08 on CPU:LLVM, where float accumulation stays within the output's rounding)."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes

pytestmark = pytest.mark.needs_device

@pytest.mark.parametrize("k", [15, 64, 257])
def test_half_matmul_accumulates_in_float32(k):
  rng = np.random.default_rng(k)
  a, b = (rng.uniform(-2, 2, s).astype(np.float16) for s in ((48, k), (k, 40)))
  want = a.astype(np.float64) @ b.astype(np.float64)
  got = Tensor(a) @ Tensor(b)
  assert got.dtype == dtypes.half
  # products rounded to half (2^-11 relative each) plus one final rounding: well under what a half accumulator loses
  err = np.abs(got.numpy().astype(np.float64) - want).max()
  assert err <= 2e-3 * np.sqrt(k) * 4 + np.abs(want).max() * 2 ** -11, err
