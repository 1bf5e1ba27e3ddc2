"""Fused attention on the CPU (core/tinycore/codegen/attention.py): scaled_dot_product_attention without a mask, or
causal, is one kernel with an online softmax. Values and gradients against torch's scaled_dot_product_attention at
sequence lengths around the key tile (32) and the query tile (4 rows), head dims 16-128, odd batch*heads, fp32 and
fp16; that the fused kernel ran and no S x S buffer exists; masks and dropout keep the unfused path, with torch's
semantics for fully masked rows."""
import numpy as np
import pytest
from tinycore import Tensor, GlobalCounters, dtypes
from tinycore.codegen import is_fused
torch = pytest.importorskip("torch")
F = torch.nn.functional
pytestmark = pytest.mark.needs_device

def _inputs(B, H, Sq, Sk, D, Dv, seed=0):
  rng = np.random.default_rng(seed)
  return (rng.standard_normal((B, H, Sq, D)).astype(np.float32), rng.standard_normal((B, H, Sk, D)).astype(np.float32),
          rng.standard_normal((B, H, Sk, Dv)).astype(np.float32))

def _schedule_stats(out: Tensor) -> tuple[int, int]:
  """(fused kernels, largest buffer in elements) of what realizing `out` would run."""
  items = out.schedule()
  return sum(1 for si in items if not si.is_copy and is_fused(si.ast)), max(b.size for si in items for b in si.bufs)

SHAPES = [  # B, H, Sq, Sk, D, Dv, causal
  (1, 1, 1, 1, 32, 32, False), (1, 3, 15, 15, 64, 64, True), (1, 1, 16, 16, 32, 32, False), (3, 1, 17, 17, 80, 80, True),
  (1, 1, 63, 63, 128, 128, False), (1, 1, 64, 64, 64, 64, True), (1, 3, 65, 65, 32, 32, False), (1, 1, 511, 511, 64, 64, True),
  (1, 1, 511, 511, 64, 64, False), (1, 1, 17, 40, 64, 64, True), (1, 1, 40, 17, 64, 64, True), (1, 1, 5, 33, 16, 48, False),
  (1, 3, 33, 7, 20, 12, False),
  # many register blocks per program instance (codegen/attention.py _row_blocks), the last instance holding fewer
  (2, 8, 200, 200, 64, 64, True), (2, 8, 200, 137, 64, 64, False), (2, 8, 137, 200, 48, 80, True)]

@pytest.mark.parametrize("B,H,Sq,Sk,D,Dv,causal", SHAPES)
def test_forward_matches_torch(B, H, Sq, Sk, D, Dv, causal):
  q, k, v = _inputs(B, H, Sq, Sk, D, Dv)
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=causal)
  fused, biggest = _schedule_stats(out)
  assert fused == 1
  assert biggest < B * H * Sq * Sk or Sk <= max(D, Dv) + 32   # no score matrix (small Sk: the inputs are bigger than it)
  ref = F.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), is_causal=causal).numpy()
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6)

@pytest.mark.parametrize("S", [1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 97, 131, 257])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_tile_edges(S, causal):
  """Causal: whole key tiles unmasked below the diagonal, the diagonal in 16-key pieces up to each block's last row;
  not causal: whole tiles unmasked, the partial last tile's pieces masked. Sk != Sq moves the diagonal and the tail."""
  for sq, sk in ((S, S), (S, S + 70), (S + 70, S)):
    q, k, v = _inputs(1, 5, sq, sk, 64, 48, seed=S)
    out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=causal).numpy()
    ref = F.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), is_causal=causal).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-6)

def test_batch_broadcast_and_3d():
  q, k, v = _inputs(2, 3, 9, 21, 32, 32)
  out = Tensor(q).scaled_dot_product_attention(Tensor(k[:1]), Tensor(v[:1]))   # keys/values shared over the batch
  ref = F.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k[:1]), torch.tensor(v[:1])).numpy()
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6)
  out3 = Tensor(q[0]).scaled_dot_product_attention(Tensor(k[0]), Tensor(v[0]), is_causal=True)
  np.testing.assert_allclose(out3.numpy(), F.scaled_dot_product_attention(*map(torch.tensor, (q[0], k[0], v[0])), is_causal=True).numpy(),
                             rtol=1e-5, atol=2e-6)

@pytest.mark.parametrize("causal", [False, True])
def test_fp16_inputs(causal):
  q, k, v = (x.astype(np.float16) for x in _inputs(1, 3, 65, 65, 64, 64, seed=1))
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=causal)
  assert out.dtype == dtypes.float16 and _schedule_stats(out)[0] == 1
  ref = F.scaled_dot_product_attention(*(torch.tensor(x.astype(np.float32)) for x in (q, k, v)), is_causal=causal).numpy()
  np.testing.assert_allclose(out.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3)   # fp16 rounding of the output

@pytest.mark.parametrize("B,H,Sq,Sk,D,Dv,causal", [(1, 3, 17, 17, 32, 32, True), (1, 1, 65, 40, 64, 64, False),
                                                   (1, 1, 40, 65, 80, 80, True), (1, 1, 1, 1, 16, 16, False)])
@pytest.mark.parametrize("explicit", [True, False])
def test_grads_match_torch(B, H, Sq, Sk, D, Dv, causal, explicit):
  """explicit: the inputs ask for gradients, so the forward keeps each row's log-sum-exp; else (tinygrad's rule: a
  plain tensor gets a gradient too) the backward recomputes it from the scores."""
  q, k, v = _inputs(B, H, Sq, Sk, D, Dv, seed=2)
  w = np.random.default_rng(3).standard_normal((B, H, Sq, Dv)).astype(np.float32)
  tq, tk, tv = (Tensor(x, requires_grad=True if explicit else None) for x in (q, k, v))
  out = tq.scaled_dot_product_attention(tk, tv, is_causal=causal)
  assert _schedule_stats(out)[0] == 1
  grads = (out * Tensor(w)).sum().gradient(tq, tk, tv)
  rq, rk, rv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
  (F.scaled_dot_product_attention(rq, rk, rv, is_causal=causal) * torch.tensor(w)).sum().backward()
  np.testing.assert_allclose(out.numpy(), F.scaled_dot_product_attention(rq, rk, rv, is_causal=causal).detach().numpy(), rtol=1e-5, atol=2e-6)
  for g, r in zip(grads, (rq, rk, rv)): np.testing.assert_allclose(g.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-5)

GRAD_SHAPES = [  # B, H, Sq, Sk, D, Dv, causal: around the backward's query tile (16/32) and key block, one chunk and several
  (1, 1, 1, 1, 32, 32, True), (1, 3, 15, 15, 64, 64, False), (1, 1, 16, 16, 32, 32, True), (3, 1, 17, 17, 80, 80, False),
  (1, 1, 63, 63, 128, 128, True), (1, 1, 64, 64, 64, 64, False), (1, 3, 65, 65, 32, 32, True), (1, 1, 511, 511, 64, 64, True),
  (3, 3, 511, 511, 64, 64, False), (1, 1, 33, 7, 64, 48, True), (1, 1, 7, 70, 16, 16, True), (5, 1, 40, 90, 80, 32, False),
  (1, 1, 70, 70, 64, 16, False), (1, 3, 45, 100, 48, 80, True)]   # uneven D / Dv: key blocks of 4 and of 2 rows

@pytest.mark.parametrize("B,H,Sq,Sk,D,Dv,causal", GRAD_SHAPES)
def test_fused_backward_matches_torch(B, H, Sq, Sk, D, Dv, causal):
  """The backward is one fused kernel (plus elementwise prep and a sum over key chunks), no buffer as big as the S x S
  scores, and its dq, dk, dv match torch to fp32 accumulation error."""
  q, k, v = _inputs(B, H, Sq, Sk, D, Dv, seed=8)
  w = np.random.default_rng(9).standard_normal((B, H, Sq, Dv)).astype(np.float32)
  tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
  grads = (tq.scaled_dot_product_attention(tk, tv, is_causal=causal) * Tensor(w)).sum().gradient(tq, tk, tv)
  items = grads[0].schedule(*grads[1:])
  names = [si.ast.src[0].arg.prefix for si in items if not si.is_copy and is_fused(si.ast)]
  assert sorted(names) == ["attn_", "attn_bwd_"]
  if Sq * Sk > 4 * (Sq + Sk) * max(D, Dv):   # where the scores outsize every input
    assert max(b.size for si in items for b in si.bufs) < B * H * Sq * Sk
  rq, rk, rv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
  (F.scaled_dot_product_attention(rq, rk, rv, is_causal=causal) * torch.tensor(w)).sum().backward()
  for g, r in zip(grads, (rq, rk, rv)):
    ref = r.grad.numpy()
    np.testing.assert_allclose(g.numpy(), ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))

# each pair compiles ~10 kernels cold (~15 s of one core): CI keeps one pair per tile edge, the rest run with -m slow
_SLOW = pytest.mark.slow
@pytest.mark.parametrize("S,D", [(1, 32), (17, 80), (47, 128), pytest.param(49, 64, marks=_SLOW), (63, 32),
                                 pytest.param(65, 128, marks=_SLOW), pytest.param(97, 80, marks=_SLOW), (500, 64)])
def test_backward_sweep(S, D):
  """Gradients at sequence lengths around the backward's 48- or 32-query tiles (8 x 6 or 4 rows) and 64-key blocks, causal (tiles
  starting at each key block, step loops stopping at the diagonal) and not, Sk = Sq and Sk != Sq."""
  for causal, (sq, sk) in ((False, (S, S)), (True, (S, S)), (True, (S, S + 33) if S % 2 else (S + 33, S))):
    q, k, v = _inputs(1, 2, sq, sk, D, D, seed=S + D)
    w = np.random.default_rng(S).standard_normal((1, 2, sq, D)).astype(np.float32)
    tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
    grads = (tq.scaled_dot_product_attention(tk, tv, is_causal=causal) * Tensor(w)).sum().gradient(tq, tk, tv)
    rq, rk, rv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    (F.scaled_dot_product_attention(rq, rk, rv, is_causal=causal) * torch.tensor(w)).sum().backward()
    for g, r in zip(grads, (rq, rk, rv)):
      ref = r.grad.numpy()
      np.testing.assert_allclose(g.numpy(), ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))

@pytest.mark.parametrize("additive", [False, True])
def test_masked_grads_match_torch(additive):
  """An explicit mask keeps the unfused graph; its gradients (a fully masked row included: NaN as torch) match torch."""
  q, k, v = _inputs(1, 2, 17, 23, 32, 32, seed=14)
  mask = np.random.default_rng(15).random((17, 23)) < 0.7
  mask[:, 0] = True
  m = np.where(mask, 0.0, -np.inf).astype(np.float32) if additive else mask
  tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
  grads = tq.scaled_dot_product_attention(tk, tv, attn_mask=Tensor(m)).sum().gradient(tq, tk, tv)
  rq, rk, rv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
  F.scaled_dot_product_attention(rq, rk, rv, attn_mask=torch.tensor(m)).sum().backward()
  for g, r in zip(grads, (rq, rk, rv)): np.testing.assert_allclose(g.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-5)

def test_fused_backward_fp16_and_self_attention():
  """fp16 inputs get fp16 gradients; q = k = v (one buffer read as three inputs) in both kernels."""
  x = _inputs(1, 3, 65, 65, 64, 64, seed=10)[0]
  t = Tensor(x.astype(np.float16), requires_grad=True)
  out = t.scaled_dot_product_attention(t, t, is_causal=True)
  (g,) = out.float().sum().gradient(t)
  assert out.dtype == dtypes.float16 and g.dtype == dtypes.float16
  r = torch.tensor(x.astype(np.float16).astype(np.float32), requires_grad=True)
  ref_out = F.scaled_dot_product_attention(r, r, r, is_causal=True)
  ref_out.sum().backward()
  np.testing.assert_allclose(out.numpy().astype(np.float32), ref_out.detach().numpy(), rtol=2e-3, atol=2e-3)
  np.testing.assert_allclose(g.numpy().astype(np.float32), r.grad.numpy(), rtol=1e-2, atol=1e-2)
  t32 = Tensor(x, requires_grad=True)
  (g32,) = t32.scaled_dot_product_attention(t32, t32).sum().gradient(t32)
  r = torch.tensor(x, requires_grad=True)
  F.scaled_dot_product_attention(r, r, r).sum().backward()
  np.testing.assert_allclose(g32.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-5)

def test_backward_fills_grad():
  q, k, v = _inputs(1, 1, 9, 9, 16, 16, seed=4)
  tq = Tensor(q, requires_grad=True)
  tq.scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True).sum().backward()
  rq = torch.tensor(q, requires_grad=True)
  F.scaled_dot_product_attention(rq, torch.tensor(k), torch.tensor(v), is_causal=True).sum().backward()
  np.testing.assert_allclose(tq.grad.numpy(), rq.grad.numpy(), rtol=1e-4, atol=1e-5)

def test_nan_and_inf_inputs():
  q, k, v = _inputs(1, 1, 8, 8, 16, 16, seed=5)
  q[0, 0, 2, 3] = np.nan   # a NaN query: its row is NaN (torch's CPU kernel returns a finite row here; NaN in, NaN out is ours)
  k[0, 0, 5, 0] = np.inf   # an infinite key: rows that see it get inf - inf = NaN, exactly as torch
  for causal in (False, True):
    out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=causal).numpy()
    ref = F.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), is_causal=causal).numpy()
    assert np.isnan(out[0, 0, 2]).all()
    rows = [i for i in range(8) if i != 2]
    np.testing.assert_allclose(out[0, 0, rows], ref[0, 0, rows], rtol=1e-5, atol=2e-6, equal_nan=True)
    assert np.isnan(out[0, 0, rows]).any(-1).tolist() == [(i >= 5 or not causal) and q[0, 0, i, 0] > 0 for i in rows]

def test_masks_and_dropout_stay_unfused():
  """An explicit mask (bool or additive) is the unfused graph: fully masked rows follow torch (NaN rows from -inf)."""
  q, k, v = _inputs(1, 2, 6, 6, 16, 16, seed=6)
  mask = np.tril(np.ones((6, 6), dtype=bool))
  mask[4] = False   # a fully masked row
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(mask))
  assert _schedule_stats(out)[0] == 0
  ref = F.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), attn_mask=torch.tensor(mask)).numpy()
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6, equal_nan=True)
  add = np.where(mask, 0.0, -np.inf).astype(np.float32)
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(add))
  ref = F.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), attn_mask=torch.tensor(add)).numpy()
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=2e-6, equal_nan=True)
  with Tensor.train():
    assert _schedule_stats(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), dropout_p=0.5))[0] == 0

def test_float64_stays_unfused():
  q, k, v = (x.astype(np.float64) for x in _inputs(1, 1, 8, 8, 16, 16))
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v))
  assert _schedule_stats(out)[0] == 0 and out.dtype == dtypes.float64

def test_long_sequence_memory():
  """S = 4096: the score matrix would be 64 MiB per head; the fused kernel's peak is its inputs and output (~4 MiB)."""
  B, H, S, D = 1, 1, 4096, 64
  q, k, v = (Tensor(x).realize() for x in _inputs(B, H, S, S, D, D, seed=7))
  GlobalCounters.reset()
  out = q.scaled_dot_product_attention(k, v, is_causal=True).realize()
  assert GlobalCounters.mem_peak - GlobalCounters.mem_used < 4 * S * D * 4
  ref = F.scaled_dot_product_attention(*(torch.tensor(t.numpy()) for t in (q, k, v)), is_causal=True).numpy()
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)

def test_long_sequence_backward_memory():
  """S = 2048, one head (the key range split into chunks for the cores): every buffer of the backward grows with S x D,
  none with the S x S scores; the gradients match torch."""
  S, D = 2048, 64
  q, k, v = _inputs(1, 1, S, S, D, D, seed=11)
  tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
  grads = tq.scaled_dot_product_attention(tk, tv, is_causal=True).sum().gradient(tq, tk, tv)
  items = grads[0].schedule(*grads[1:])
  # the biggest is the kernel's flat output: dk, dv and up to 8 per-chunk dq partials, (2 + 8) x S x D (a third of S x S),
  # the dq partials' queries padded by up to two query tiles (causal tiles start at each key block)
  assert max(b.size for si in items for b in si.bufs) <= (2 * S + 8 * (S + 128)) * D
  rq, rk, rv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
  F.scaled_dot_product_attention(rq, rk, rv, is_causal=True).sum().backward()
  for g, r in zip(grads, (rq, rk, rv)):
    ref = r.grad.numpy()
    np.testing.assert_allclose(g.numpy(), ref, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(ref).max())))

@pytest.mark.parametrize("causal", [False, True])
def test_narrow_vectors(monkeypatch, causal):
  """The plans for 8-float vectors and 16 registers (AVX2: 16-key tiles, 4 query rows x 32-query tiles in the backward)
  on this machine's compiler: forward and gradients against torch across several key tiles and a partial one."""
  from tinycore import Device
  monkeypatch.setattr(Device[Device.DEFAULT].renderer, "attention_vector", (8, 16))
  for B, H, Sq, Sk, D, Dv in ((1, 2, 17, 17, 32, 32), (2, 1, 65, 100, 80, 48), (1, 1, 100, 37, 64, 64)):
    q, k, v = _inputs(B, H, Sq, Sk, D, Dv, seed=12)
    w = np.random.default_rng(13).standard_normal((B, H, Sq, Dv)).astype(np.float32)
    tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
    out = tq.scaled_dot_product_attention(tk, tv, is_causal=causal)
    grads = (out * Tensor(w)).sum().gradient(tq, tk, tv)
    items = grads[0].schedule(*grads[1:])
    assert sorted(si.ast.src[0].arg.prefix for si in items if not si.is_copy and is_fused(si.ast)) == ["attn_", "attn_bwd_"]
    assert any(si.ast.src[0].arg.width == 8 for si in items if not si.is_copy and is_fused(si.ast))
    rq, rk, rv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    ref = F.scaled_dot_product_attention(rq, rk, rv, is_causal=causal)
    (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=2e-6)
    for g, r in zip(grads, (rq, rk, rv)):
      np.testing.assert_allclose(g.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(r.grad.numpy()).max())))
