"""The hand-written attention formula, softmax(q @ k^T * scale [causal mask]) @ v, recognized in a lazy graph about to be
realized and sent to the fused attention kernel (tensor_attention.py) where the device's renderer declares
`attention_vector`, as scaled_dot_product_attention would be.

The graph is read in the shapes tinycore's own ops build: a matmul is sum(-1) over x.unsqueeze(-2) * w^T.unsqueeze(-3)
(tensor_linalg.dot), a softmax is exp2((x - max) * log2 e) / sum (tensor_activation.softmax). The mask is causal when
it is `where(mask, scores, -inf)` or `scores + mask` with a mask that reads no buffer (Tensor.ones(..).tril(), an
arange comparison, ...) and evaluates to torch's is_causal pattern (key j visible to query i iff j <= i); any other
mask, scale or shape leaves the graph as it is. Only the realized result is replaced: a gradient built from the
unfused graph before realizing keeps its own (unfused) form."""
from __future__ import annotations
import math
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.rewrite import PatternMatcher, UPat, graph_rewrite

MAX_MASK_ELEMENTS = 1 << 24   # a mask is evaluated on the host to check it is causal: bounded work

def _const(u: UOp) -> float | None:
  """The value of a constant broadcast to a shape (or the reciprocal of one: x / c), else None."""
  recip = u.op is Ops.RECIP
  if recip: u = u.src[0]
  while u.op in (Ops.EXPAND, Ops.RESHAPE): u = u.src[0]
  if u.op is not Ops.CONST or not isinstance(u.arg, (int, float)): return None
  return (1 / u.arg if u.arg else math.inf) if recip else float(u.arg)

def _last_axis(red: UOp, op: Ops) -> bool:
  return red.op is Ops.REDUCE_AXIS and red.arg == (op, (len(red.shape) - 1,))

def _matmul(u: UOp) -> tuple[UOp, UOp] | None:
  """(a, bT) for u = a @ b: a (..., M, K) and bT (..., N, K) as dot() built them, else None."""
  if u.op is not Ops.RESHAPE or u.dtype != dtypes.float32 or len(u.shape) < 2: return None
  red = u.src[0]
  if not _last_axis(red, Ops.ADD) or red.shape[:-1] != u.shape or red.src[0].op is not Ops.MUL: return None
  # each operand reshaped to gain its unit axis, then expanded (no expand where that axis is 1 anyway: M or N = 1)
  x, y = (s.src[0] if s.op is Ops.EXPAND else s for s in red.src[0].src)
  if x.op is not Ops.RESHAPE or y.op is not Ops.RESHAPE: return None
  a, bt = x.src[0], y.src[0]
  *_, M, N, K = red.src[0].shape
  if len(a.shape) < 2 or len(bt.shape) < 2 or a.shape[-2:] != (M, K) or bt.shape[-2:] != (N, K): return None
  if x.shape[-3:] != (M, 1, K) or y.shape[-3:] != (1, N, K): return None
  return a, bt

def _softmax_input(u: UOp) -> UOp | None:
  """x for u = softmax(x, -1) as softmax() built it, else None."""
  if u.op is not Ops.MUL or len(u.shape) < 2: return None
  e, r = u.src
  if e.op is not Ops.EXP2 or r.op is not Ops.RECIP or r.src[0].op is not Ops.EXPAND: return None
  total = r.src[0].src[0]
  if not _last_axis(total, Ops.ADD) or total.src[0] is not e: return None
  t = e.src[0]
  if t.op is not Ops.MUL or (c := _const(t.src[1])) is None or abs(c - 1 / math.log(2)) > 1e-6: return None
  sub = t.src[0]
  if sub.op is not Ops.ADD or sub.src[1].op is not Ops.NEG: return None
  x, m = sub.src[0], sub.src[1].src[0]
  while m.op in (Ops.EXPAND, Ops.DETACH): m = m.src[0]
  return x if _last_axis(m, Ops.MAX) and m.src[0] is x else None

def _is_causal(mask: UOp, sq: int, sk: int, keep) -> bool:
  """Whether `mask` (reading no buffer) keeps exactly the keys j <= i of each query i: `keep` maps its values to bools,
  or to None where a value is neither keep nor hide."""
  while mask.op in (Ops.EXPAND, Ops.RESHAPE) and len(mask.src[0].shape) >= 2 and mask.src[0].shape[-2:] == (sq, sk): mask = mask.src[0]
  if len(mask.shape) < 2 or mask.shape[-2:] != (sq, sk) or any(s != 1 for s in mask.shape[:-2]) or sq * sk > MAX_MASK_ELEMENTS: return False
  if any(n.op in (Ops.BUFFER, Ops.DEFINE_VAR, Ops.BIND) for n in mask.toposort()): return False
  import numpy as np
  from tinycore.engine.reference import evaluate
  try: vals = np.asarray(evaluate(mask)).reshape(sq, sk)
  except Exception: return False   # an op the reference evaluator lacks: not recognized, the graph stays unfused
  kept = keep(vals)
  return kept is not None and bool(np.array_equal(kept, np.tril(np.ones((sq, sk), dtype=bool))))

def _additive(v):
  """An additive mask: 0 keeps a key, -inf hides it (a finite negative would leave the key a tiny weight: not causal)."""
  import numpy as np
  return v == 0 if np.all((v == 0) | (v == -np.inf)) else None

def _scores(x: UOp) -> tuple[UOp, UOp, float, bool] | None:
  """(q, k, scale, causal) for x = q @ k^T * scale [masked causally], else None."""
  causal = False
  sq, sk = x.shape[-2:]
  if x.op is Ops.WHERE and -math.inf in (_const(x.src[1]), _const(x.src[2])):
    # where(keep, scores, -inf), or masked_fill's where(hide, -inf, scores)
    hide = _const(x.src[1]) == -math.inf
    if x.src[0].dtype != dtypes.bool or not _is_causal(x.src[0], sq, sk, (lambda v: ~v) if hide else (lambda v: v)): return None
    x, causal = x.src[2 if hide else 1], True
  elif x.op is Ops.ADD:
    for s, mask in (x.src, x.src[::-1]):
      if _is_causal(mask, sq, sk, _additive):
        x, causal = s, True
        break
    else: return None
  scale = 1.0
  if x.op is Ops.MUL:
    c = [_const(s) for s in x.src]
    if c[1] is not None: x, scale = x.src[0], c[1]
    elif c[0] is not None: x, scale = x.src[1], c[0]
  if not math.isfinite(scale) or (mm := _matmul(x)) is None: return None
  return mm[0], mm[1], scale, causal

def _fuse(root: UOp) -> UOp | None:
  # symbolic sizes (a KV cache over a bound Variable) stay on the ordinary kernels: the fused one is sized by numbers,
  # and the form checks compare sizes as numbers (a TypeError on a symbolic one means: not a form we fuse)
  try: return _fuse_sized(root)
  except TypeError: return None

def _fuse_sized(root: UOp) -> UOp | None:
  if (wv := _matmul(root)) is None or (x := _softmax_input(wv[0])) is None or (sc := _scores(x)) is None: return None
  from tinycore.tensor_base import tensor_type
  from tinycore.tensor_attention import fused_attention
  Tensor = tensor_type()
  q, k, scale, causal = sc
  v = Tensor(wv[1]).transpose(-1, -2)
  out = fused_attention(Tensor(q), Tensor(k), v, causal, scale)
  return None if out is None or out.shape != root.shape or out.dtype != root.dtype else out.uop

_pm = PatternMatcher([(UPat(Ops.RESHAPE, src=(UPat(Ops.REDUCE_AXIS),), name="root"), _fuse)])

def fuse_attention_formula(u: UOp) -> UOp:
  """`u` with each hand-written attention in it replaced by the fused kernel, where u's device has one."""
  from tinycore.tensor_attention import _attention_vector
  if not isinstance(u.device, str) or _attention_vector(u.device) is None: return u
  return graph_rewrite(u, _pm)
