"""How a reduction's input reads memory, from its views alone: every buffer the input reaches through elementwise ops
and movement ops (reshape, permute, expand, shrink, pad, flip) gets its element stride along each axis of the input.

The scheduler asks this of reductions (is it a matrix-vector product, which axis is the weight contiguous along) while
it walks graphs of tens of thousands of nodes (ONNX models). Lowering the input's index math to read the strides walked
the reduction's whole upstream graph, once per reduction: quadratic in the graph, and the ONNX lane went from 39 s to
over 600 s. Here the walk stays in the part of the graph that fuses into the reduction's kernel (it stops at buffers,
other reductions and nodes that are realized anyway), gives up after MAX_NODES nodes, and its answer is cached per
input node. A view whose strides can't be written per axis (a reshape that merges axes which aren't laid out one after
the other in memory, symbolic sizes) gets strides None: callers then don't treat it as a streamed operand."""
from __future__ import annotations
import weakref
from dataclasses import dataclass
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.helpers import prod, all_int

MAX_NODES = 64   # a matrix-vector product's input is a handful of nodes; a longer fused chain isn't one
# nodes that become buffers of their own before the reduction reads them: read as contiguous arrays of their shape
_REALIZED = (Ops.CONTIGUOUS, Ops.COPY, Ops.ASSIGN)

@dataclass(frozen=True)
class Read:
  node: UOp                         # the BUFFER (or the realized node) read
  size: int                         # its elements
  strides: tuple[int, ...] | None   # elements per step along each axis of the reduction's input; 0 = broadcast

@dataclass(frozen=True)
class Reads:
  reads: tuple[Read, ...]
  ops: frozenset                    # the elementwise ops on the way (a product has a MUL)
  nested_reduce: bool               # another reduction feeds this one (a variance, a softmax)

def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
  out, acc = [], 1
  for s in reversed(shape):
    out.append(acc)
    acc *= s
  return tuple(reversed(out))

def _reshape(shape: tuple[int, ...], strides: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...] | None:
  """Strides of `new` over the same memory as (shape, strides), or None where it would need a copy. Axes of size 1 are
  dropped first; then each group of old axes that multiplies to a group of new axes must be laid out one after the
  other in memory, and the new group splits it row-major."""
  if 0 in shape or 0 in new: return None
  old = [(s, st) for s, st in zip(shape, strides) if s != 1]
  dims = [s for s in new if s != 1]
  got: list[int] = []
  i = j = 0
  while i < len(old) and j < len(dims):
    i2, j2, po, pn = i + 1, j + 1, old[i][0], dims[j]
    while po != pn:
      if po < pn:
        if i2 == len(old): return None
        po *= old[i2][0]
        i2 += 1
      else:
        if j2 == len(dims): return None
        pn *= dims[j2]
        j2 += 1
    if any(old[a][1] != old[a + 1][0] * old[a + 1][1] for a in range(i, i2 - 1)): return None
    st = old[i2 - 1][1]
    group = []
    for d in reversed(dims[j:j2]):
      group.append(st)
      st *= d
    got.extend(reversed(group))
    i, j = i2, j2
  if i != len(old) or j != len(dims): return None
  it = iter(got)
  return tuple(0 if s == 1 else next(it) for s in new)

def _apply(view: UOp, shape: tuple, strides: tuple[int, ...]) -> tuple[int, ...] | None:
  """Strides after one movement op `view` applied to an operand of (shape, strides)."""
  if not all_int(view.shape): return None
  if view.op is Ops.RESHAPE: return _reshape(shape, strides, view.shape)
  if view.op is Ops.PERMUTE: return tuple(strides[i] for i in view.arg)
  if view.op is Ops.EXPAND: return tuple(0 if s != n else st for s, n, st in zip(shape, view.shape, strides))
  if view.op is Ops.FLIP: return tuple(-st if f else st for f, st in zip(view.arg, strides))
  return strides   # SHRINK and PAD move the start or gate the edges: the step along each axis stays

def _strides_through(node: UOp, shape: tuple, views: tuple[UOp, ...]) -> tuple[int, ...] | None:
  if not all_int(shape): return None
  strides: tuple[int, ...] | None = _contiguous(shape)
  for v in reversed(views):   # `views` runs from the reduction's input down: apply them from the buffer up
    if strides is None: return None
    strides, shape = _apply(v, shape, strides), v.shape
  return strides

_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

def operand_reads(src: UOp) -> Reads | None:
  """The buffers a reduction's input `src` reads with their strides per axis of `src`; None when the input isn't a
  short fused chain (more than MAX_NODES nodes on the way) or has symbolic sizes."""
  if not all_int(src.shape): return None
  try: return _cache[src]
  except KeyError: pass
  res = _walk(src)
  _cache[src] = res
  return res

def _walk(src: UOp) -> Reads | None:
  reads: dict[tuple, Read] = {}
  ops: set = set()
  nested = False
  seen: set = set()
  stack: list[tuple[UOp, tuple[UOp, ...]]] = [(src, ())]
  while stack:
    n, views = stack.pop()
    if (n, views) in seen: continue
    seen.add((n, views))
    if len(seen) > MAX_NODES: return None
    if n.op in GroupOp.Movement: stack.append((n.src[0], views + (n,)))
    elif n.op is Ops.BUFFER or n.op in _REALIZED:
      size = n.arg.size if n.op is Ops.BUFFER else prod(n.shape) if all_int(n.shape) else 0
      shape = (size,) if n.op is Ops.BUFFER else n.shape
      reads.setdefault((n, views), Read(n, size, _strides_through(n, shape, views)))
    elif n.op is Ops.REDUCE_AXIS: nested = True
    elif n.op in GroupOp.Elementwise or n.op is Ops.DETACH:
      # a bitcast between sizes changes the element count: its input isn't read element for element
      if n.op is Ops.BITCAST and any(s.dtype.itemsize != n.dtype.itemsize for s in n.src): return None
      ops.add(n.op)
      stack.extend((s, views) for s in n.src)
    elif n.op in (Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.DEVICE): continue
    else: return None   # anything else (a fused custom kernel, multi-device nodes): not a plain fused chain
  return Reads(tuple(reads.values()), frozenset(ops), nested)
