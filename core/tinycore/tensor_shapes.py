"""Shape arguments checked in the user's terms before they reach the graph: shape validation, broadcasting, and symbolic sizes
at their bound values (for error messages that name the bindings)."""
from __future__ import annotations
import operator
from tinycore.uop import UOp, Ops
from tinycore.tensor_errors import ShapeEntryError

def bound_value(x) -> int | None:
  """The int a size has with its Variables at their bound values (None while one is unbound)."""
  if not isinstance(x, UOp): return x
  binds = [u for u in x.toposort() if u.op is Ops.BIND]
  r = x.substitute({b: b.src[1] for b in binds}).ssimplify()
  return r if isinstance(r, int) else None
def bindings_text(*xs) -> str:
  names = {f"{u.src[0].arg[0]}={u.src[1].arg}" for x in xs if isinstance(x, UOp) for u in x.toposort() if u.op is Ops.BIND}
  return ", ".join(sorted(names)) or "no bound variables"
def render_arg(x) -> str:
  if isinstance(x, UOp): return x.render()
  if isinstance(x, tuple): return "(" + ", ".join(render_arg(y) for y in x) + ("," if len(x) == 1 else "") + ")"
  return repr(x)

def shape_arg(shape, infer: bool = False) -> tuple:
  """A shape checked here, in the user's terms, before it reaches codegen: ints (numpy ints too) or symbolic sizes, none
  negative; `infer` lets reshape/expand use -1 for "the size that fits"."""
  if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = tuple(shape[0])
  out = []
  for s in shape:
    if isinstance(s, UOp):
      if s.vmin < 0: raise ValueError(f"symbolic dimension {s.render()} can be negative (down to {s.vmin}) in shape {tuple(shape)}")
      out.append(s); continue
    if isinstance(s, bool) or not hasattr(s, "__index__"): raise ShapeEntryError(f"shape entries must be ints, got {s!r} in {tuple(shape)}")
    s = operator.index(s)
    if s < 0 and not (infer and s == -1): raise ValueError(f"negative dimension {s} in shape {tuple(shape)}")
    out.append(s)
  return tuple(out)

def broadcast_shape(*shapes) -> tuple:
  n = max(len(s) for s in shapes)
  padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
  out = []
  for dims in zip(*padded):
    nz = {d for d in dims if not (isinstance(d, int) and d == 1)}
    if len(nz) > 1: raise ValueError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} can't be broadcast together")
    out.append(nz.pop() if nz else 1)
  return tuple(out)
