"""Shared-memory GEMM tiling for tensor-core matmuls (GPUs): a block of threads computes a BM x BN output tile, staging
BM x BK panels of A and BK x BN panels of B through shared memory, STAGES deep, while its warps (WARPS_M x WARPS_N, each
a (BM/WARPS_M) x (BN/WARPS_N) warp tile of tensor-core instruction tiles) read their fragments from it.

Everything is a parameter (a `GemmTile`, written as actions for BEAM: `gemm_actions`), and what the hardware offers is
a renderer capability, so one generator serves every GPU plugin:
- `renderer.async_copy` (bytes per asynchronous global->shared copy, 0 = none): with it (NVIDIA cp.async, sm_80+)
  the panels for step k+STAGES-1 are in flight while step k computes; copies are grouped (commit) and waited for
  (wait_group STAGES-2) before a barrier. Without it (AMD LDS, Metal threadgroup memory) each step copies
  synchronously with plain vector loads/stores between two barriers.
- `renderer.matrix_load` (a warp-cooperative fragment load from shared memory, NVIDIA ldmatrix): each lane gives one
  8-element row address, lanes receive the fragment layout; `.trans` when the panel is stored k-major. Without it
  fragments are gathered element by element with the TensorCore's `frags`.
Copies move `vector` elements (16 bytes) per thread and instruction, so global loads are 128-bit wide; shared panels
are stored row by row in 16-byte chunks, the chunk index XOR-swizzled by the row (`swizzle`) so that the 8 rows one
matrix load (or one 8-lane phase of a copy) touches land in 8 different 16-byte bank groups. The epilogue (bias,
activation, cast: whatever the kernel's store does to the reduce) runs on the accumulators in registers.

Which kernels qualify, and how their axes make up m, n and k (a convolution is an implicit GEMM), is gemm_view.py's:
there each operand also gets its copy width (16 bytes where its rows allow, down to single elements for an im2col
gather) and sizes that aren't tile multiples are padded (zero-filled copies, skipped stores).

Launch: dim 0 = thread + threads * (column block), dim 1 = row block, any other output axes stay grid dims."""
from __future__ import annotations
from dataclasses import dataclass, replace
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.helpers import ContextVar
from tinycore.codegen.gemm_view import Operand, split

SMEM_GEMM = ContextVar("SMEM_GEMM", 1)   # 0: tensor-core kernels read their fragments straight from global memory (opt_tc.py)
C_TILE = ContextVar("C_TILE", 1)   # 0: the epilogue stores straight from the accumulator registers (no 16-byte stores)
GEMM_TILE = ContextVar("GEMM_TILE", "")  # "BM,BN,BK,WARPS_M,WARPS_N,STAGES,SWIZZLE" instead of default_tile's choice
ASYNC_COMMIT, ASYNC_WAIT, ASYNC = "async_commit", "async_wait", "async"   # BARRIER / STORE args
LDMATRIX = "ldmatrix"                                                    # INDEX arg ("ldmatrix", matrices, trans)

@dataclass(frozen=True)
class GemmTile:
  bm: int = 128
  bn: int = 128
  bk: int = 32
  warps_m: int = 2
  warps_n: int = 4
  stages: int = 3
  swizzle: bool = True
  wave: int = 32   # lanes per warp: the tensor core's (AMD CDNA's MFMA: 64); not an action, the renderer's fact
  @property
  def threads(self) -> int: return self.wave * self.warps_m * self.warps_n

def gemm_actions(t) -> tuple:
  """The tile as optimization actions (what BEAM searches and caches); an FMA tile (opt_simt.SimtTile) says "simt"."""
  if not isinstance(t, GemmTile):
    return (("SMEM_TILE", "simt", (t.bm, t.bn, t.bk)), ("THREAD_TILE", "simt", (t.tm, t.tn)), ("STAGES", "simt", t.stages),
            ("SWIZZLE", "simt", int(t.swizzle)))
  return (("SMEM_TILE", "gemm", (t.bm, t.bn, t.bk)), ("WARPS", "gemm", (t.warps_m, t.warps_n)), ("STAGES", "gemm", t.stages),
          ("SWIZZLE", "gemm", int(t.swizzle)))

GEMM_ACTIONS = ("SMEM_TILE", "WARPS", "THREAD_TILE", "STAGES", "SWIZZLE")

def is_gemm(opts) -> bool: return bool(opts) and isinstance(opts[0], tuple) and bool(opts[0]) and opts[0][0] in GEMM_ACTIONS

def tile_from_actions(opts: tuple):
  """The GemmTile (or, for "simt" actions, opt_simt.SimtTile) that actions describe; InvalidOpt for anything malformed
  (a cached entry is untrusted input)."""
  from tinycore.codegen.opt import InvalidOpt
  kw: dict = {}
  def ints(x, n: int) -> tuple:
    if not (isinstance(x, tuple) and len(x) == n and all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 4096 for v in x)):
      raise InvalidOpt(f"GEMM action argument {x!r}: expected {n} positive integers")
    return x
  simt = bool(opts) and isinstance(opts[0], tuple) and len(opts[0]) == 3 and opts[0][1] == "simt"
  for o in opts:
    if not (isinstance(o, tuple) and len(o) == 3 and o[0] in GEMM_ACTIONS): raise InvalidOpt(f"not a GEMM tiling action: {o!r}")
    kind, what, arg = o
    if what != ("simt" if simt else "gemm") or kind == ("WARPS" if simt else "THREAD_TILE"): raise InvalidOpt(f"mixed GEMM tiling actions: {opts!r}")
    if kind == "SMEM_TILE": kw.update(zip(("bm", "bn", "bk"), ints(arg, 3)))
    elif kind == "WARPS": kw.update(zip(("warps_m", "warps_n"), ints(arg, 2)))
    elif kind == "THREAD_TILE": kw.update(zip(("tm", "tn"), ints(arg, 2)))
    elif kind == "STAGES": kw["stages"] = ints((arg,), 1)[0]
    elif not isinstance(arg, int) or arg not in (0, 1): raise InvalidOpt(f"SWIZZLE takes 0 or 1, got {arg!r}")
    else: kw["swizzle"] = bool(arg)
  if simt:
    from tinycore.codegen.opt_simt import SimtTile
    return SimtTile(**kw)
  return GemmTile(**kw)

def check_gemm_actions(k: UOp, renderer, opts: tuple) -> GemmTile:
  """The tile, after checking that the actions fit kernel `k` on `renderer` (InvalidOpt otherwise)."""
  from tinycore.codegen.opt import InvalidOpt
  t = tile_from_actions(opts)
  if not isinstance(t, GemmTile):
    from tinycore.codegen.opt_simt import simt_plan, valid_simt_tile
    if (gs := simt_plan(k, renderer)) is None: raise InvalidOpt("FMA GEMM actions on a kernel that isn't a shared-memory fp32 matmul")
    if (why := valid_simt_tile(t, gs, renderer)) is not None: raise InvalidOpt(f"SIMT tile {t}: {why}")
    return t
  if (g := _plan(k, renderer)) is None: raise InvalidOpt("GEMM actions on a kernel that isn't a shared-memory tensor-core matmul")
  t = replace(t, wave=g.tc.threads)
  if (why := _valid(t, g, renderer)) is not None: raise InvalidOpt(f"GEMM tile {t}: {why}")
  return t

def _const(x: UOp) -> int | None:
  from tinycore.codegen.opt import _simplify
  x = _simplify(x)
  return x.arg if x.op is Ops.CONST else None

def _swizzled(row: UOp, col: UOp, cols: int, vec: int, swizzle: bool) -> UOp:
  """Element offset of (row, col) in a panel of `cols` columns stored in `vec`-element chunks: chunk c of row r sits at
  c ^ f(r). f spreads 8 consecutive rows over 8 distinct 16-byte bank groups: with C chunks a row, rows r and r+8/C
  share a group unswizzled, so f(r) = (r // (8/C)) % C (C < 8), r % 8 (C >= 8)."""
  nch = cols // vec
  row, col = (index_const(x) if isinstance(x, int) else x for x in (row, col))   # a fragment coordinate may be a plain int
  if not swizzle or nch == 1: return row * cols + col
  f = (row // (8 // nch)) % nch if nch < 8 else row % 8
  return row * cols + ((col // vec) ^ f) * vec + col % vec

def bank_conflict_ways(rows: list[int], col: int, cols: int, vec: int, swizzle: bool, elem_bytes: int = 2) -> int:
  """How many 16-byte accesses (one per row, at column `col`) share a bank group: 1 is conflict-free. For tests and
  BEAM's cost model; the same address function the kernel uses, on Python ints."""
  nch = cols // vec
  def off(r):
    if not swizzle or nch == 1: return r * cols + col
    f = (r // (8 // nch)) % nch if nch < 8 else r % 8
    return r * cols + ((col // vec) ^ f) * vec + col % vec
  groups = [(off(r) * elem_bytes // 16) % 8 for r in rows]
  return max(groups.count(g) for g in set(groups))

def valid_tile(t: GemmTile, M: int, N: int, K: int, renderer, vec: int, itemsize: int, dims=(16, 8, 16),
               copy: tuple[int, int] | None = None) -> str | None:
  """Why `t` doesn't fit (a sentence), or None. `dims`: the tensor-core instruction's (M0, N0, K0); `copy`: elements per
  copy of A and B (default a 16-byte chunk each). Sizes need not be multiples of the tile (the tails are gated)."""
  M0, N0, K0 = dims
  # a GEMM more than half padding in a dimension (a decode step's single row) is better served by other kernels
  if t.bm > 2 * M or t.bn > 2 * N or t.bk > 2 * K: return f"tile {t.bm}x{t.bn}x{t.bk} is more than twice the {M}x{N}x{K} GEMM in a dimension"
  if t.bk % K0 or t.bm % (M0 * t.warps_m) or t.bn % (N0 * t.warps_n): return f"warp tiles must be whole {M0}x{N0}x{K0} instructions"
  if t.threads > (renderer.local_max or (1024,))[0]: return f"{t.threads} threads is more than a block may have"
  for (rows, cols), cv in zip(((t.bm, t.bk), (t.bn, t.bk)), copy or (vec, vec)):
    if (rows * cols) % (cv * t.threads): return f"the {rows}x{cols} panel doesn't split into whole {cv}-element copies per thread"
  if any(c % vec or (c // vec) & (c // vec - 1) for c in (t.bm, t.bn, t.bk)): return "panel rows must be a power of two of 16-byte chunks"
  if getattr(renderer, "async_copy", 0) and t.stages < 2: return "asynchronous copies pipeline at least 2 stages"
  if not getattr(renderer, "async_copy", 0) and t.stages != 1: return "without asynchronous copies there is one stage"
  if (nb := smem_bytes(t, itemsize)) > renderer.shared_max: return f"{nb} bytes of shared memory, the device has {renderer.shared_max}"
  return None

def smem_bytes(t: GemmTile, itemsize: int) -> int: return t.stages * (t.bm + t.bn) * t.bk * itemsize

DEFAULT_SMEM = 48 * 1024
PREFERRED = ((128, 128, 2, 4), (128, 64, 2, 2), (64, 128, 2, 2), (64, 64, 2, 2), (32, 64, 1, 2), (32, 32, 1, 2), (16, 32, 1, 2), (16, 16, 1, 2))

def default_tile(M: int, N: int, K: int, renderer, vec: int, itemsize: int, dims=(16, 8, 16), copy: tuple[int, int] | None = None,
                 wave: int = 32) -> GemmTile | None:
  """The biggest preferred tile (128x128x32 on 8 warps, 3 stages where copies are asynchronous) that divides the GEMM;
  where none does, the one that computes the fewest padded elements (ties: the bigger)."""
  stages = 3 if getattr(renderer, "async_copy", 0) else 1
  # narrow copies (an im2col gather) cost registers for their addresses: 4 warps, so 2 blocks/SM still fit without spills
  # so do fp8 fragments (sm_90 has no fp8 mma.sync of its own: ptxas widens each fragment to half pairs for two HMMAs)
  prefs = PREFERRED if min(copy or (vec,)) == vec and itemsize > 1 else PREFERRED[1:3] + PREFERRED[:1] + PREFERRED[3:]
  # 64-byte panel rows: bk 32 of 16-bit elements, 64 of 8-bit ones (fp8's k32 instruction), then half that
  bks = (64, 32) if itemsize == 1 else (32, 16)
  fits = [GemmTile(bm, bn, bk, wm, wn, s, True, wave) for bm, bn, wm, wn in prefs for bk in bks for s in ((stages, 2) if stages > 1 else (1,))]
  # the default panels stay within 48 KB (two blocks fit an SM of any GPU with 100 KB+); BEAM may try up to shared_max
  fits = [t for t in fits if valid_tile(t, M, N, K, renderer, vec, itemsize, dims, copy) is None and smem_bytes(t, itemsize) <= DEFAULT_SMEM]
  for t in fits:
    if M % t.bm == 0 and N % t.bn == 0 and K % t.bk == 0: return t
  def work(t: GemmTile) -> int: return -(-M // t.bm) * t.bm * -(-N // t.bn) * t.bn * -(-K // t.bk) * t.bk
  return min(fits, key=work) if fits else None   # min keeps the first (biggest preferred) of equal work

def _valid(t: GemmTile, g, renderer) -> str | None:
  return valid_tile(replace(t, wave=g.tc.threads), g.M, g.N, g.K, renderer, g.vec, g.tc.dtype_in.itemsize, g.tc.dims, (g.A.copy, g.B.copy))

def _default(g, renderer) -> GemmTile | None:
  return default_tile(g.M, g.N, g.K, renderer, g.vec, g.tc.dtype_in.itemsize, g.tc.dims, (g.A.copy, g.B.copy), g.tc.threads)

def gemm_candidates(k: UOp, renderer) -> list:
  """The tiles BEAM may try for kernel `k` (empty when it isn't a shared-memory GEMM; FMA tiles for an fp32 one)."""
  if (g := _plan(k, renderer)) is None:
    from tinycore.codegen.opt_simt import simt_candidates
    return simt_candidates(k, renderer)
  stages = (2, 3, 4) if getattr(renderer, "async_copy", 0) else (1,)
  # 4 or 8 warps; the default first, then the others by how far their block tile is from it
  first = _default(g, renderer)
  out = [GemmTile(bm, bn, bk, wm, wn, s, sw, g.tc.threads) for bm in (64, 128, 256) for bn in (64, 128, 256) for bk in (32, 64, 16)
         for wm, wn in ((2, 2), (2, 4), (4, 2), (1, 4)) for s in stages for sw in (True, False)]
  out = [t for t in out if t != first and _valid(t, g, renderer) is None]
  near = lambda t: (not t.swizzle, abs(t.bm * t.bn - 128 * 128), t.bk != 32, abs(t.stages - 3))
  return ([first] if first else []) + sorted(out, key=near)

def _plan(k: UOp, renderer):
  from tinycore.codegen.opt_tc import TC
  from tinycore.codegen.gemm_view import match
  return match(k, renderer) if TC else None

def _below(x: UOp, n: int, tile: int) -> UOp | None: return None if n % tile == 0 else UOp(Ops.CMPLT, dtypes.bool, (x, index_const(n)))
def _both(x: UOp | None, y: UOp | None) -> UOp | None: return x if y is None else y if x is None else UOp(Ops.AND, dtypes.bool, (x, y))

class Staging:
  """The shared panels of a GEMM's operands and this thread's copies into them, pipelined: the part the tensor-core
  (here) and the FMA (opt_simt.py) kernels share. `t` has bm, bn, bk, stages, swizzle and threads; `tid` is the
  thread's index in its block, `bm0`/`bn0` the block's first row and column; `swizzle` (A's, B's) where a panel's
  reads need it differently from `t.swizzle` (an unswizzled panel's addresses are one register plus constants)."""
  def __init__(self, g, t, din, tid: UOp, bm0: UOp, bn0: UOp, asyn: int, swizzle: tuple[bool, bool] | None = None):
    self.g, self.t, self.din, self.tid, self.bm0, self.bn0, self.asyn = g, t, din, tid, bm0, bn0, asyn
    self.swizzle = swizzle or (t.swizzle, t.swizzle)
    S = t.stages
    (ra, ca), (rb, cb) = self.shape(g.A, t.bm), self.shape(g.B, t.bn)
    # one buffer, A's stages then B's: after the k loop the epilogue may stage the C tile across both (c_tile.py)
    self.b_at, self.capacity = S * ra * ca, S * (ra * ca + rb * cb)
    self.sa = self.sb = UOp(Ops.DEFINE_LOCAL, din.ptr(self.capacity, "local"), (), 0)

  def shape(self, op: Operand, outer: int) -> tuple[int, int]:
    """A panel is BK x outer (k rows) where the operand is k-major, else outer x BK."""
    return (self.t.bk, outer) if op.kmajor else (outer, self.t.bk)

  def addr(self, op: Operand, slot, row, col) -> UOp:
    rows, cols = self.shape(op, self.t.bm if op is self.g.A else self.t.bn)
    at = _swizzled(row, col, cols, self.g.vec, self.swizzle[op is self.g.B]) + slot * (rows * cols)
    return at + self.b_at if op is self.g.B else at

  def copies(self, step, slot, gate, after) -> list[UOp]:
    """This thread's share of the copies (16 bytes where the operand's rows allow) of both panels for k step `step`
    into stage `slot`; `gate` (a bool UOp) skips them past the last step. The source is the operand's index with its
    m (n) and k axes split out of the flat panel coordinates: implicit im2col. Elements past M (N), K or outside a
    padding gate read as zero (cp.async's zero-fill form: source size 0)."""
    g, t, din, tid, T = self.g, self.t, self.din, self.tid, self.t.threads
    if gate is not None and (c := _const(gate)) is not None:
      if not c: return []
      gate = None
    out = []
    for op, smem, o0, outer, n_out in ((g.A, self.sa, self.bm0, t.bm, g.M), (g.B, self.sb, self.bn0, t.bn, g.N)):
      rows, cols = self.shape(op, outer)
      cv = op.copy
      ncp = cols // cv
      ind = op.load.src[0]
      for i in range(rows * cols // (cv * T)):
        c = tid + T * i
        # element gathers (an im2col operand) walk down the rows: a thread keeps one m (n) row, so the split of its
        # flat index into axes is computed once, and only k's varies with the step
        row, col = (c % rows, c // rows) if cv == 1 else (c // ncp, c % ncp * cv)
        o, kk = (col, row) if op.kmajor else (row, col)
        at = {**split(o0 + o, op.outer), **split(step * t.bk + kk, g.kaxes)}
        lgate = _both(_both(ind.src[2].substitute(at) if len(ind.src) == 3 else None, _below(o0 + o, n_out, outer)),
                      _below(step * t.bk + kk, g.K, t.bk))
        lgate = _both(lgate, gate)   # past the last step nothing is read either
        varg = ("vec", cv) if cv > 1 else None
        src = UOp(Ops.INDEX, ind.dtype, (ind.src[0], ind.src[1].substitute(at)) + ((lgate,) if lgate is not None else ()), varg)
        val = UOp(Ops.LOAD, din.vec(cv) if cv > 1 else din, (src,))
        dst = UOp(Ops.INDEX, smem.dtype, (smem, self.addr(op, slot, row, col)) + ((gate,) if gate is not None else ()), varg)
        # cp.async moves 4, 8 or 16 bytes: a 2-byte element goes through a register
        out.append(UOp(Ops.STORE, dtypes.void, (dst, val) + after, ASYNC if self.asyn and cv * din.itemsize >= 4 else None))
    return out

  def pipeline(self, kt: UOp, nk: int) -> tuple[UOp, UOp, list[UOp]]:
    """(the barrier after which k step `kt`'s panels may be read, the stage they are in, the copies and barriers no
    store reaches). With asynchronous copies stages 0..S-2 are in flight before the loop; step kt waits for its group,
    then issues step kt+S-1. Without, each step copies between two barriers (the caller adds the second, after its
    reads)."""
    S, extra = self.t.stages, list[UOp]()
    if not self.asyn:
      return UOp(Ops.BARRIER, dtypes.void, tuple(self.copies(kt, index_const(0), None, ()))), index_const(0), extra
    commit = None
    for s in range(S - 1):
      cps = self.copies(index_const(s), index_const(s), None, ()) if s < nk else []
      commit = UOp(Ops.BARRIER, dtypes.void, tuple(cps) + ((commit,) if commit is not None else ()), (ASYNC_COMMIT,))
    ready = UOp(Ops.BARRIER, dtypes.void, (commit, kt), (ASYNC_WAIT, S - 2))
    bar = UOp(Ops.BARRIER, dtypes.void, (ready,))
    nxt = kt + (S - 1)
    cps = self.copies(nxt, nxt % S, UOp(Ops.CMPLT, dtypes.bool, (nxt, index_const(nk))), (bar,))
    extra.append(UOp(Ops.BARRIER, dtypes.void, tuple(cps) + (kt,), (ASYNC_COMMIT,)))   # once per step, even when empty
    return bar, kt % S, extra

def smem_gemm(k: UOp, renderer, tile=None) -> UOp | None:
  """The kernel as a shared-memory-staged tensor-core GEMM, or None where it doesn't apply (then opt_tc.py's). An FMA
  tile (BEAM's choice for an fp32 matmul) builds opt_simt.py's kernel."""
  if tile is not None and not isinstance(tile, GemmTile):
    from tinycore.codegen.opt_simt import simt_gemm
    return simt_gemm(k, renderer, tile)
  if not SMEM_GEMM or not getattr(renderer, "shared_staging", False) or (g := _plan(k, renderer)) is None: return None
  from tinycore.codegen.gpudims import to_gpu_dims
  from tinycore.codegen.opt import _simplify
  tc, red, A, B = g.tc, g.red, g.A, g.B
  din, dout = tc.dtype_in, tc.dtype_out
  M, N, K = g.M, g.N, g.K
  if tile is None and GEMM_TILE.value:
    parts = str(GEMM_TILE.value).split(",")
    if len(parts) != 7 or not all(x.strip().isdigit() for x in parts):
      raise ValueError(f"GEMM_TILE={GEMM_TILE.value!r}: expected 7 integers BM,BN,BK,WARPS_M,WARPS_N,STAGES,SWIZZLE (like 128,128,32,2,4,3,1)")
    v = [int(x) for x in parts]
    tile = GemmTile(v[0], v[1], v[2], v[3], v[4], v[5], bool(v[6]))
  t = tile or _default(g, renderer)
  if t is None: return None
  t = replace(t, wave=tc.threads)
  if (why := _valid(t, g, renderer)) is not None: raise ValueError(f"GEMM tile {t}: {why}")
  M0, N0, K0 = tc.dims
  # ldmatrix moves 8 rows of 16 bytes, 4 bytes to a lane: m16n8k16's 16-bit fragments and, byte for byte, m16n8k32's
  # 8-bit ones (fp8) where the panel is k-contiguous; .trans swaps 16-bit elements, so a k-major 8-bit panel (and any
  # other shape) is gathered element by element
  asyn = getattr(renderer, "async_copy", 0)
  mload = getattr(renderer, "matrix_load", False) and (tc.dims, din.itemsize) in (((16, 8, 16), 2), ((16, 8, 32), 1))
  def ldmatrix(op: Operand) -> bool: return mload and (din.itemsize == 2 or not op.kmajor)
  T, nk = t.threads, -(-K // t.bk)
  fa, fb, fc = tc.frags
  # block and thread ids: dim 0 = thread + T * column block, dim 1 = row block
  t0 = UOp(Ops.RANGE, dtypes.index, (index_const(T * -(-N // t.bn)),), ("g", 1001))
  t1 = UOp(Ops.RANGE, dtypes.index, (index_const(-(-M // t.bm)),), ("g", 1000))
  tid, bm0, bn0 = t0 % T, t1 * t.bm, t0 // T * t.bn
  lane, warp = tid % t.wave, tid // t.wave
  wtm, wtn = t.bm // t.warps_m, t.bn // t.warps_n
  wrow, wcol = warp // t.warps_n * wtm, warp % t.warps_n * wtn
  kt = UOp(Ops.RANGE, dtypes.index, (index_const(nk),), red.src[1].arg)
  stg = Staging(g, t, din, tid, bm0, bn0, asyn)
  sa, sb, addr = stg.sa, stg.sb, stg.addr
  bar, slot, extra = stg.pipeline(kt, nk)

  def frag(op: Operand, smem: UOp, tiles0: UOp, s: int, j: int, is_a: bool) -> UOp:
    """This lane's A (M0 x K0) or B (K0 x N0) fragment for k step s (of K0) of instruction tile j."""
    n_el = tc.elements_per_thread[0 if is_a else 1]
    if ldmatrix(op):
      # A: four 8-row matrices at (outer, k) offsets (0,0) (8,0) (0,h) (8,h); B: two at (0,0) (0,h), h = K0/2 (a 16-byte
      # row); lane l gives row l%8 of matrix l//8 (x2 reads lanes 0-15's addresses: the others repeat them)
      mats, ln, h = ((4, lane) if is_a else (2, lane % 16)) + (K0 // 2,)
      mat, i8 = ln // 8, ln % 8
      oo, ko = ((mat % 2) * 8, (mat // 2) * h) if is_a else (index_const(0), mat * h)
      o, kk = tiles0 + (16 if is_a else 8) * j + oo, K0 * s + ko
      row, col = (kk + i8, o) if op.kmajor else (o + i8, kk)
      ind = UOp(Ops.INDEX, smem.dtype, (smem, addr(op, slot, row, col)), (LDMATRIX, mats, op.kmajor))
      return UOp(Ops.LOAD, din.vec(n_el), (ind, bar))
    els = []
    for e in range(n_el):
      if is_a: ro, co = fa(lane, e); o, kk = tiles0 + M0 * j + ro, K0 * s + co
      else: rk, cn = fb(lane, e); o, kk = tiles0 + N0 * j + cn, K0 * s + rk
      row, col = (kk, o) if op.kmajor else (o, kk)
      els.append(UOp(Ops.LOAD, din, (UOp(Ops.INDEX, smem.dtype, (smem, addr(op, slot, row, col))), bar)))
    return UOp(Ops.VECTORIZE, din.vec(n_el), tuple(els))

  wm, wn, ec = wtm // M0, wtn // N0, tc.elements_per_thread[2]
  zero = UOp(Ops.VECTORIZE, dout.vec(ec), tuple(UOp.const(dout, 0) for _ in range(ec)))
  acc = [[zero] * wn for _ in range(wm)]
  frag_loads = []
  for s in range(t.bk // K0):
    afr = [frag(A, sa, wrow, s, i, True) for i in range(wm)]
    bfr = [frag(B, sb, wcol, s, j, False) for j in range(wn)]
    frag_loads += afr + bfr
    acc = [[UOp(Ops.WMMA, dout.vec(ec), (afr[i], bfr[j], acc[i][j]), (tc.name, tc.dims)) for j in range(wn)] for i in range(wm)]
  if not asyn:   # the next step's copies overwrite the panels: every warp must have read them first
    extra.append(UOp(Ops.BARRIER, dtypes.void, tuple(frag_loads)))
  def clamp(x: UOp, n: int, tile: int) -> UOp:   # a tail's padded rows read the epilogue's other inputs in bounds
    return x if n % tile == 0 else UOp(Ops.WHERE, dtypes.index, (UOp(Ops.CMPLT, dtypes.bool, (x, index_const(n))), x, index_const(n - 1)))
  stores, outs = [], []
  for i in range(wm):
    for j in range(wn):
      for e in range(ec):
        total = UOp(Ops.REDUCE, dout, (UOp(Ops.GEP, dout, (acc[i][j],), (e,)), kt), Ops.ADD)
        val = total if red.dtype == dout else UOp(Ops.CAST, red.dtype, (total,))
        rc, cc = fc(lane, e)
        mm, nn = bm0 + wrow + M0 * i + rc, bn0 + wcol + N0 * j + cc
        st = k.src[0].substitute({red: val, **split(clamp(mm, M, t.bm), A.outer), **split(clamp(nn, N, t.bn), B.outer)})
        outs.append((wrow + M0 * i + rc, wcol + N0 * j + cc, st.src[1]))
        if (sg := _both(_below(mm, M, t.bm), _below(nn, N, t.bn))) is not None:   # the tails' padded rows aren't stored
          ind = st.src[0]
          st = st.replace(src=(ind.replace(src=ind.src[:2] + (_both(ind.src[2], sg) if len(ind.src) == 3 else sg,)),) + st.src[1:])
        stores.append(st)
  # 16-byte stores through the (now free) panels where the output allows, else 2 outputs per lane from registers
  from tinycore.codegen.c_tile import staged_stores
  nbytes = min(16, getattr(renderer, "copy_bytes", 16))
  if C_TILE and getattr(renderer, "staged_epilogue", True):
    if (vs := staged_stores(k, g, t, sa, stg.capacity, outs, tid, bm0, bn0, nbytes)) is not None: stores = vs
  # the copies and barriers reached from no store go first: the linearizer then emits what they read from outside the
  # k loop before it (and, inside it, issues the next step's copies as soon as the barrier allows)
  k = _simplify(k.replace(src=tuple(extra) + tuple(stores)))
  return to_gpu_dims(k, T, (T, 1))
