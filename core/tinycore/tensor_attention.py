"""The fused attention node (codegen/attention.py writes its kernel): built by scaled_dot_product_attention where the
device's renderer declares `attention_vector`, and its gradient.

The node reads q (..., Sq, D), k transposed and packed per key tile, and v, all float32; half inputs are widened on the way in (the copies that
transpose k and pad k/v to whole key tiles do that for free) and the result is cast back, as torch keeps the input
dtype. The backward pass is flash attention's: the probabilities are recomputed from the scores and each row's
log-sum-exp (kept by the forward kernel when an input asked for gradients), never stored by the forward."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, cast
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.tensor_base import tensor_type
from tinycore.codegen.attention import AttentionArg, plan_tiles
from tinycore.codegen.attention_backward import AttentionGradArg, plan_backward, backward_chunks
if TYPE_CHECKING: from tinycore.tensor import Tensor

MAX_HEAD_DIM = 256   # the kernel unrolls the head dims: beyond this the unfused path (matmul kernels) is the better code

def _attention_vector(device) -> tuple[int, int] | None:
  if not isinstance(device, str): return None   # sharded tensors: the multi-device lowering handles the unfused graph
  from tinycore.device import Device
  try: return Device[device].renderer.attention_vector
  except Exception: return None   # a device that doesn't open here fails later, in the user's terms, on the unfused path

def fused_attention(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, scale: float | None = None) -> Tensor | None:
  """softmax(q k^T * scale [causal]) v (scale 1/sqrt(D) by default) as one fused kernel, or None where that kernel doesn't
  apply (the caller then builds the unfused graph, which also gives the shape and dtype errors)."""
  from tinycore.tensor_shapes import broadcast_shape
  if (tc := _tensor_core_attention(q, k, v, is_causal, scale)) is not None: return tc
  if q.device != k.device or q.device != v.device or (vec := _attention_vector(q.device)) is None: return None
  if not all(dtypes.is_float(t.dtype) and t.dtype.itemsize <= 4 and t.ndim >= 2 and all(isinstance(s, int) for s in t.shape) for t in (q, k, v)):
    return None   # float64 keeps its precision and symbolic shapes their generality on the unfused path
  *qb, sq, d = cast(tuple[int, ...], q.shape)
  *kb, sk, dk = cast(tuple[int, ...], k.shape)
  *vb, skv, dv = cast(tuple[int, ...], v.shape)
  if dk != d or skv != sk or min(sq, sk, d, dv) == 0 or max(d, dv) > MAX_HEAD_DIM: return None
  try: batch = tuple(broadcast_shape(tuple(qb), tuple(kb), tuple(vb)))
  except Exception: return None
  rows, keys, width, _ = plan_tiles(d, dv, vec)
  skp = -(-sk // keys) * keys
  nb = len(batch)
  f32 = dtypes.float32
  qf = q.cast(f32).expand(*batch, sq, d)
  kt = k.cast(f32).expand(*batch, sk, d).transpose(-1, -2)
  vp = v.cast(f32).expand(*batch, sk, dv)
  if skp != sk:   # zero keys past the end: masked to -inf scores, so they add nothing
    kt = kt.pad(((0, 0),) * nb + ((0, 0), (0, skp - sk)))
    vp = vp.pad(((0, 0),) * nb + ((0, skp - sk), (0, 0)))
  # kT packed per key tile (..., tiles, D, keys): one tile is contiguous, so a long sequence streams it instead of
  # touching D pages per tile
  kt = kt.reshape(*batch, d, skp // keys, keys).permute(*range(nb), nb + 1, nb, nb + 2)
  grad = any(t.requires_grad for t in (q, k, v))
  arg = AttentionArg(batch + (sq, dv + (1 if grad else 0)), sk, is_causal, 1 / math.sqrt(d) if scale is None else scale, grad, rows, keys, width)
  node = UOp(Ops.CUSTOM, f32, (qf.uop, kt.uop, vp.uop), arg)
  Tensor = tensor_type()
  out = Tensor(node, requires_grad=True if grad else None)
  if grad: out = out.shrink(tuple((0, s) for s in batch) + ((0, sq), (0, dv)))
  return out.cast(q.dtype) if q.dtype != f32 else out

def _tensor_core_attention(q: Tensor, k: Tensor, v: Tensor, is_causal: bool, scale: float | None) -> Tensor | None:
  """The tensor-core flash attention forward (codegen/attention_tc.py) where the renderer declares
  `attention_tensor_cores` and has a tensor core for the inputs' dtype (one 16-bit dtype for q, k and v), head dims are
  64 or 128. When an input asks for gradients the kernel also keeps each row's log-sum-exp (a float32 output with one
  more column) for the backward (tc_attention_grad)."""
  from tinycore.tensor_shapes import broadcast_shape
  from tinycore.codegen.attention_tc import AttentionTCArg, HEAD_DIMS, tensor_core_for, layout_plan, default_blocks
  if not isinstance(q.device, str) or q.device != k.device or q.device != v.device: return None
  if q.dtype not in (dtypes.float16, dtypes.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype: return None
  if any(t.ndim < 2 or not all(isinstance(x, int) for x in t.shape) for t in (q, k, v)): return None
  from tinycore.device import Device
  try: ren = Device[q.device].renderer
  except Exception: return None   # a device that doesn't open here fails later, in the user's terms, on the unfused path
  if not getattr(ren, "attention_tensor_cores", False) or (tc := tensor_core_for(ren, q.dtype)) is None or layout_plan(tc) is None: return None
  *qb, sq, d = cast(tuple[int, ...], q.shape)
  *kb, sk, dk = cast(tuple[int, ...], k.shape)
  *vb, skv, dv = cast(tuple[int, ...], v.shape)
  s = 1 / math.sqrt(d) if scale is None else scale
  if dk != d or skv != sk or d != dv or d not in HEAD_DIMS or min(sq, sk) == 0 or not (math.isfinite(s) and s > 0): return None
  try: batch = tuple(broadcast_shape(tuple(qb), tuple(kb), tuple(vb)))
  except Exception: return None
  qe, ke, ve = q.expand(*batch, sq, d), k.expand(*batch, sk, d), v.expand(*batch, sk, dv)
  grad = any(t.requires_grad for t in (q, k, v))
  arg = AttentionTCArg(batch + (sq, dv + (1 if grad else 0)), is_causal, float(s), grad, *default_blocks(d))
  Tensor = tensor_type()
  if not grad: return Tensor(UOp(Ops.CUSTOM, q.dtype, (qe.uop, ke.uop, ve.uop), arg))
  full = Tensor(UOp(Ops.CUSTOM, dtypes.float32, (qe.uop, ke.uop, ve.uop), arg), requires_grad=True)
  return full.shrink(tuple((0, x) for x in batch) + ((0, sq), (0, dv))).cast(q.dtype)

def tc_attention_grad(ctx: UOp, ret: UOp) -> tuple[UOp, UOp, UOp]:
  """Gradients of the tensor-core forward for (q, k, v), in float32 from the kept log-sum-exp: P = exp(s - lse) (no
  second softmax pass), dv = P^T do, ds = P * (do v^T - rowsum(do * o)), dq = ds k * scale, dk = ds^T q * scale. The
  S x S matrices are ordinary kernels (a tensor-core backward kernel isn't written)."""
  Tensor = tensor_type()
  a = ret.arg
  q, k, v = (Tensor(x).cast(dtypes.float32) for x in ret.src)
  *batch, sq, _ = cast(tuple[int, ...], q.shape)
  sk, dv = cast(tuple[int, ...], v.shape)[-2:]
  keep = tuple((0, x) for x in batch)
  full, g = Tensor(ret), Tensor(ctx)
  o, lse, do = full.shrink(keep + ((0, sq), (0, dv))), full.shrink(keep + ((0, sq), (dv, dv + 1))), g.shrink(keep + ((0, sq), (0, dv)))
  sc = (q @ k.transpose(-1, -2)) * a.scale
  if a.causal: sc = (Tensor.arange(sq, device=q.device).reshape(sq, 1) >= Tensor.arange(sk, device=q.device)).where(sc, -math.inf)
  p = (sc - lse).exp()
  ds = (p * (do @ v.transpose(-1, -2) - (do * o).sum(-1, keepdim=True))).contiguous()
  dq, dk, dv_ = (ds @ k) * a.scale, (ds.transpose(-1, -2) @ q) * a.scale, p.transpose(-1, -2) @ do
  return tuple(x.cast(t.dtype).uop for x, t in zip((dq, dk, dv_), ret.src))

def attention_grad(ctx: UOp, ret: UOp) -> tuple[UOp, UOp, UOp]:
  """Gradients of the fused node for (q, kT, v): P = exp(s - lse) recomputed, dv = P^T do, ds = P * (do v^T - rowsum(do * o)),
  dq = ds k * scale, dkT = q^T ds * scale. With the forward's log-sum-exp kept (an input asked for gradients) and a
  renderer for it, one fused kernel (codegen/attention_backward.py); else, or without a kept log-sum-exp (recomputed
  from the scores), ordinary kernels."""
  if getattr(ret.arg, "prefix", None) == "attn_tc_": return tc_attention_grad(ctx, ret)
  if isinstance(ret.arg, AttentionGradArg):
    raise NotImplementedError("the gradient of fused attention's backward (a second derivative) is not supported; "
                              "build the attention from matmul and softmax for higher-order gradients")
  if ret.arg.with_lse and (vec := _attention_vector(ret.device)) is not None: return _fused_grad(ctx, ret, vec)
  Tensor = tensor_type()
  a: AttentionArg = ret.arg
  q, kp, v = (Tensor(s) for s in ret.src)
  *batch, sq, d = q.shape
  skp, dv = v.shape[-2:]
  nb = len(batch)
  sk = a.sk
  keep = tuple((0, s) for s in batch)
  # the real keys only (the packed tiles' zero padding is the kernel's business): no padded keys to mask here
  kt = kp.permute(*range(nb), nb + 1, nb, nb + 2).reshape(*batch, d, skp).shrink(keep + ((0, d), (0, sk)))
  v = v.shrink(keep + ((0, sk), (0, dv)))
  full, g = Tensor(ret), Tensor(ctx)
  o = full.shrink(keep + ((0, sq), (0, dv))) if a.with_lse else full
  do = g.shrink(keep + ((0, sq), (0, dv))) if a.with_lse else g
  s = (q @ kt) * a.scale
  if a.causal: s = (Tensor.arange(sq, device=q.device).reshape(sq, 1) >= Tensor.arange(sk, device=q.device)).where(s, -math.inf)
  lse = full.shrink(keep + ((0, sq), (dv, dv + 1))) if a.with_lse else s.logsumexp(-1, keepdim=True)
  p = (s - lse).exp()
  pad = ((0, 0),) * nb + ((0, skp - sk), (0, 0))
  dv_ = (p.transpose(-1, -2) @ do).pad(pad)
  # ds is the one S x S buffer: both of its matmuls (with k and with q) read it instead of redoing the exp per output
  ds = (p * (do @ v.transpose(-1, -2) - (do * o).sum(-1, keepdim=True))).contiguous()
  dq = (ds @ kt.transpose(-1, -2)) * a.scale
  dkt = ((q.transpose(-1, -2) @ ds) * a.scale).pad(((0, 0),) * nb + ((0, 0), (0, skp - sk)))
  dkp = dkt.reshape(*batch, d, skp // a.keys, a.keys).permute(*range(nb), nb + 1, nb, nb + 2)
  return dq.uop, dkp.uop, dv_.uop

def _fused_grad(ctx: UOp, ret: UOp, vec: tuple[int, int]) -> tuple[UOp, UOp, UOp]:
  """The fused backward kernel's inputs (queries padded to whole tiles, k also as rows, v also packed transposed per
  key tile as kT is, the base-2 log-sum-exp and rowsum(do * o) side by side) and its flat output cut into dq, dk, dv."""
  Tensor = tensor_type()
  a: AttentionArg = ret.arg
  q, kp, v = (Tensor(s) for s in ret.src)
  *batch, sq, d = cast(tuple[int, ...], q.shape)   # the fused node is only built for static shapes
  skp, dv = cast(tuple[int, ...], v.shape)[-2:]
  nb, bh = len(batch), math.prod(batch)
  rows, queries = plan_backward(vec, sq, skp, a.keys, a.causal)
  # causal query tiles start at each key block's first key: one more tile of padding for the last one
  sqp = -(-sq // queries) * queries + (queries if a.causal else 0)
  chunks = backward_chunks(bh, skp, a.keys)
  keep = tuple((0, s) for s in batch)
  full, g = Tensor(ret), Tensor(ctx)
  o, do = full.shrink(keep + ((0, sq), (0, dv))), g.shrink(keep + ((0, sq), (0, dv)))
  lse2 = full.shrink(keep + ((0, sq), (dv, dv + 1))) * (1 / math.log(2))
  delta = (do * o).sum(-1, keepdim=True)
  padq = ((0, 0),) * nb + ((0, sqp - sq), (0, 0))
  stats = lse2.cat(delta, dim=-1).pad(padq).transpose(-1, -2)   # (..., 2, Sqp)
  k = kp.permute(*range(nb), nb + 1, nb, nb + 2).reshape(*batch, d, skp).transpose(-1, -2)
  vt = v.reshape(*batch, skp // a.keys, a.keys, dv).permute(*range(nb), nb, nb + 2, nb + 1)   # packed as kT
  arg = AttentionGradArg((bh * skp * (d + dv) + chunks * bh * sqp * d,), sq, a.sk, a.causal, a.scale, chunks, rows, queries,
                         a.keys, a.width)
  srcs = tuple(x.contiguous().uop for x in (q.pad(padq), k, kp, vt, do.pad(padq), stats))
  out = Tensor(UOp(Ops.CUSTOM, dtypes.float32, srcs, arg))
  n_dk, n_dv = bh * skp * d, bh * skp * dv
  dk = out[:n_dk].reshape(*batch, skp, d)
  dv_ = out[n_dk:n_dk + n_dv].reshape(*batch, skp, dv)
  dq = out[n_dk + n_dv:].reshape(chunks, *batch, sqp, d)
  dq = (dq.sum(0) if chunks > 1 else dq.reshape(*batch, sqp, d)).shrink(keep + ((0, sq), (0, d)))   # scale is in dS'
  dkp = dk.transpose(-1, -2).reshape(*batch, d, skp // a.keys, a.keys).permute(*range(nb), nb + 1, nb, nb + 2)
  return dq.uop, dkp.uop, dv_.uop
