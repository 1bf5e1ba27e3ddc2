"""16-byte epilogue stores for the staged GEMMs (opt_smem.py, opt_simt.py).

A tensor-core accumulator fragment gives each lane 2 consecutive outputs of a row, so storing straight from registers
moves 4 or 8 bytes per instruction. Instead the block's finished C tile (the epilogue already applied in registers: bias,
activation, cast) is written to the shared panels, which the k loop no longer needs, and copied out 16 bytes per thread
and instruction (STG.128), each warp writing whole rows. The tile is stored row by row in 16-byte chunks, the chunk index
XOR-swizzled by the row (as the panels are), so the fragment-layout writes (8 rows of a warp at once) and the row-wise
reads are both free of bank conflicts.

Which outputs allow vector stores (`vector_width`): the output's unit-stride axis is n's innermost (or else m's: an
NCHW convolution's output runs along ow, then the tile is stored transposed, n by n), and its extent, every other
stride and the base are multiples of the width; the store is ungated."""
from __future__ import annotations
from dataclasses import dataclass
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.codegen.gemm_view import affine, split

def vector_width(k: UOp, inner: UOp, nbytes: int = 16) -> int:
  """Outputs one `nbytes` store may write at consecutive values of axis `inner` of kernel `k`: nbytes / element size, or 1."""
  ind = k.src[0].src[0]
  if ind.op is not Ops.INDEX or len(ind.src) != 2 or (aff := affine(ind.src[1])) is None: return 1
  w = nbytes // ind.src[0].dtype.base.itemsize
  base, strides = aff
  if w < 2 or strides.get(inner) != 1 or inner.src[0].arg % w or base % w or any(s % w for r, s in strides.items() if r is not inner): return 1
  return w

def _gate(x: UOp | None, y: UOp | None) -> UOp | None: return x if y is None else y if x is None else UOp(Ops.AND, dtypes.bool, (x, y))

@dataclass(frozen=True)
class _Dim:
  """One GEMM dimension of the C tile: its size, tile, the block's first index, its axes."""
  size: int
  tile: int
  at0: UOp
  axes: tuple

def staged_stores(k: UOp, g, t, smem: UOp, capacity: int, outs: list[tuple[UOp, UOp, UOp]], tid: UOp, bm0: UOp, bn0: UOp,
                  nbytes: int = 16) -> list[UOp] | None:
  """The stores of the C tile through shared memory, or None where they don't apply (then store from registers).
  `outs`: (row, column in the block tile, value in the output's dtype) of each of this thread's outputs; `smem`: the
  panels' buffer of `capacity` elements, free once every REDUCE is done; `t` the tile (bm, bn, threads); `nbytes` the
  widest vector access the renderer has (Renderer.copy_bytes)."""
  odt = k.src[0].src[0].src[0].dtype.base
  if odt != smem.dtype.base: return None
  m, n = _Dim(g.M, t.bm, bm0, g.A.outer), _Dim(g.N, t.bn, bn0, g.B.outer)
  # the tile's rows and its vector (column) dimension: n, or m where the output runs along m
  if (w := vector_width(k, g.B.outer[-1], nbytes)) > 1: rd, cd, swap = m, n, False
  elif (w := vector_width(k, g.A.outer[-1], nbytes)) > 1: rd, cd, swap = n, m, True
  else: return None
  if cd.tile % w: return None
  # a tile bigger than the panels (fp32 C of a tf32 GEMM) goes in passes of `rp` rows
  passes = 1
  while rd.tile * cd.tile > passes * capacity and rd.tile % (passes * 2) == 0: passes *= 2
  rp = rd.tile // passes
  if rp * cd.tile > capacity or (rp * cd.tile // w) % t.threads: return None
  def at(row, col) -> UOp:   # chunk (col // w) of row `row` sits at chunk (col // w) ^ (row % 8) (8 rows, 8 bank groups)
    row, col = (index_const(x) if isinstance(x, int) else x for x in (row, col))
    nch = cd.tile // w
    return row * cd.tile + ((col // w) ^ (row % min(8, nch))) * w + col % w if nch > 1 else row * cd.tile + col
  ind = k.src[0].src[0]
  out: list[UOp] = []
  # every warp is past its last fragment read of the panels once every output value exists; a later pass overwrites
  # what the one before read
  done = UOp(Ops.BARRIER, dtypes.void, tuple(v for _, _, v in outs))
  for p in range(passes):
    def mine(r: UOp) -> UOp | None:
      if passes == 1: return None
      lo, hi = UOp(Ops.CMPLT, dtypes.bool, (index_const(p * rp - 1), r)), UOp(Ops.CMPLT, dtypes.bool, (r, index_const((p + 1) * rp)))
      return UOp(Ops.AND, dtypes.bool, (lo, hi))
    writes = []
    for r, c, v in outs:
      if swap: r, c = c, r
      gate = mine(r)
      # the row within the pass: r % rp (= r - p*rp where the gate holds) keeps the index range non-negative and small
      dst = UOp(Ops.INDEX, smem.dtype, (smem, at(r % rp if passes > 1 else r, c)) + ((gate,) if gate is not None else ()))
      writes.append(UOp(Ops.STORE, dtypes.void, (dst, v, done)))
    ready = UOp(Ops.BARRIER, dtypes.void, tuple(writes))
    reads = []
    for i in range(rp * cd.tile // (w * t.threads)):
      c = tid + t.threads * i
      row, col = c // (cd.tile // w), c % (cd.tile // w) * w
      val = UOp(Ops.LOAD, odt.vec(w), (UOp(Ops.INDEX, smem.dtype, (smem, at(row, col)), ("vec", w, nbytes)), ready))
      out.append(_store(ind, val, (rd, rd.at0 + p * rp + row, 1), (cd, cd.at0 + col, w), nbytes))
      reads.append(val)
    done = UOp(Ops.BARRIER, dtypes.void, tuple(reads))
  return out

def _store(ind: UOp, val: UOp, r: tuple, c: tuple, nbytes: int) -> UOp:
  """The output store of `val`: w outputs at (row, col .. col+w-1), each given as (dimension, global index, run)."""
  # the tails: the vector dimension's size is a multiple of w, so one gate holds for all w outputs of a chunk
  gate = None
  sub: dict = {}
  for d, x, run in (r, c):
    if d.size % d.tile:
      gate = _gate(gate, UOp(Ops.CMPLT, dtypes.bool, (x, index_const(d.size))))
      # past the end the index is clamped to the last row (chunk): gated off, but kept in bounds
      x = UOp(Ops.WHERE, dtypes.index, (UOp(Ops.CMPLT, dtypes.bool, (x, index_const(d.size))), x, index_const(d.size - run)))
    sub.update(split(x, d.axes))
  dst = UOp(Ops.INDEX, ind.dtype, (ind.src[0], ind.src[1].substitute(sub)) + ((gate,) if gate is not None else ()), ("vec", val.dtype.count, nbytes))
  return UOp(Ops.STORE, dtypes.void, (dst, val))
