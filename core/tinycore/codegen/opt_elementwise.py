"""Optimizer actions for kernels outside the matmul register tile (codegen/opt.py's `_heuristic` sends them here):
elementwise kernels, and kernels whose output axes select between stacked expressions. Two things pay there:
- short stacked axes (Tensor.stack of computed slices, Winograd's transform points) unrolled whole, so each copy's
  gates fold to constants; when what the copies store runs along another axis than the loads, lanes along the load
  axis stored lane by lane (VEC_S) and runs of them grouped into vector stores;
- explicit 16-lane vectors on the innermost contiguous output axis (the C compiler doesn't always vectorize inlined
  helpers such as exp2 by itself)."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.helpers import getenv
from tinycore.renderer import Renderer
from tinycore.codegen.opt import (Opt, CantVectorize, _bound, _globals, _loads, _range, _simplify, _terms, _unit_stride,
                                  upcast_global, vectorize_global)

def _gates(k: UOp) -> list[UOp]:
  """The conditions a kernel selects or gates loads with (a pad's validity, a stack's branch)."""
  return [u.src[0] for u in k.toposort() if u.op is Ops.WHERE] + [i.src[2] for i in _loads(k) if len(i.src) > 2]

def _stacked_axes(k: UOp) -> list[UOp]:
  """Short output axes that select between different expressions without indexing memory: Tensor.stack of n computed
  slices (Winograd's transform points, conv_winograd.py) pads each and adds them, so every output evaluates all n
  gated branches. Unrolled whole, each copy's gates are constants and fold away (36 points x 16 terms: 1.2 s -> ms).
  A pad or a cat of longer pieces also indexes memory along the axis, and is left alone."""
  gates = _gates(k)
  if not gates: return []
  axes: list[UOp] = []
  n = 1
  for g in _globals(k):
    b = _bound(g)
    if b is None or b > 64 or n * b > 64 or any(g in i.src[1].toposort() for i in _loads(k)): continue
    if any(g in c.toposort() for c in gates): axes, n = axes + [g], n * b
  return axes

def _drop_true_gates(k: UOp) -> UOp:
  """Loads whose gate folded to true (a stacked axis unrolled) become plain loads, which can be vectorized."""
  repl = {i: i.replace(src=i.src[:2]) for i in _loads(k) if len(i.src) > 2 and i.src[2].op is Ops.CONST and i.src[2].arg is True}
  return k.substitute(repl) if repl else k

def _lanes_along_loads(k: UOp, opts: tuple[Opt, ...], glob: list[UOp], whole_runs: bool = False) -> tuple[tuple[Opt, ...], UOp] | None:
  """16 lanes along an output axis the loads are contiguous in, stored lane by lane (VEC_S); where each step of the
  last axis stores a run of `step` consecutive addresses (F(4,3): 4 output columns a tile; a transpose: 1), that axis
  upcast so the runs make 8, which lane_stores.py turns into 8-wide vector stores (one 8x16 shuffle transpose) instead
  of 16 scalar lane stores each. None where no axis takes the lanes (or, `whole_runs`, where the last axis doesn't
  store consecutive addresses: only a plain transpose's runs of 1 are taken there)."""
  gates = _gates(k)
  # (a gate along the lanes would need a mask per lane; one along another axis, a pad's, gates whole vectors)
  for g in (g for g in glob if _bound(g) and _bound(g) % 16 == 0 and _unit_stride(k, g) and not any(g in c.toposort() for c in gates)):
    try: k2, opts2 = vectorize_global(k, g, 16, scatter=True, shared_gates=True), opts + (("VEC_S", g.arg, 16),)
    except CantVectorize: continue
    last = _range(k2, glob[-1].arg)
    step = _simplify(k2.src[0].src[0].src[1].substitute({last: last + 1}) - k2.src[0].src[0].src[1])
    if step.op is Ops.CONST and isinstance(step.arg, int) and (step.arg == 1 if whole_runs else 1 < step.arg < 8 and 8 % step.arg == 0) \
       and (_bound(last) or 0) % (8 // step.arg) == 0:
      return opts2 + (("UPCAST", glob[-1].arg, 8 // step.arg),), upcast_global(k2, last, 8 // step.arg)
    if whole_runs: return None
    return opts2, k2
  return None

def _whole_lines(k: UOp, opts: tuple[Opt, ...]) -> tuple[tuple[Opt, ...], UOp] | None:
  """A copy into row panels ([M/8][K][8] from a [K][M] matrix: x.T packed for x.T @ g) reads a run of 8 floats, half a
  cache line, per row and panel. Where M floats make a multiple of 2 KiB (512 columns) the rows' lines fall into two
  L1 sets and are gone before the next panel reads their other half: each line came from L2 twice. The panel axis
  upcast so one step reads 16 adjacent floats (a whole line) for 2 panels (one core, CPU time: h1.T of an MLP step,
  256x512, 28.5 -> 13.1 us; x.T, 256x784, 20.7 -> 17.3 us)."""
  glob = _globals(k)
  if len(glob) < 2 or (run := _bound(glob[-1])) is None or run >= 16 or 16 % run or not _unit_stride(k, glob[-1]): return None
  if len(loads := _loads(k)) != 1: return None
  idx = loads[0].src[1]
  for g in glob[:-1]:
    if not (b := _bound(g)) or b % (16 // run): continue
    step = _simplify(idx.substitute({g: g + 1}) - idx)
    if step.op is Ops.CONST and step.arg == run:
      return opts + (("UPCAST", g.arg, 16 // run),), upcast_global(k, g, 16 // run)
  return None

def elementwise_heuristic(k: UOp, renderer: Renderer) -> tuple[tuple[Opt, ...], UOp]:
  """The actions for a kernel the register-tile heuristic doesn't take, and the kernel with them applied."""
  vec = renderer.vector_types and getenv("VEC", 1)
  opts: tuple[Opt, ...] = ()
  for g in _stacked_axes(k):
    opts, k = opts + (("UPCAST", g.arg, _bound(g)),), upcast_global(k, g, _bound(g))
  lane_stores = vec and renderer.register_block is not None
  if opts:
    k = _drop_true_gates(k)
    glob = _globals(k)
    # what the copies store isn't contiguous along the last axis, but the loads are along another (Winograd's output
    # transform: channels-last products written to NCHW)
    if lane_stores and glob and not any(glob[-1] in _terms(st.src[0].src[1]) for st in k.src) and \
       (got := _lanes_along_loads(k, opts, glob)) is not None: return got
  elif lane_stores and len(k.src) == 1 and not any(u.op is Ops.REDUCE for u in k.toposort()):
    # a transposing copy (x.T.contiguous(), a transposed matmul operand copied into panels): the output runs along the
    # last axis, the input along another. Scalar, each element is a load and a store; in lanes along the input's axis
    # with runs of 8 outputs grouped, 16 x 8 of them move with 16 vector loads, an 8x16 shuffle transpose and 16 vector
    # stores (one core, 1024x1024 into 32-wide panels: 0.76 -> 0.47 ms). A pad along the output's axes (attention's keys
    # padded to whole tiles) gates whole vectors: the lanes are read or zero together
    glob = _globals(k)
    if glob and _bound(glob[-1]) and _bound(glob[-1]) % 8 == 0 and not _unit_stride(k, glob[-1]) and \
       (got := _lanes_along_loads(k, opts, glob, whole_runs=True)) is not None: return got
  # elementwise kernels: explicit vector lanes on the innermost contiguous output axis (the compiler can't always
  # vectorize inlined helpers like exp2 on its own)
  if vec and not any(u.op is Ops.REDUCE for u in k.toposort()):
    if lane_stores and len(k.src) == 1 and (got := _whole_lines(k, opts)) is not None: return got
    glob = _globals(k)
    if glob and _bound(glob[-1]) and _bound(glob[-1]) % 16 == 0 and _unit_stride(k, glob[-1]):
      try: return opts + (("VEC", glob[-1].arg, 16),), vectorize_global(k, glob[-1], 16, shared_gates=True)
      except CantVectorize: pass
  return opts, k
