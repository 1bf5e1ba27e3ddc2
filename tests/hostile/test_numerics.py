"""Silent wrong numbers in ops (issue 18): each test reproduces a defect that returned a plausible number, and
compares against numpy's float64 result or torch."""
import math
import numpy as np
import pytest
from tinycore import Tensor, dtypes

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_device
nan, inf = math.nan, math.inf

# ---- long float sums: blocked, so no accumulator runs long enough to stall or drift

def test_sum_of_ones_past_float32_integers():
  # one float32 accumulator per row stops at 2^24 = 16777216
  np.testing.assert_array_equal(Tensor.ones(8, 2**25).sum(1).numpy(), np.full(8, 2.0**25, np.float32))
  np.testing.assert_array_equal(Tensor.ones(2**25, 8).sum(0).numpy(), np.full(8, 2.0**25, np.float32))
  assert Tensor.ones(2**25).sum().item() == 2**25

def test_sum_length_without_a_block_divisor():
  n = 2**25 + 4   # exact in float32, no divisor in [256, 4096]: blocks over the first q*4096, the remainder on its own
  assert Tensor.ones(n).sum().item() == n
  assert Tensor.ones(2, n).sum(1).tolist() == [n, n]

@pytest.mark.slow
def test_sum_of_a_billion_ones():
  assert Tensor.ones(10**9).sum().item() == 1e9   # was 536870912.0

def _rel(got, ref): return float(np.max(np.abs(np.asarray(got, np.float64) - ref) / np.maximum(np.abs(ref), 1e-30)))

@pytest.mark.parametrize("shape,axis", [((3_000_000,), None), ((4, 1_000_003), 1), ((1_000_000, 3), 0), ((3, 200_000, 5), 1)])
def test_sum_mean_accuracy_random(shape, axis):
  rng = np.random.default_rng(1)
  x = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)   # one sign: where a long float32 run drifts
  ref = x.astype(np.float64).sum(axis)
  # a single float32 accumulator here is off by ~1e-4 relative; blocked sums stay within a few float32 ulps
  assert _rel(Tensor(x).sum(axis).numpy(), ref) < 2e-6
  n = x.size if axis is None else x.shape[axis]
  assert _rel(Tensor(x).mean(axis).numpy(), ref / n) < 2e-6

def test_var_std_and_softmax_denominator_long_rows():
  rng = np.random.default_rng(2)
  x = (5 + rng.standard_normal((2, 1_000_000))).astype(np.float32)
  x64 = x.astype(np.float64)
  assert _rel(Tensor(x).var(1).numpy(), x64.var(1, ddof=1)) < 1e-5
  assert _rel(Tensor(x).std(1).numpy(), x64.std(1, ddof=1)) < 1e-5
  sm = Tensor(x).softmax(1).numpy()
  e = np.exp(x64 - x64.max(1, keepdims=True))
  np.testing.assert_allclose(sm.sum(1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(sm, e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-12)

def test_cumsum_long():
  rng = np.random.default_rng(3)
  x = rng.random(1 << 20).astype(np.float32)
  ref = np.cumsum(x.astype(np.float64))
  assert _rel(Tensor(x).cumsum(0).numpy(), ref) < 1e-5
  assert Tensor.ones(2**25).cumsum(0)[-1].item() == 2**25

def test_half_sum_accumulates_in_float32():
  s = Tensor.ones(4096, dtype=dtypes.half).sum()
  assert s.dtype == dtypes.half and s.item() == 4096.0   # a half accumulator stops at 2048
  x = np.random.default_rng(4).random(20000).astype(np.float16)
  np.testing.assert_allclose(Tensor(x).sum().item(), torch.from_numpy(x).sum().item(), rtol=2e-3)

# ---- NaN in max/min/argmax/argmin/sort/topk: torch's semantics (NaN is the largest and propagates)

ROWS = [[1., nan, 3.], [nan, 2., nan], [3., 2., 1.], [-inf, nan, inf], [1., 1., 0.]]

@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_reductions_with_nan_match_torch(op):
  x = np.array(ROWS, np.float32)
  ref = getattr(torch.from_numpy(x), op)(1)
  np.testing.assert_array_equal(getattr(Tensor(x), op)(1).numpy(), ref.values.numpy() if op in ("max", "min") else ref.numpy())
  assert getattr(Tensor([1., nan, 3.]), op)().item() == getattr(torch.tensor([1., nan, 3.]), op)().item() or op in ("max", "min")
  assert 0 <= Tensor([1., nan, 3.]).argmax().item() < 3   # was 3: out of range

@pytest.mark.parametrize("descending", [False, True])
def test_sort_with_nan_matches_torch(descending):
  x = np.array([[1., nan, 3., nan, 2., 1.], [nan, nan, -inf, inf, 0., -0.5]], np.float32)
  v, i = Tensor(x).sort(1, descending=descending)
  tv, ti = torch.from_numpy(x).sort(dim=1, descending=descending, stable=True)
  np.testing.assert_array_equal(v.numpy(), tv.numpy())
  np.testing.assert_array_equal(i.numpy(), ti.numpy())

@pytest.mark.parametrize("largest", [True, False])
def test_topk_with_nan_matches_torch(largest):
  x = np.array([1., nan, 3., nan, 2.], np.float32)
  v, i = Tensor(x).topk(3, largest=largest)
  tv, ti = torch.from_numpy(x).topk(3, largest=largest)
  np.testing.assert_array_equal(v.numpy(), tv.numpy())
  np.testing.assert_array_equal(i.numpy(), ti.numpy())

def test_clip_keeps_nan():
  x = np.array([nan, -5., 5., 0.5], np.float32)
  np.testing.assert_array_equal(Tensor(x).clip(-1, 1).numpy(), torch.from_numpy(x).clip(-1, 1).numpy())

# ---- infinite rows

def test_logsumexp_infinite_rows():
  x = np.array([[-inf, -inf], [0., 1.], [inf, 1.], [-inf, 2.]], np.float32)
  np.testing.assert_allclose(Tensor(x).logsumexp(1).numpy(), torch.from_numpy(x).logsumexp(1).numpy(), rtol=1e-6)   # was NaN for rows 0 and 2
  np.testing.assert_array_equal(Tensor(x).logcumsumexp(1).numpy()[0], [-inf, -inf])

def test_softmax_all_neg_inf_row_is_nan_like_torch():
  x = np.array([[-inf, -inf], [0., -inf]], np.float32)
  np.testing.assert_array_equal(Tensor(x).softmax(1).numpy(), torch.from_numpy(x).softmax(1).numpy())
  np.testing.assert_array_equal(Tensor(x).log_softmax(1).numpy(), torch.from_numpy(x).log_softmax(1).numpy())

# ---- labels out of range

LOGITS = [[1., 2., 3.], [0., 1., 0.]]

@pytest.mark.parametrize("bad", [3, 5, -3])
def test_sparse_categorical_crossentropy_rejects_bad_labels(bad):
  with pytest.raises(IndexError, match="out of bounds"): Tensor(LOGITS).sparse_categorical_crossentropy(Tensor([0, bad])).item()

def test_crossentropy_ignore_index_respected():
  x = np.array(LOGITS, np.float32)
  got = Tensor(x).sparse_categorical_crossentropy(Tensor([2, -1])).item()   # -1: tinygrad's default ignore_index
  ref = torch.nn.functional.cross_entropy(torch.from_numpy(x), torch.tensor([2, -1]), ignore_index=-1).item()
  assert got == pytest.approx(ref, rel=1e-6)
  got = Tensor(x).log_softmax(1).nll_loss(Tensor([2, -100]), ignore_index=-100).item()
  assert got == pytest.approx(torch.nn.functional.nll_loss(torch.from_numpy(x).log_softmax(1), torch.tensor([2, -100])).item(), rel=1e-6)

def test_cross_entropy_and_nll_loss_reject_bad_labels():
  with pytest.raises(IndexError, match="out of bounds"): Tensor(LOGITS).cross_entropy(Tensor([0, 3]))
  with pytest.raises(IndexError, match="out of bounds"): Tensor(LOGITS).log_softmax(1).nll_loss(Tensor([-1, 0]))

# ---- Python ints out of range

def test_python_int_out_of_range():
  for v in (2**70, 2**64, -2**63 - 1):
    with pytest.raises(OverflowError): Tensor(v)
  with pytest.raises(OverflowError): Tensor([1, 2**70])
  with pytest.raises(OverflowError): Tensor(300, dtype=dtypes.int8)
  with pytest.raises(OverflowError): Tensor.full((2,), -1, dtype=dtypes.uint8)

def test_python_int_past_int32_widens():
  for v in (2**31, 2**40, -2**63, 2**63 - 1):
    t = Tensor(v)
    assert t.dtype == dtypes.int64 and t.item() == v   # 2**40 was int32 0
  assert Tensor(2**64 - 1).item() == 2**64 - 1 and Tensor(2**64 - 1).dtype == dtypes.uint64
  assert Tensor([1, 2**40]).dtype == dtypes.int64 and Tensor([1, 2**40]).tolist() == [1, 2**40]
  assert Tensor.full((2,), 2**40).tolist() == [2**40, 2**40]
  assert Tensor(5).dtype == dtypes.default_int   # small ints keep the default

# ---- multinomial

@pytest.mark.parametrize("p", [[0.5, -0.1, 0.6], [0.5, nan, 0.6], [0., inf, 0.], [0., 0., 0.]])
def test_multinomial_rejects_bad_probabilities(p):
  with pytest.raises(ValueError, match="multinomial"): Tensor(p).multinomial(1)
  with pytest.raises(RuntimeError): torch.tensor(p).multinomial(1)

def test_multinomial_without_replacement_needs_enough_nonzero():
  with pytest.raises(ValueError, match="without replacement"): Tensor([0.5, 0., 0.5]).multinomial(3)
  s = Tensor([[0.2, 0., 0.8]]).multinomial(2).numpy()
  assert sorted(s[0].tolist()) == [0, 2]

# ---- integer reductions: exact where they fit the accumulator

def test_int_sums_and_means():
  x = np.full(1000, 100, np.int8)
  s = Tensor(x).sum()
  assert s.item() == 100000 and dtypes.is_int(s.dtype)   # int8 is summed in int32 (tinygrad), not wrapped at 127
  assert Tensor([1, 2, 4]).mean().item() == pytest.approx(7 / 3)
  assert Tensor.arange(1, 21, dtype=dtypes.int64).prod().item() == math.factorial(20)
