"""The hand-written attention formula (core/tinycore/attention_formula.py): softmax(q @ k^T * scale [causal mask]) @ v
written out with matmul and softmax runs as the fused attention kernel, with torch's numerics; any other mask, a mask
read from memory, or another softmax axis keeps the unfused graph."""
import math
import numpy as np
import pytest
from tinycore import Tensor, GlobalCounters
from tinycore.codegen import is_fused
torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.needs_device

def _inputs(B, H, Sq, Sk, D, seed=0):
  rng = np.random.default_rng(seed)
  return tuple(rng.standard_normal(s).astype(np.float32) for s in ((B, H, Sq, D), (B, H, Sk, D), (B, H, Sk, D)))

def _fused_kernels(out: Tensor) -> int:
  return sum(1 for si in out.schedule() if not si.is_copy and is_fused(si.ast))

def _ref(q, k, v, causal, scale=None):
  return F.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), is_causal=causal, scale=scale).numpy()

FORMS = {
  "scale": lambda q, k, v, S, L, D: (q @ k.transpose(-2, -1) * (1 / math.sqrt(D))).softmax(-1) @ v,
  "divide": lambda q, k, v, S, L, D: (q.matmul(k.transpose(-1, -2)) / math.sqrt(D)).softmax(-1).matmul(v),
  "where_tril": lambda q, k, v, S, L, D: Tensor.ones(S, L, dtype="bool").tril().where(q @ k.transpose(-2, -1) * (1 / math.sqrt(D)),
                                                                                         -math.inf).softmax(-1) @ v,
  "additive": lambda q, k, v, S, L, D: (q @ k.transpose(-2, -1) * (1 / math.sqrt(D)) + Tensor.full((S, L), -math.inf).triu(1)).softmax(-1) @ v,
  "masked_fill": lambda q, k, v, S, L, D: (q @ k.transpose(-2, -1) * (1 / math.sqrt(D))).masked_fill(
    Tensor.ones(S, L, dtype="bool").triu(1), -math.inf).softmax(-1) @ v,
}

@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("B,H,Sq,Sk,D", [(1, 1, 1, 9, 32), (1, 3, 17, 17, 64), (2, 1, 65, 40, 80), (1, 1, 40, 65, 128)])
def test_formula_runs_fused(form, B, H, Sq, Sk, D):
  q, k, v = _inputs(B, H, Sq, Sk, D)
  out = FORMS[form](*(Tensor(x) for x in (q, k, v)), Sq, Sk, D)
  assert _fused_kernels(out) == 1
  causal = form not in ("scale", "divide")
  np.testing.assert_allclose(out.numpy(), _ref(q, k, v, causal), rtol=1e-5, atol=2e-6)

def test_formula_other_scale_and_constant_operand_order():
  q, k, v = _inputs(1, 2, 33, 33, 16, seed=1)
  tq, tk, tv = (Tensor(x) for x in (q, k, v))
  out = (0.37 * (tq @ tk.transpose(-2, -1))).softmax(-1) @ tv
  assert _fused_kernels(out) == 1
  np.testing.assert_allclose(out.numpy(), _ref(q, k, v, False, 0.37), rtol=1e-5, atol=2e-6)

def test_formula_long_sequence_never_holds_the_scores():
  """Realized (not only scheduled) through the fused kernel: S = 2048 scores would take 16 MiB."""
  q, k, v = (Tensor(x).realize() for x in _inputs(1, 1, 2048, 2048, 64, seed=2))
  GlobalCounters.reset()
  out = ((q @ k.transpose(-2, -1) * 0.125) + Tensor.full((2048, 2048), -math.inf).triu(1)).softmax(-1) @ v
  got = out.numpy()
  assert GlobalCounters.mem_peak - GlobalCounters.mem_used < 2048 * 2048 * 4 // 4
  np.testing.assert_allclose(got, _ref(*(t.numpy() for t in (q, k, v)), True), rtol=1e-4, atol=1e-5)

def test_other_masks_stay_unfused():
  """Not causal (a shifted diagonal, a finite 'minus a lot'), a mask read from memory, the softmax over another axis:
  the unfused graph, still equal to torch."""
  S, D = 12, 16
  q, k, v = _inputs(1, 2, S, S, D, seed=3)
  tq, tk, tv = (Tensor(x) for x in (q, k, v))
  s = tq @ tk.transpose(-2, -1) * 0.25
  shifted = np.tril(np.ones((S, S), dtype=bool), 1)
  cases = [
    (Tensor.ones(S, S, dtype="bool").tril(1).where(s, -math.inf).softmax(-1) @ tv, shifted, None),
    ((s + Tensor.full((S, S), -1e9).triu(1)).softmax(-1) @ tv, None, np.triu(np.full((S, S), -1e9, np.float32), 1)),
    (Tensor(np.tril(np.ones((S, S), dtype=bool))).where(s, -math.inf).softmax(-1) @ tv, np.tril(np.ones((S, S), dtype=bool)), None),
    (s.softmax(-2) @ tv, None, None)]
  for i, (out, bool_mask, add_mask) in enumerate(cases):
    assert _fused_kernels(out) == 0, i
    ts = torch.tensor(q) @ torch.tensor(k).transpose(-2, -1) * 0.25
    if bool_mask is not None: ts = ts.masked_fill(~torch.tensor(bool_mask), -math.inf)
    if add_mask is not None: ts = ts + torch.tensor(add_mask)
    ref = (ts.softmax(-2 if i == 3 else -1) @ torch.tensor(v)).numpy()
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6)

def test_formula_gradients_stay_correct():
  """A gradient built from the hand-written graph keeps its own (unfused) form; its forward realized fused."""
  q, k, v = _inputs(1, 2, 20, 20, 32, seed=4)
  tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
  out = Tensor.ones(20, 20, dtype="bool").tril().where(tq @ tk.transpose(-2, -1) * (1 / math.sqrt(32)), -math.inf).softmax(-1) @ tv
  grads = out.sum().gradient(tq, tk, tv)
  assert _fused_kernels(out) == 1
  rq, rk, rv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
  ref = F.scaled_dot_product_attention(rq, rk, rv, is_causal=True)
  ref.sum().backward()
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=2e-6)
  for g, r in zip(grads, (rq, rk, rv)): np.testing.assert_allclose(g.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-5)
