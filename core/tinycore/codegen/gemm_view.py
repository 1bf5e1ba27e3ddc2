"""A reduce kernel seen as one GEMM, C[m, n] = sum_k A[m, k] * B[k, n], for the shared-memory tensor-core path
(codegen/opt_smem.py). Several kernel axes may make up one GEMM dimension: a convolution's output axes (n, oh, ow)
that only the input reads are m, the output channels that only the weight reads are n, its reduce axes (c, kh, kw) are
k. That is the implicit GEMM: the im2col index math stays inside the tile copies (each flat m or k is split back into
its axes there), nothing is materialized. Axes both operands read (a batch) and axes neither reads stay grid dims.

Each dimension is the row-major flattening of its axes, ordered so that an operand's unit-stride axis is innermost:
16-byte copies then move consecutive elements. How wide an operand's copies may be (`copy`, in elements) follows from
its index: the unit-stride axis, its extent, every other stride and the base a multiple of the width, and no padding
gate that varies inside one copy. A gated load (a padding halo) is a zero-filled copy where the gate is off. Sizes
that aren't multiples of the tile are padded up: copies past m/n/k's end zero-fill, stores past it are gated off."""
from __future__ import annotations
import math
from dataclasses import dataclass
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.helpers import ALLOW_TF32

@dataclass(frozen=True)
class Operand:
  """One matmul operand: `load` is LOAD(INDEX(buf, idx[, gate])); `outer` its m (or n) axes, outermost first; `kmajor`
  when its shared panel is stored k rows by outer columns (an outer axis is the contiguous one in memory)."""
  load: UOp
  outer: tuple[UOp, ...]
  kmajor: bool
  copy: int

@dataclass(frozen=True)
class GemmView:
  tc: object
  red: UOp
  A: Operand
  B: Operand
  kaxes: tuple[UOp, ...]
  M: int
  N: int
  K: int
  vec: int   # elements in one 16-byte chunk of a shared panel row (ldmatrix rows, swizzle unit, widest copy)

def _bound(r: UOp) -> int | None: return r.src[0].arg if r.src[0].op is Ops.CONST and isinstance(r.src[0].arg, int) else None

def _const(x: UOp) -> int | None:
  from tinycore.codegen.opt import _simplify
  x = _simplify(x)
  return x.arg if x.op is Ops.CONST else None

def affine(idx: UOp) -> tuple[int, dict] | None:
  """(base, {range: stride}) of an index that is affine in its RANGEs (checked at 0, 1 and 2 of each), else None."""
  rngs = [u for u in idx.toposort() if u.op is Ops.RANGE]
  zero = {r: index_const(0) for r in rngs}
  if (base := _const(idx.substitute(zero))) is None: return None
  strides = {}
  for r in rngs:
    s1, s2 = _const(idx.substitute({**zero, r: index_const(1)})), _const(idx.substitute({**zero, r: index_const(2)}))
    if s1 is None or s2 is None or s2 - base != 2 * (s1 - base): return None
    strides[r] = s1 - base
  return base, strides

def split(flat: UOp, axes: tuple[UOp, ...]) -> dict[UOp, UOp]:
  """Each axis's value at row-major position `flat` of `axes` (the first axis unbounded: past the end is gated off)."""
  out, inner = {}, 1
  for i in range(len(axes) - 1, -1, -1):
    v = flat // inner if inner > 1 else flat
    out[axes[i]] = v % _bound(axes[i]) if i > 0 else v
    inner *= _bound(axes[i])
  return out

def _strip(x: UOp, din) -> UOp | None:
  """The operand as a `din` value: itself, or what a widening CAST converts; WHERE(g, LOAD(g-gated), 0) is its load."""
  if x.dtype != din:
    if x.op is not Ops.CAST or x.src[0].dtype != din: return None
    x = x.src[0]
  # a widening cast and back (a gradient's fp32 upstream cast to half again) is the value itself
  if x.op is Ops.CAST and x.src[0].op is Ops.CAST and x.src[0].src[0].dtype == din and x.src[0].dtype.itemsize > din.itemsize and \
     dtypes.is_float(x.src[0].dtype): x = x.src[0].src[0]
  if x.op is Ops.WHERE and x.src[1].op is Ops.LOAD and x.src[2].op is Ops.CONST and x.src[2].arg == 0:
    ind = x.src[1].src[0]
    if ind.op is Ops.INDEX and len(ind.src) == 3 and ind.src[2] is x.src[0]: x = x.src[1]
  return x

def _order(axes: list[UOp], strides: dict | None) -> tuple[UOp, ...]:
  """Axes outermost first: by falling stride where the operand is affine (its unit-stride axis innermost), else as given."""
  if strides is None: return tuple(axes)
  return tuple(sorted(axes, key=lambda a: (-abs(strides.get(a, 0)), axes.index(a))))

def _operand(x: UOp, outer: tuple[UOp, ...], kaxes: tuple[UOp, ...], vec: int, widest: int) -> Operand | None:
  if x.op is not Ops.LOAD or x.src[0].op is not Ops.INDEX or len(x.src[0].src) not in (2, 3) or x.src[0].arg is not None: return None
  if x.src[0].src[0].op is not Ops.DEFINE_GLOBAL: return None
  gate = x.src[0].src[2] if len(x.src[0].src) == 3 else None
  if (aff := affine(x.src[0].src[1])) is None: return Operand(x, outer, False, 1)   # gathered element by element
  base, strides = aff
  if strides.get(kaxes[-1]) == 1: kmajor, contig = False, kaxes[-1]
  elif strides.get(outer[-1]) == 1: kmajor, contig = True, outer[-1]
  else: return Operand(x, outer, False, 1)
  # the unit-stride axis and the axes outside it whose stride is the extent of the run inside them are one contiguous run
  axes = outer if kmajor else kaxes
  run, extent = [contig], _bound(contig)
  for ax in reversed(axes[:-1]):
    if strides.get(ax) != extent: break
    run.append(ax)
    extent *= _bound(ax)
  cv = widest
  gated = gate is not None and any(r in gate.toposort() for r in run)
  while cv > 1 and (gated or extent % cv or base % cv or any(s % cv for r, s in strides.items() if r not in run)): cv //= 2
  return Operand(x, outer, kmajor, cv)

def _reduction(k: UOp):
  """(REDUCE, its k ranges, the product under it, the output axes) of a one-store sum-of-products kernel, else None."""
  from tinycore.codegen.opt import _globals
  if len(k.src) != 1 or k.src[0].op is not Ops.STORE: return None
  reds = [u for u in k.toposort() if u.op is Ops.REDUCE]
  if len(reds) != 1 or reds[0].arg is not Ops.ADD or len(reds[0].src) < 2: return None
  red = reds[0]
  kr = red.src[1:]
  if not all(r.op is Ops.RANGE and _bound(r) for r in kr): return None
  # a half product summed in float32 (sum_acc_dtype) is CAST(MUL(a, b)) under the reduce
  prod = red.src[0].src[0] if red.src[0].op is Ops.CAST and red.src[0].src[0].op is Ops.MUL else red.src[0]
  if prod.op is not Ops.MUL: return None
  glob = _globals(k)
  if not all(_bound(g) for g in glob): return None
  return red, kr, prod, glob

def _view(r, renderer, din, tc) -> GemmView | None:
  """The reduction `r` (_reduction's) as a GEMM of `din` operands, or None."""
  red, kr, prod, glob = r
  a, b = (_strip(x, din) for x in prod.src)
  if a is None or b is None: return None
  ta, tb = set(a.toposort()), set(b.toposort())
  if any(x not in ta or x not in tb for x in kr): return None
  ms, ns = [g for g in glob if g in ta and g not in tb], [g for g in glob if g in tb and g not in ta]
  if not ms or not ns: return None
  vec = (getattr(renderer, "async_copy", 0) or 16) // din.itemsize
  # the k order: unit stride innermost in A if A is affine, else in B (both read every k axis)
  affa, affb = (affine(x.src[0].src[1]) if x.op is Ops.LOAD and x.src[0].op is Ops.INDEX else None for x in (a, b))
  kaxes = _order(list(kr), (affa or affb or (0, None))[1])
  widest = min(vec, (getattr(renderer, "async_copy", 0) or getattr(renderer, "copy_bytes", 16)) // din.itemsize)
  A = _operand(a, _order(ms, affa[1] if affa else None), kaxes, vec, widest)
  B = _operand(b, _order(ns, affb[1] if affb else None), kaxes, vec, widest)
  if A is None or B is None: return None
  M, N, K = (math.prod(_bound(x) for x in rs) for rs in (A.outer, B.outer, kaxes))
  return GemmView(tc, red, A, B, kaxes, M, N, K, vec)

def match(k: UOp, renderer) -> GemmView | None:
  """The kernel as a GEMM on one of the renderer's warp-wide tensor cores, or None."""
  tcs = [t for t in getattr(renderer, "tensor_cores", None) or [] if t.frags is not None and (ALLOW_TF32 or t.dtype_in != dtypes.float32)]
  if not tcs or (r := _reduction(k)) is None: return None
  for tc in tcs:
    if tc.elements_per_thread[2] * tc.threads != tc.dims[0] * tc.dims[1]: continue   # warp-wide (32 or 64 lanes), C spread over lanes
    if (g := _view(r, renderer, tc.dtype_in, tc)) is not None: return g
  return None

def match_dtype(k: UOp, renderer, din) -> GemmView | None:
  """The kernel as a GEMM of `din` operands multiplied by plain FMAs (no tensor core: `tc` is None), or None."""
  return None if (r := _reduction(k)) is None else _view(r, renderer, din, None)
