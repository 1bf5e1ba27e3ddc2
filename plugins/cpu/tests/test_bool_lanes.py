"""Bool values on vector lanes: C vector comparisons give -1/0 lanes, not 1/0, so every op that meets a scalar bool or
reads bools as numbers (not, <, max, casts) must treat the lanes as masks. Sizes straddle the 16-lane vector width; the
reference is numpy. Found by the graph fuzzer: `(a < b).logical_not()` was true in every lane at n=16."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes

rng = np.random.default_rng(7)
CASES = {
  "not": (lambda A, B, M: (A < B).logical_not(), lambda a, b, m: ~(a < b)),
  "lt_true": (lambda A, B, M: (A < B) < True, lambda a, b, m: (a < b) < True),
  "mask_lt_mask": (lambda A, B, M: M < (A < B), lambda a, b, m: m < (a < b)),
  "mask_gt_mask": (lambda A, B, M: (A < B) > M, lambda a, b, m: (a < b) > m),
  "eq_true": (lambda A, B, M: (A < B) == True, lambda a, b, m: a < b),  # noqa: E712
  "ne_mask": (lambda A, B, M: (A < B) != M, lambda a, b, m: (a < b) != m),
  "xor_true": (lambda A, B, M: (A < B) ^ True, lambda a, b, m: (a < b) ^ True),
  "and_mask": (lambda A, B, M: (A < B) & M, lambda a, b, m: (a < b) & m),
  "or_not": (lambda A, B, M: (A < B) | M.logical_not(), lambda a, b, m: (a < b) | ~m),
  "max": (lambda A, B, M: Tensor.maximum(A < B, M), lambda a, b, m: np.maximum(a < b, m)),
  "min": (lambda A, B, M: Tensor.minimum(A < B, M), lambda a, b, m: np.minimum(a < b, m)),
  "where_bools": (lambda A, B, M: M.where(A < B, A > 0), lambda a, b, m: np.where(m, a < b, a > 0)),
  "where_const": (lambda A, B, M: (A < B).where(True, M), lambda a, b, m: np.where(a < b, True, m)),
  "cast_float": (lambda A, B, M: (A < B).cast(dtypes.float), lambda a, b, m: (a < b).astype(np.float32)),
  "cast_int": (lambda A, B, M: (A < B).logical_not().cast(dtypes.int32) + 2, lambda a, b, m: (~(a < b)).astype(np.int32) + 2),
  "cast_u8": (lambda A, B, M: (A < B).cast(dtypes.uint8), lambda a, b, m: (a < b).astype(np.uint8)),
  "not_cmp_char": (lambda A, B, M: M & ((A * 0).neg() < B.cast(dtypes.int8)).logical_not(),
                   lambda a, b, m: m & ~(np.float32(-0.0) < b.astype(np.int8))),
  "any_all": (lambda A, B, M: (A < B).reshape(2, -1).any(1).cast(dtypes.int32) + (A < B).reshape(2, -1).all(1).cast(dtypes.int32),
              lambda a, b, m: (a < b).reshape(2, -1).any(1).astype(np.int32) + (a < b).reshape(2, -1).all(1).astype(np.int32)),
}

@pytest.mark.parametrize("n", [14, 16, 18, 32, 34, 64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bool_lanes_match_numpy(case, n):
  a, b = (rng.standard_normal(n) * 40).astype(np.float32), (rng.standard_normal(n) * 40).astype(np.float32)
  m = rng.random(n) < 0.5
  ours, ref = CASES[case]
  got = ours(Tensor(a), Tensor(b), Tensor(m)).numpy()
  np.testing.assert_array_equal(got, ref(a, b, m))
