"""Scalar stores of vector lanes regrouped into vector stores: the epilogue of a tile whose vector axis isn't the output's
contiguous one (a conv's 16 output channels per vector, written into NCHW; opt.py `VEC_S`).

After VEC_S and an upcast of the contiguous axis by 8, each lane l of the 8 accumulators a0..a7 (8 neighbouring pixels)
goes to 8 consecutive addresses: 8 scalar stores of a0[l]..a7[l]. Here they become one 8-wide store of
VECTORIZE(a0[l], ..., a7[l]); over the 16 lanes that is an 8x16 transpose, which a renderer can do with shuffles
(tinycore_cpu's C renderer) instead of 128 lane extracts and scalar stores (one core, 16x64x56x56 3x3: ~9% of the
kernel's time went to those stores)."""
from __future__ import annotations
from tinycore.uop import UOp, Ops

ROWS = 8   # stores per group: half a 16-lane vector, the tile's pixel rows

def _split(idx: UOp) -> tuple[UOp, int]:
  """An index as (expression, constant offset)."""
  if idx.op is Ops.ADD and idx.src[1].op is Ops.CONST: return idx.src[0], idx.src[1].arg
  return idx, 0

def _lanes_of_scalars(k: UOp) -> UOp:
  """A lane of a value that folded to one scalar is that scalar: upcast past a pad, a copy's gate is constant false and
  its select of vector lanes folds to the scalar 0 (rendered as lane reads of 0.0f, which C refuses)."""
  repl = {u: u.src[0] for u in k.toposort() if u.op is Ops.GEP and u.src[0].dtype.count == 1}
  return k.substitute(repl) if repl else k

def group_lane_stores(k: UOp) -> UOp:
  """SINK of stores -> the same SINK with every run of ROWS lane stores (same lane of ROWS distinct vectors, consecutive
  addresses of one buffer, no mask) replaced by one vector store. Other stores stay as they are (a lane of a scalar:
  that scalar)."""
  k = _lanes_of_scalars(k)
  cands: dict[tuple, dict[int, UOp]] = {}
  for st in k.src:
    if st.op is not Ops.STORE or len(st.src[0].src) != 2 or st.src[0].arg is not None: continue
    val = st.src[1]
    if val.op is not Ops.GEP or val.src[0].dtype.count <= 1 or len(val.arg) != 1: continue
    base, off = _split(st.src[0].src[1])
    cands.setdefault((st.src[0].src[0], base, val.arg[0]), {})[off] = st
  done: dict[UOp, UOp | None] = {}
  for (buf, base, _), by_off in cands.items():
    for off in sorted(by_off):
      run = [by_off.get(off + p) for p in range(ROWS)]
      if any(s is None or s in done for s in run): continue
      vecs = [s.src[1].src[0] for s in run]
      if len(set(vecs)) != ROWS: continue
      first: UOp = run[0]
      vt = first.src[1].dtype.vec(ROWS)
      idx = UOp(Ops.INDEX, first.src[0].dtype, (buf, first.src[0].src[1]), ("vec", ROWS))
      done[first] = UOp(Ops.STORE, first.dtype, (idx, UOp(Ops.VECTORIZE, vt, tuple(s.src[1] for s in run))))
      for s in run[1:]: done[s] = None
  if not done: return k
  return k.replace(src=tuple(x for st in k.src if (x := done.get(st, st)) is not None))
