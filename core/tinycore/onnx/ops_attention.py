"""Attention (opset 23+): scaled dot-product attention over 3D (heads packed in the hidden dim) or 4D inputs, with a KV
cache (past_key/past_value -> present_*), grouped-query heads, boolean or additive masks, causal and sliding-window
masks aligned bottom-right, softcap, and the optional qk output. A row whose every key is masked outputs 0, as ONNX
specifies (not the NaN a plain softmax of all -inf gives)."""
from __future__ import annotations
import math
from tinycore.dtype import dtypes
from tinycore.onnx.registry import op, UnsupportedOpError
from tinycore.onnx.context import onnx_dtype

NEG_INF = float("-inf")

def _heads(x, n_heads, what: str):
  """(B, S, H*d) -> (B, H, S, d)."""
  if n_heads is None: raise ValueError(f"Attention with 3D inputs needs q_num_heads and kv_num_heads ({what})")
  b, s, hidden = x.shape
  if hidden % n_heads: raise ValueError(f"Attention: {what} hidden size {hidden} is not a multiple of {n_heads} heads")
  return x.reshape(b, s, n_heads, hidden // n_heads).permute(0, 2, 1, 3)

def _opt(ins, i): return ins[i] if len(ins) > i and ins[i] is not None else None

def _index_grid(q_len: int, kv_len: int, offset, device):
  """i + offset - j for query i and key j: the distance of key j behind query i's absolute position."""
  from tinycore.tensor import Tensor
  i = Tensor.arange(q_len, device=device, dtype=dtypes.int32).reshape(q_len, 1)
  j = Tensor.arange(kv_len, device=device, dtype=dtypes.int32).reshape(1, kv_len)
  return (i - j) + offset

@op("Attention", since=23)
def attention(ctx, ins, attrs):
  q, k, v = (ctx.tensor(x) for x in ins[:3])
  mask, past_k, past_v = (ctx.tensor(_opt(ins, i)) for i in (3, 4, 5))
  nonpad = _opt(ins, 6)
  if (past_k is None) != (past_v is None): raise ValueError("Attention: past_key and past_value come together")
  if nonpad is not None and past_k is not None: raise ValueError("Attention: nonpad_kv_seqlen can't be combined with a past cache")
  three_d = q.ndim == 3
  if three_d:
    q = _heads(q, attrs.get("q_num_heads"), "Q")
    k, v = _heads(k, attrs.get("kv_num_heads"), "K"), _heads(v, attrs.get("kv_num_heads"), "V")
  elif q.ndim != 4: raise ValueError(f"Attention: Q must be 3D or 4D, got shape {q.shape}")
  batch, hq, q_len, head = q.shape
  scale = attrs.get("scale", 1.0 / math.sqrt(head))
  if past_k is not None: k, v = past_k.cat(k, dim=2), past_v.cat(v, dim=2)
  present_k, present_v = k, v
  kv_len = k.shape[2]
  # the additive bias (q_len, kv_len) or broadcastable to (batch, heads, q_len, kv_len); None while nothing is masked
  bias = None
  if mask is not None:
    if mask.shape[-1] < kv_len:   # a mask over the new keys only: the rest of the cache is masked off
      pad = ((0, 0),) * (mask.ndim - 1) + ((0, kv_len - mask.shape[-1]),)
      mask = mask.pad(pad, value=False if mask.dtype == dtypes.bool else NEG_INF)
    bias = mask.where(0.0, NEG_INF).cast(q.dtype) if mask.dtype == dtypes.bool else mask.cast(q.dtype)
  # where the diagonal sits: after the past cache, or per batch at nonpad_kv_seqlen - q_len
  offset = past_k.shape[2] if past_k is not None else 0
  if nonpad is not None: offset = (ctx.tensor(nonpad).cast(dtypes.int32) - q_len).reshape(batch, 1, 1, 1)
  allowed = None
  if attrs.get("is_causal", 0): allowed = _index_grid(q_len, kv_len, offset, q.device) >= 0
  left, right = attrs.get("left_window_size", -1), attrs.get("right_window_size", -1)
  if left >= 0 or right >= 0:
    dist = _index_grid(q_len, kv_len, offset, q.device)
    win = None
    if left >= 0: win = dist <= left
    if right >= 0: win = (-dist <= right) if win is None else win & (-dist <= right)
    allowed = win if allowed is None else allowed & win
  if allowed is not None:
    extra = allowed.where(0.0, NEG_INF).cast(q.dtype)
    bias = extra if bias is None else bias + extra
  if nonpad is not None:
    from tinycore.tensor import Tensor
    keys = Tensor.arange(kv_len, device=q.device, dtype=dtypes.int32).reshape(1, 1, 1, kv_len)
    pad_bias = (keys < ctx.tensor(nonpad).cast(dtypes.int32).reshape(batch, 1, 1, 1)).where(0.0, NEG_INF).cast(q.dtype)
    bias = pad_bias if bias is None else bias + pad_bias
  hkv = k.shape[1]
  if hq != hkv:   # grouped-query attention: each kv head serves hq/hkv consecutive query heads
    if hq % hkv: raise ValueError(f"Attention: {hq} query heads can't share {hkv} kv heads")
    r = hq // hkv
    k = k.reshape(batch, hkv, 1, kv_len, k.shape[3]).expand(batch, hkv, r, kv_len, k.shape[3]).reshape(batch, hq, kv_len, k.shape[3])
    v = v.reshape(batch, hkv, 1, kv_len, v.shape[3]).expand(batch, hkv, r, kv_len, v.shape[3]).reshape(batch, hq, kv_len, v.shape[3])
  s = math.sqrt(scale)   # both operands scaled by sqrt(scale), as the reference does (the same rounding in float16)
  qk = (q * s) @ (k * s).permute(0, 1, 3, 2)
  softcap = attrs.get("softcap", 0.0)
  if softcap > 0: qk = (qk / softcap).tanh() * softcap
  scores = qk if bias is None else qk + bias
  mode = attrs.get("qk_matmul_output_mode", 0)
  qk_out = scores if mode == 2 else qk
  if "softmax_precision" in attrs: scores = scores.cast(onnx_dtype(attrs["softmax_precision"], "softmax_precision"))
  # softmax that leaves a fully masked row at 0 instead of 0/0
  top = scores.max(axis=-1, keepdim=True)
  masked_row = top == NEG_INF
  e = (scores - masked_row.where(0.0, top)).exp()
  total = e.sum(axis=-1, keepdim=True)
  probs = e / (total == 0).where(1.0, total)
  if bias is not None: probs = (bias.max(axis=-1, keepdim=True) == NEG_INF).where(0.0, probs)
  if mode == 3: qk_out = probs
  elif mode not in (0, 1, 2): raise UnsupportedOpError(f"Attention qk_matmul_output_mode={mode}")
  y = probs.cast(q.dtype) @ v
  if three_d: y = y.permute(0, 2, 1, 3).reshape(batch, q_len, hq * v.shape[3])
  return (y, present_k, present_v, qk_out.cast(q.dtype))[:max(ctx.n_outputs, 1)]
