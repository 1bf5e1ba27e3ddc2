"""16-byte epilogue stores for the staged GEMMs (opt_smem.py, opt_simt.py).

A tensor-core accumulator fragment gives each lane 2 consecutive outputs of a row, so storing straight from registers
moves 4 or 8 bytes per instruction. Instead the block's finished C tile (the epilogue already applied in registers: bias,
activation, cast) is written to the shared panels, which the k loop no longer needs, and copied out 16 bytes per thread
and instruction (STG.128), each warp writing whole rows. The tile is stored row by row in 16-byte chunks, the chunk index
XOR-swizzled by the row (as the panels are), so the fragment-layout writes (8 rows of a warp at once) and the row-wise
reads are both free of bank conflicts.

Which outputs allow vector stores (`vector_width`): the output's unit-stride axis is n's innermost, and its extent,
every other stride and the base are multiples of the width; the store is ungated."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.codegen.gemm_view import affine, split

def vector_width(k: UOp, g, nbytes: int = 16) -> int:
  """Outputs one `nbytes` store may write at consecutive n's of kernel `k` (GEMM view `g`): nbytes / element size, or 1."""
  ind = k.src[0].src[0]
  if ind.op is not Ops.INDEX or len(ind.src) != 2 or (aff := affine(ind.src[1])) is None: return 1
  w = nbytes // ind.src[0].dtype.base.itemsize
  base, strides = aff
  inner = g.B.outer[-1]
  if w < 2 or strides.get(inner) != 1 or inner.src[0].arg % w or base % w or any(s % w for r, s in strides.items() if r is not inner): return 1
  return w

def _gate(x: UOp | None, y: UOp | None) -> UOp | None: return x if y is None else y if x is None else UOp(Ops.AND, dtypes.bool, (x, y))

def staged_stores(k: UOp, g, t, smem: UOp, capacity: int, outs: list[tuple[UOp, UOp, UOp]], tid: UOp, bm0: UOp, bn0: UOp,
                  nbytes: int = 16) -> list[UOp] | None:
  """The stores of the C tile through shared memory, or None where they don't apply (then store from registers).
  `outs`: (row, column in the block tile, value in the output's dtype) of each of this thread's outputs; `smem`: the
  panels' buffer of `capacity` elements, free once every REDUCE is done; `t` the tile (bm, bn, threads); `nbytes` the
  widest vector access the renderer has (Renderer.copy_bytes)."""
  odt = k.src[0].src[0].src[0].dtype.base
  w = vector_width(k, g, nbytes)
  if odt != smem.dtype.base or w == 1 or t.bn % w: return None
  # a tile bigger than the panels (fp32 C of a tf32 GEMM) goes in passes of `rp` rows
  passes = 1
  while t.bm * t.bn > passes * capacity and t.bm % (passes * 2) == 0: passes *= 2
  rp = t.bm // passes
  if rp * t.bn > capacity or (rp * t.bn // w) % t.threads: return None
  def at(row, col) -> UOp:   # chunk (col // w) of row `row` sits at chunk (col // w) ^ (row % 8) (8 rows, 8 bank groups)
    row, col = (index_const(x) if isinstance(x, int) else x for x in (row, col))
    nch = t.bn // w
    return row * t.bn + ((col // w) ^ (row % min(8, nch))) * w + col % w if nch > 1 else row * t.bn + col
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
      gate = mine(r)
      # the row within the pass: r % rp (= r - p*rp where the gate holds) keeps the index range non-negative and small
      dst = UOp(Ops.INDEX, smem.dtype, (smem, at(r % rp if passes > 1 else r, c)) + ((gate,) if gate is not None else ()))
      writes.append(UOp(Ops.STORE, dtypes.void, (dst, v, done)))
    ready = UOp(Ops.BARRIER, dtypes.void, tuple(writes))
    reads = []
    for i in range(rp * t.bn // (w * t.threads)):
      st, ld = _copy_out(g, t, smem, odt, w, ind, at, tid + t.threads * i, p * rp, ready, bm0, bn0, nbytes)
      out.append(st); reads.append(ld)
    done = UOp(Ops.BARRIER, dtypes.void, tuple(reads))
  return out

def _copy_out(g, t, smem: UOp, odt, w: int, ind: UOp, at, c: UOp, r0: int, ready: UOp, bm0: UOp, bn0: UOp, nbytes: int) -> tuple[UOp, UOp]:
  """Chunk `c` of a pass starting at block row `r0`: its `nbytes` load from shared memory and its store to the output."""
  row, col = c // (t.bn // w), c % (t.bn // w) * w
  val = UOp(Ops.LOAD, odt.vec(w), (UOp(Ops.INDEX, smem.dtype, (smem, at(row, col)), ("vec", w, nbytes)), ready))
  mm, nn = bm0 + r0 + row, bn0 + col
  # the tails: N is a multiple of w, so one gate holds for all w outputs of a chunk
  gate = _gate(UOp(Ops.CMPLT, dtypes.bool, (mm, index_const(g.M))) if g.M % t.bm else None,
               UOp(Ops.CMPLT, dtypes.bool, (nn, index_const(g.N))) if g.N % t.bn else None)
  # past the end the index is clamped to the last row (chunk): gated off, but kept in bounds
  def cl(x: UOp, n: int, tile: int, last: int) -> UOp:
    return x if n % tile == 0 else UOp(Ops.WHERE, dtypes.index, (UOp(Ops.CMPLT, dtypes.bool, (x, index_const(n))), x, index_const(last)))
  idx = ind.src[1].substitute({**split(cl(mm, g.M, t.bm, g.M - 1), g.A.outer), **split(cl(nn, g.N, t.bn, g.N - w), g.B.outer)})
  dst = UOp(Ops.INDEX, ind.dtype, (ind.src[0], idx) + ((gate,) if gate is not None else ()), ("vec", w, nbytes))
  return UOp(Ops.STORE, dtypes.void, (dst, val)), val
