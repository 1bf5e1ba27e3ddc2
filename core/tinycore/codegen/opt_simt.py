"""Shared-memory GEMM tiling without tensor cores (fp32 on a GPU, no TF32): a block of threads computes a BM x BN output
tile from the same pipelined panels as the tensor-core kernel (opt_smem.py's Staging: 16-byte cp.async copies, STAGES
deep, swizzled), and each thread a TM x TN register tile of plain FMAs, its operands read from shared memory 16 bytes
(4 floats) at a time.

Reading without bank conflicts: a 16-byte shared load is served a quarter warp (8 lanes) at a time, which is conflict
free when those 8 lanes read 8 different 16-byte bank groups or the same address. So the 8 lanes of a quarter vary
along one output dimension (the *fast* one) and share the other (whose operand they then read by broadcast). The fast
dimension's operand is read along its outer axis where its panel is k-major (8 lanes, 8 consecutive chunks of one row)
and along k where it isn't (8 lanes, 8 consecutive rows, chunk-swizzled so that they land in different groups): the
thread's rows are then interleaved (row t + TY*i) instead of grouped. n is fast where B is k-major (A @ B), else m.
The n's of a thread come in runs of 4 consecutive columns, so the epilogue (bias, activation, cast: whatever the kernel
stores) writes 4 outputs with one 16-byte (or 8-byte for half) store where the output's rows allow it.

The per-step sum of products is an FMA chain; codegen/mma_accumulate.py's fuse_fma_accumulate starts it from the running
sum, so the k loop is TM*TN*BK FMAs and nothing else (fp32 throughout: the sums are reassociated, not rounded less).

Launch, like opt_smem.py: dim 0 = thread + threads * (column block), dim 1 = row block, other output axes grid dims."""
from __future__ import annotations
from dataclasses import dataclass
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.helpers import ContextVar
from tinycore.codegen.gemm_view import split, affine
from tinycore.codegen.opt_smem import Staging, _below, _both, SMEM_GEMM, C_TILE
from tinycore.codegen.mma_accumulate import FMA_CHAIN

SIMT_TILE = ContextVar("SIMT_TILE", "")   # "BM,BN,BK,TM,TN,STAGES,SWIZZLE" instead of default_simt_tile's choice

@dataclass(frozen=True)
class SimtTile:
  bm: int = 64
  bn: int = 128
  bk: int = 8
  tm: int = 8
  tn: int = 8
  stages: int = 3
  swizzle: bool = True
  @property
  def threads(self) -> int: return (self.bm // self.tm) * (self.bn // self.tn)

def valid_simt_tile(t: SimtTile, g, renderer) -> str | None:
  """Why `t` doesn't fit GEMM view `g` on `renderer` (a sentence), or None."""
  M, N, K, itemsize = g.M, g.N, g.K, 4
  if t.bm > 2 * M or t.bn > 2 * N or t.bk > 2 * K: return f"tile {t.bm}x{t.bn}x{t.bk} is more than twice the {M}x{N}x{K} GEMM in a dimension"
  if t.tm % 4 or t.tn % 4 or t.bk % 4 or t.bm % t.tm or t.bn % t.tn: return "thread tiles and BK must be whole 4-element (16-byte) reads"
  if (t.bn // t.tn if g.B.kmajor else t.bm // t.tm) % 8: return "the fast thread dimension must be a multiple of 8 (a quarter warp)"
  if t.threads % 32 or t.threads > (renderer.local_max or (1024,))[0]: return f"{t.threads} threads is not whole warps within a block"
  for (rows, cols), cv in zip(((t.bm, t.bk), (t.bn, t.bk)), (g.A.copy, g.B.copy)):
    if (rows * cols) % (cv * t.threads): return f"the {rows}x{cols} panel doesn't split into whole {cv}-element copies per thread"
  if any(c % g.vec or (c // g.vec) & (c // g.vec - 1) for c in (t.bm, t.bn, t.bk)): return "panel rows must be a power of two of 16-byte chunks"
  asyn = getattr(renderer, "async_copy", 0)
  if asyn and t.stages < 2: return "asynchronous copies pipeline at least 2 stages"
  if not asyn and t.stages != 1: return "without asynchronous copies there is one stage"
  if (nb := t.stages * (t.bm + t.bn) * t.bk * itemsize) > renderer.shared_max:
    return f"{nb} bytes of shared memory, the device has {renderer.shared_max}"
  return None

# 128 threads of 8x8 (64 accumulators). 256 threads of 8x8 would have to fit 128 registers each for 2 blocks per SM:
# ptxas (CUDA 13, sm_90) spills there; 4 warps of 8x8 take ~180-200 registers, no spills, and 2 blocks fit an SM
PREFERRED = ((64, 128, 8, 8, 8), (128, 64, 8, 8, 8), (64, 64, 8, 8, 8), (64, 64, 16, 4, 4), (32, 64, 8, 4, 8), (64, 32, 8, 8, 4),
             (32, 32, 8, 4, 4))

def default_simt_tile(g, renderer) -> SimtTile | None:
  """The first preferred tile that divides the GEMM; where none does, the one with the least padded work."""
  stages = (3, 2) if getattr(renderer, "async_copy", 0) else (1,)
  fits = [SimtTile(bm, bn, bk, tm, tn, s) for bm, bn, bk, tm, tn in PREFERRED for s in stages]
  fits = [t for t in fits if valid_simt_tile(t, g, renderer) is None]
  for t in fits:
    if g.M % t.bm == 0 and g.N % t.bn == 0 and g.K % t.bk == 0: return t
  def work(t: SimtTile) -> int: return -(-g.M // t.bm) * t.bm * -(-g.N // t.bn) * t.bn * -(-g.K // t.bk) * t.bk
  return min(fits, key=work) if fits else None

def simt_candidates(k: UOp, renderer) -> list[SimtTile]:
  """The FMA tiles BEAM may try for kernel `k` (empty where it isn't a staged fp32 GEMM): the default first, then the
  others by how far they are from it."""
  if (g := simt_plan(k, renderer)) is None: return []
  stages = (2, 3, 4) if getattr(renderer, "async_copy", 0) else (1,)
  first = default_simt_tile(g, renderer)
  out = [SimtTile(bm, bn, bk, tm, tn, s, sw) for bm in (32, 64, 128) for bn in (32, 64, 128) for bk in (8, 16)
         for tm, tn in ((8, 8), (8, 4), (4, 8), (4, 4)) for s in stages for sw in (True, False)]
  out = [t for t in out if t != first and valid_simt_tile(t, g, renderer) is None]
  near = lambda t: (not t.swizzle, abs(t.bm * t.bn - 64 * 128), t.tm * t.tn != 64, t.bk != 8, abs(t.stages - 3))
  return ([first] if first else []) + sorted(out, key=near)

def _tile_from_env() -> SimtTile | None:
  if not SIMT_TILE.value: return None
  parts = str(SIMT_TILE.value).split(",")
  if len(parts) != 7 or not all(x.strip().isdigit() for x in parts):
    raise ValueError(f"SIMT_TILE={SIMT_TILE.value!r}: expected 7 integers BM,BN,BK,TM,TN,STAGES,SWIZZLE (like 128,128,8,8,8,3,1)")
  v = [int(x) for x in parts]
  return SimtTile(v[0], v[1], v[2], v[3], v[4], v[5], bool(v[6]))

def simt_plan(k: UOp, renderer):
  """The kernel's fp32 GEMM view where this renderer stages FMA GEMMs, else None."""
  from tinycore.codegen.gemm_view import match_dtype
  if not SMEM_GEMM or not getattr(renderer, "simt_staging", False): return None
  return match_dtype(k, renderer, dtypes.float32)

def _vector_store_width(k: UOp, g) -> int:
  """4 where 4 consecutive n's of the output are 4 consecutive, 4-aligned elements (then one vector store writes them),
  else 1: the unit-stride n axis innermost in the output, its extent, every other stride and the base multiples of 4,
  and the store ungated."""
  ind = k.src[0].src[0]
  if ind.src[0].dtype.base not in (dtypes.float32, dtypes.float16, dtypes.bfloat16): return 1
  if ind.op is not Ops.INDEX or len(ind.src) != 2 or (aff := affine(ind.src[1])) is None: return 1
  base, strides = aff
  inner = g.B.outer[-1]
  if strides.get(inner) != 1 or inner.src[0].arg % 4 or base % 4 or any(s % 4 for r, s in strides.items() if r is not inner): return 1
  return 4

def simt_gemm(k: UOp, renderer, tile: SimtTile | None = None) -> UOp | None:
  """The kernel as a shared-memory-staged FMA GEMM, or None where it doesn't apply."""
  if (g := simt_plan(k, renderer)) is None: return None
  from tinycore.codegen.gpudims import to_gpu_dims
  from tinycore.codegen.opt import _simplify
  t = tile or _tile_from_env() or default_simt_tile(g, renderer)
  if t is None: return None
  if (why := valid_simt_tile(t, g, renderer)) is not None: raise ValueError(f"SIMT tile {t}: {why}")
  red, A, B, M, N, K, din = g.red, g.A, g.B, g.M, g.N, g.K, dtypes.float32
  T, nk, TY, TX = t.threads, -(-K // t.bk), t.bm // t.tm, t.bn // t.tn
  t0 = UOp(Ops.RANGE, dtypes.index, (index_const(T * -(-N // t.bn)),), ("g", 1001))
  t1 = UOp(Ops.RANGE, dtypes.index, (index_const(-(-M // t.bm)),), ("g", 1000))
  tid, bm0, bn0 = t0 % T, t1 * t.bm, t0 // T * t.bn
  n_fast = B.kmajor
  ty, tx = (tid // TX, tid % TX) if n_fast else (tid % TY, tid // TY)
  kt = UOp(Ops.RANGE, dtypes.index, (index_const(nk),), red.src[1].arg)
  # only the fast operand read along k (8 lanes, 8 rows) needs the swizzle: the others' reads are broadcasts or 8
  # consecutive chunks of a row, conflict free as stored, and their addresses stay one register plus constants
  stg = Staging(g, t, din, tid, bm0, bn0, getattr(renderer, "async_copy", 0), (t.swizzle and not n_fast and not A.kmajor, False))
  bar, slot, extra = stg.pipeline(kt, nk)

  def rows_of(th: UOp, n_th: int, tile: int, block: int, interleaved: bool) -> list[UOp]:
    """The thread's `tile` outer coordinates in the block: row th + n_th*i, or runs of 4 spread evenly over the block."""
    if interleaved: return [th + n_th * i for i in range(tile)]
    return [th * 4 + (block // (tile // 4)) * (i // 4) + i % 4 for i in range(tile)]
  ms = rows_of(ty, TY, t.tm, t.bm, interleaved=not n_fast and not A.kmajor)
  ns = rows_of(tx, TX, t.tn, t.bn, interleaved=False)

  def operand(op, smem: UOp, outer: list[UOp], kb: int) -> list[list[UOp]]:
    """[outer i][k 0..3] for k block kb (4 k's): 16-byte reads along the outer axis (k-major panel) or along k."""
    def read(row, col) -> UOp:
      ind = UOp(Ops.INDEX, smem.dtype, (smem, stg.addr(op, slot, row, col)), ("vec", 4, 16))
      return UOp(Ops.LOAD, din.vec(4), (ind, bar))
    if not op.kmajor:
      vs = [read(o, 4 * kb) for o in outer]
      return [[UOp(Ops.GEP, din, (v,), (q,)) for q in range(4)] for v in vs]
    out: list[list[UOp]] = [[] for _ in outer]
    for r in range(0, len(outer), 4):   # a run of 4 consecutive outer coordinates (grouped rows)
      for q in range(4):
        v = read(4 * kb + q, outer[r])
        for e in range(4): out[r + e].append(UOp(Ops.GEP, din, (v,), (e,)))
    return out

  part: list[list[UOp | None]] = [[None] * t.tn for _ in range(t.tm)]
  for kb in range(t.bk // 4):
    av, bv = operand(A, stg.sa, ms, kb), operand(B, stg.sb, ns, kb)
    for q in range(4):
      for i in range(t.tm):
        for j in range(t.tn):
          a, b, p = av[i][q], bv[j][q], part[i][j]
          part[i][j] = UOp(Ops.MUL, din, (a, b)) if p is None else UOp(Ops.MULACC, din, (a, b, p), FMA_CHAIN)
  if not stg.asyn:   # the next step's copies overwrite the panels: every thread must have read them first
    extra.append(UOp(Ops.BARRIER, dtypes.void, tuple(x for row in part for x in row if x is not None)))

  def clamp(x: UOp, n: int, tile: int) -> UOp:   # a tail's padded rows read the epilogue's other inputs in bounds
    return x if n % tile == 0 else UOp(Ops.WHERE, dtypes.index, (UOp(Ops.CMPLT, dtypes.bool, (x, index_const(n))), x, index_const(n - 1)))
  width = _vector_store_width(k, g)
  out_ptr = k.src[0].src[0].src[0].dtype
  stores, outs = [], []
  for i in range(t.tm):
    for j0 in range(0, t.tn, width):
      group = []
      for j in range(j0, j0 + width):
        total = UOp(Ops.REDUCE, din, (part[i][j], kt), Ops.ADD)
        val = total if red.dtype == din else UOp(Ops.CAST, red.dtype, (total,))
        mm, nn = bm0 + ms[i], bn0 + ns[j]
        st = k.src[0].substitute({red: val, **split(clamp(mm, M, t.bm), A.outer), **split(clamp(nn, N, t.bn), B.outer)})
        outs.append((ms[i], ns[j], st.src[1]))
        if (sg := _both(_below(mm, M, t.bm), _below(nn, N, t.bn))) is not None:   # the tails' padded rows aren't stored
          ind = st.src[0]
          st = st.replace(src=(ind.replace(src=ind.src[:2] + (_both(ind.src[2], sg) if len(ind.src) == 3 else sg,)),) + st.src[1:])
        group.append(st)
      if width == 1: stores += group; continue
      # 4 consecutive, aligned outputs: one store (N is a multiple of 4, so the tail gate is the same for all 4)
      ind = group[0].src[0]
      vals = tuple(s.src[1] for s in group)
      vind = UOp(Ops.INDEX, ind.dtype, ind.src, ("vec", width, width * out_ptr.base.itemsize))
      stores.append(UOp(Ops.STORE, dtypes.void, (vind, UOp(Ops.VECTORIZE, vals[0].dtype.vec(width), vals))))
  if width == 1 and C_TILE:   # an output that runs along m (an NCHW conv's): 16-byte stores through the freed panels
    from tinycore.codegen.c_tile import staged_stores
    if (vs := staged_stores(k, g, t, stg.sa, stg.capacity, outs, tid, bm0, bn0)) is not None: stores = vs
  k = _simplify(k.replace(src=tuple(extra) + tuple(stores)))
  return to_gpu_dims(k, T, (T, 1))
