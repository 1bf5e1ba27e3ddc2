"""codegen/lane_stores.py on hand-built kernels: runs of 8 lane stores into consecutive addresses become one vector store
of a VECTORIZE; a run with a gap, a repeated vector or a masked store stays scalar."""
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.codegen.lane_stores import group_lane_stores

def _setup():
  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), 0)
  g = UOp(Ops.RANGE, dtypes.index, (index_const(4),), ("g", 0))
  vecs = [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), 1 + i).index(g).load().cast(dtypes.float32) for i in range(8)]
  vecs = [UOp(Ops.VECTORIZE, dtypes.float32.vec(16), (v,) * 16) for v in vecs]
  return buf, g, vecs

def _store(buf, idx, val, mask=None):
  return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, buf.dtype, (buf, idx) if mask is None else (buf, idx, mask)), val))

def test_runs_of_eight_become_vector_stores():
  buf, g, vecs = _setup()
  stores = [_store(buf, g * 1000 + l * 100 + p, vecs[p].gep(l)) for l in range(16) for p in range(8)]
  out = group_lane_stores(UOp(Ops.SINK, dtypes.void, tuple(stores)))
  assert len(out.src) == 16
  for st in out.src:
    assert st.src[0].arg == ("vec", 8) and st.src[1].op is Ops.VECTORIZE and st.src[1].dtype == dtypes.float32.vec(8)
    assert [s.src[0] for s in st.src[1].src] == vecs and len({s.arg for s in st.src[1].src}) == 1

def test_what_stays_scalar():
  buf, g, vecs = _setup()
  gap = [_store(buf, g * 1000 + (p if p < 4 else p + 1), vecs[p].gep(0)) for p in range(8)]
  same = [_store(buf, g * 1000 + 200 + p, vecs[p % 4].gep(1)) for p in range(8)]
  masked = [_store(buf, g * 1000 + 400 + p, vecs[p].gep(2), UOp(Ops.CMPLT, dtypes.bool, (g, index_const(2)))) for p in range(8)]
  k = UOp(Ops.SINK, dtypes.void, tuple(gap + same + masked))
  assert group_lane_stores(k) is k
