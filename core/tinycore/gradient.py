"""Autograd as a graph rewrite: walk the forward UOp graph backwards, and let a PatternMatcher of per-op rules turn
(node, grad of node) into the grads of its sources. The result is more lazy UOps, scheduled like any other graph."""
from __future__ import annotations
import math, weakref
from typing import Any, Callable
from tinycore.uop import UOp, Ops
from tinycore.rewrite import UPat, PatternMatcher
from tinycore.dtype import dtypes
from tinycore.helpers import argsort

def _zero(u: UOp) -> UOp: return u.const_like(0)

def _sum_to(g: UOp, axes: tuple[int, ...]) -> UOp:
  """Keepdim sum over `axes`, accumulating half types in float32 so expand-heavy graphs don't lose precision."""
  if not axes: return g
  if g.dtype in (dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2):
    return g.cast(dtypes.float32).r(Ops.ADD, axes).cast(g.dtype)
  return g.r(Ops.ADD, axes)

def _max_split(ctx: UOp, x: UOp, y: UOp) -> UOp:
  # d max(x,y)/dx: 1 where x wins, 1/2 on ties (what torch does for maximum), 0 where y wins
  return y.lt(x).where(ctx, x.eq(y).where(ctx * 0.5, _zero(ctx)))

def _reduce_max_grad(ctx: UOp, ret: UOp, x: UOp) -> UOp:
  # the grad goes to every position that attains the max, split evenly between ties
  mask = x.eq(ret.expand(x.shape)).cast(ctx.dtype)
  cnt = mask.r(Ops.ADD, ret.arg[1])
  return mask * (ctx / cnt).expand(x.shape)

def _reduce_prod_grad(ctx: UOp, ret: UOp, x: UOp) -> UOp:
  # prod/x is wrong where x == 0: with one zero there, its grad is the product of the others; with two or more, all 0
  axes = ret.arg[1]
  is0 = x.eq(0)
  nz_prod = is0.where(x.const_like(1), x).r(Ops.MUL, axes).expand(x.shape)
  n0 = is0.cast(dtypes.int32).r(Ops.ADD, axes).expand(x.shape)
  g = n0.eq(0).where(ret.expand(x.shape) / is0.where(x.const_like(1), x), (n0.eq(1) & is0).where(nz_prod, _zero(x)))
  return ctx.expand(x.shape) * g

def _expand_grad(ctx: UOp, ret: UOp, x: UOp) -> UOp:
  return _sum_to(ctx, tuple(i for i, (a, b) in enumerate(zip(x.shape, ret.shape)) if a != b)).reshape(x.shape)

def _is_zero(u: UOp) -> bool:
  while u.op in (Ops.RESHAPE, Ops.EXPAND): u = u.src[0]
  return u.op is Ops.CONST and u.arg == 0

def _where_grad(ctx: UOp, ret: UOp, c: UOp, a: UOp, b: UOp) -> tuple:
  # relu, where(x <= 0, 0, x) or where(x > 0, x, 0): the condition holds for the result exactly where it holds for x
  # (0 <= 0, and NaN passes through as NaN), so the mask is read off the result, as torch's threshold_backward does. The
  # pre-activation then needn't be kept for backward, and bias + relu can stay the epilogue of the matmul before them
  x = None
  if _is_zero(a) and c.op is Ops.OR and {s.op for s in c.src} == {Ops.CMPLT, Ops.CMPEQ} and \
     all(s.src[0] is b and _is_zero(s.src[1]) for s in c.src): x = b                            # x <= 0 -> 0
  elif _is_zero(b) and c.op is Ops.CMPLT and _is_zero(c.src[0]) and c.src[1] is a: x = a     # 0 < x -> x
  if x is not None and x.op is not Ops.CONST: c = c.substitute({x: ret})
  return (None, c.where(ctx, 0), c.where(0, ctx))

def _cast_grad(ctx: UOp, x: UOp):
  return (ctx.cast(x.dtype),) if dtypes.is_float(x.dtype) else (None,)

def _pow_grad(ctx: UOp, ret: UOp, x: UOp, y: UOp):
  # torch's conventions: d/dx = y*x^(y-1), but 0 where y == 0 (x**0 is constant, even at x = 0 or inf);
  # d/dy = x^y*ln(x), but 0 where x == 0 and y >= 0
  dx = y.eq(0).where(_zero(ctx), ctx * y * UOp(Ops.POW, x.dtype, (x, y - 1)))
  dy = (x.eq(0) & y.lt(0).ne(True)).where(_zero(ctx), ctx * ret * UOp(Ops.LOG2, x.dtype, (x,)) * math.log(2))
  return (dx, dy)

def _multi_grad(ctx: UOp, ret: UOp) -> tuple[UOp | None, ...]:
  # shard i's grad is device i's part of the logical grad; replicas are copies of one value, whose grad goes to the first
  axis = ret.arg[0]
  return tuple(UOp(Ops.MSELECT, ctx.dtype, (ctx,), (i, axis)) if axis is not None or i == 0 else None for i in range(len(ret.src)))

def _mselect_grad(ctx: UOp, ret: UOp, x: UOp) -> tuple[UOp]:
  # the grad of the whole value: ctx where device i's part sits, zeros on the other devices' parts
  i, axis = ret.arg
  devices = x.device
  if axis is None: return (UOp(Ops.COPY, ctx.dtype, (ctx,), devices),)
  shards = [ctx if j == i else UOp(Ops.MSELECT, x.dtype, (x,), (j, axis)).const_like(0) for j in range(len(devices))]
  return (UOp(Ops.MULTI, ctx.dtype, tuple(shards), (axis, devices)),)

def _custom_grad(ctx: UOp, ret: UOp):
  if hasattr(ret.arg, "out_shape"):   # fused attention (tensor_attention.py)
    from tinycore.tensor_attention import attention_grad
    return attention_grad(ctx, ret)
  return None

_nograd = (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.BITCAST,
           Ops.THREEFRY, Ops.DETACH)

pm_gradient = PatternMatcher([
  (UPat(_nograd, name="ret"), lambda ctx, ret: (None,) * len(ret.src)),
  (UPat(Ops.CAST, src=(UPat.var("x"),)), _cast_grad),
  (UPat(Ops.RECIP, name="ret"), lambda ctx, ret: (-ctx * ret * ret,)),
  (UPat(Ops.SIN, src=(UPat.var("x"),)), lambda ctx, x: (ctx * (x.const_like(math.pi / 2) - x).alu(Ops.SIN),)),
  (UPat(Ops.LOG2, src=(UPat.var("x"),)), lambda ctx, x: (ctx / (x * math.log(2)),)),
  (UPat(Ops.EXP2, name="ret"), lambda ctx, ret: (ctx * ret * math.log(2),)),
  (UPat(Ops.SQRT, name="ret"), lambda ctx, ret: (ctx / (ret * 2),)),
  (UPat(Ops.NEG), lambda ctx: (-ctx,)),
  (UPat(Ops.TRUNC), lambda ctx: (_zero(ctx),)),
  (UPat(Ops.ADD), lambda ctx: (ctx, ctx)),
  (UPat(Ops.SUB), lambda ctx: (ctx, -ctx)),
  (UPat(Ops.MUL, src=(UPat.var("x"), UPat.var("y"))), lambda ctx, x, y: (y * ctx, x * ctx)),
  (UPat(Ops.FDIV, src=(UPat.var("x"), UPat.var("y"))), lambda ctx, x, y: (ctx / y, -ctx * x / (y * y))),
  (UPat(Ops.MAX, src=(UPat.var("x"), UPat.var("y"))), lambda ctx, x, y: (_max_split(ctx, x, y), _max_split(ctx, y, x))),
  (UPat(Ops.POW, src=(UPat.var("x"), UPat.var("y")), name="ret"), _pow_grad),
  (UPat(Ops.MULACC, src=(UPat.var("a"), UPat.var("b"), UPat.var("c"))), lambda ctx, a, b, c: (b * ctx, a * ctx, ctx)),
  (UPat(Ops.WHERE, src=(UPat.var("c"), UPat.var("a"), UPat.var("b")), name="ret"), _where_grad),
  (UPat(Ops.REDUCE_AXIS, src=(UPat.var("x"),), name="ret"), lambda ctx, ret, x:
    (ctx.expand(x.shape),) if ret.arg[0] is Ops.ADD else (_reduce_max_grad(ctx, ret, x),) if ret.arg[0] is Ops.MAX
    else (_reduce_prod_grad(ctx, ret, x),) if ret.arg[0] is Ops.MUL else None),
  (UPat(Ops.RESHAPE, src=(UPat.var("x"),)), lambda ctx, x: (ctx.reshape(x.shape),)),
  (UPat(Ops.PERMUTE, name="ret"), lambda ctx, ret: (ctx.permute(tuple(argsort(ret.arg))),)),
  (UPat(Ops.EXPAND, src=(UPat.var("x"),), name="ret"), lambda ctx, ret, x: (_expand_grad(ctx, ret, x),)),
  (UPat(Ops.PAD, src=(UPat.var("x"),), name="ret"), lambda ctx, ret, x: (ctx.shrink(tuple((b, b + s) for (b, _), s in zip(ret.arg, x.shape))),)),
  (UPat(Ops.SHRINK, src=(UPat.var("x"),), name="ret"), lambda ctx, ret, x: (ctx.pad(tuple((b, s - e) for (b, e), s in zip(ret.arg, x.shape))),)),
  (UPat(Ops.FLIP, name="ret"), lambda ctx, ret: (ctx.flip(ret.arg),)),
  (UPat(Ops.CONTIGUOUS), lambda ctx: (ctx,)),
  (UPat(Ops.COPY, src=(UPat.var("x"),)), lambda ctx, x: (UOp(Ops.COPY, ctx.dtype, (ctx,), x.device),)),
  (UPat(Ops.MULTI, name="ret"), _multi_grad),
  (UPat(Ops.MSELECT, src=(UPat.var("x"),), name="ret"), _mselect_grad),
  # x.assign(v): the result is v's value, the old contents of x don't reach it
  (UPat(Ops.ASSIGN), lambda ctx: (None, ctx)),
  (UPat(Ops.CUSTOM, name="ret"), _custom_grad),
])

# Nodes whose gradient the frontend op that made them computes itself: node -> (sources, fn(ctx, wanted) -> one grad or None
# per source). A convolution registers its backward as two convolutions: autograd through its sliding-window view makes
# kernels 10-50x slower. Weak keys: an entry lives as long as some graph holds the node; hash-consing gives a rebuilt
# identical graph the same node, whose gradient is the same function.
_custom: weakref.WeakKeyDictionary[UOp, tuple[tuple[UOp, ...], Callable]] = weakref.WeakKeyDictionary()

def custom_gradient(node: UOp, sources: tuple[UOp, ...], fn: Callable) -> None:
  """Backward through `node` calls fn(ctx, wanted) instead of walking its graph: `sources` must be ancestors of `node`,
  `wanted[i]` says whether sources[i] needs a gradient, and fn returns a UOp of sources[i]'s shape (or None) for each."""
  _custom[node] = (sources, fn)

def _on_path(root: UOp, targets: set[UOp]) -> dict[UOp, bool]:
  """Which nodes have a target among their ancestors (DETACH cuts the path): only those need a gradient."""
  path: dict[UOp, bool] = {}
  for u in root.toposort():
    path[u] = u in targets or (u.op is not Ops.DETACH and any(path[s] for s in u.src))
  return path

def compute_gradient(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
  """Gradients of `root` (seeded with `root_grad`) with respect to each target reachable from it."""
  path = _on_path(root, targets)
  grads: dict[UOp, UOp] = {root: root_grad}
  for u in reversed(root.toposort()):
    if (g := grads.get(u)) is None or not path[u] or not u.src: continue
    if u in targets and not any(path[s] for s in u.src): continue  # a leaf target: nothing beneath needs a grad
    srcs: tuple[UOp, ...] = u.src
    lgrads: Any
    if (custom := _custom.get(u)) is not None:
      srcs, fn = custom
      lgrads = fn(g, tuple(path.get(s, False) for s in srcs))
    else: lgrads = pm_gradient.rewrite(u, ctx=g)
    if lgrads is None: raise RuntimeError(f"no gradient rule for {u.op.name} ({u.dtype}, shape {u.shape})")
    if len(lgrads) != len(srcs): raise RuntimeError(f"gradient rule for {u.op.name} gave {len(lgrads)} grads for {len(srcs)} sources")
    for s, sg in zip(srcs, lgrads):
      if sg is None or not path[s]: continue
      if sg.shape != s.shape: raise RuntimeError(f"gradient rule for {u.op.name} gave shape {sg.shape} for a source of shape {s.shape}")
      grads[s] = sg if s not in grads else grads[s] + sg
  return {t: grads[t] for t in targets if t in grads}
