"""Fused flash attention forward on warp tensor cores (renderer capability `attention_tensor_cores`).

The node is CUSTOM(q, k, v) with arg AttentionTCArg (tensor_attention.py builds it): q (..., Sq, D), k (..., Sk, D) and
v (..., Sk, Dv), all in the tensor core's 16-bit input dtype and contiguous; the output (..., Sq, Dv) is in that dtype,
or float32 (..., Sq, Dv + 1) with each row's natural log-sum-exp of the scaled scores in the last column when a
backward pass will want it.

One block of `warps` (4) warps per (batch entry, query block of `block_q` rows); each warp owns block_q / warps rows,
one or two m16 tiles (default_blocks: two at D = 64, so every K/V fragment feeds two mma):
- its Q fragments are loaded once into registers (the A operand of every S = Q K^T step);
- K and V tiles of `block_k` keys are staged in shared memory by asynchronous 16-byte copies, two stages deep (tile
  t+1 is in flight while tile t computes), rows XOR-swizzled by 16-byte chunk so the fragment loads (one matrix load
  per 8x8 block, V's transposed) are free of bank conflicts;
- S = Q K^T by tensor-core instructions; the online softmax runs on the accumulator registers: each row's max and sum
  across the lanes that share the row by warp shuffles, scores kept in base 2 (scale * log2 e folded into one
  multiply-add before each exp2);
- P is rounded to the input dtype in registers and is directly the A operand of O += P V (the accumulator layout of
  two n-tiles is the A layout of one k step: checked from the tensor core's fragment functions, not assumed), the
  rescale by 2^(m_old - m_new) is folded into that instruction's C operand;
- at the end O / l is written to shared memory and leaves in 16-byte stores.
Key tiles entirely visible to every row of the block run without mask arithmetic; the rest (a causal diagonal, the
tail past Sk) in a second loop with it. Causal blocks are launched heaviest first. Nothing here names a device: the
fragment layouts, warp size and instructions come from the renderer's TensorCore and its rendering of WMMA, ldmatrix
(INDEX arg LDMATRIX), cp.async (STORE arg ASYNC) and warp shuffles (CUSTOM arg (WARP_XOR, mask))."""
from __future__ import annotations
import math
from dataclasses import dataclass
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes, DType
from tinycore.helpers import prod
from tinycore.codegen.attention import _Program, _f, _alu, _max, _tree, _global
from tinycore.codegen.opt_smem import ASYNC, ASYNC_COMMIT, ASYNC_WAIT, LDMATRIX, _swizzled

WARP_XOR = "warp_xor"   # CUSTOM arg (WARP_XOR, mask): the value of lane (this lane ^ mask) of the same warp
HEAD_DIMS = (64, 128)

@dataclass(frozen=True)
class AttentionTCArg:
  prefix = "attn_tc_"          # kernel name (a class constant, not a field)
  out_shape: tuple[int, ...]   # (..., Sq, Dv), or (..., Sq, Dv + 1) float32 with the log-sum-exp column
  causal: bool                 # key j is visible to query i only when j <= i (top-left aligned, as torch)
  scale: float                 # > 0 (the running max is kept scaled)
  with_lse: bool
  block_q: int = 64            # query rows per block: `warps` warps of block_q / warps rows (m16 tiles)
  block_k: int = 64            # keys per staged tile
  warps: int = 4

def default_blocks(d: int) -> tuple[int, int]:
  """(block_q, block_k) for head dim d: at D = 64 each warp takes two m16 tiles (32 rows), so every K and V fragment it
  loads from shared memory feeds two mma (half the shared-memory traffic per mma); at D = 128 the registers (64 O
  accumulators, 32 for Q's fragments per m16 tile) leave one tile per warp."""
  return (128, 64) if d <= 64 else (64, 64)

def warp_xor(x: UOp, mask: int) -> UOp: return UOp(Ops.CUSTOM, x.dtype, (x,), (WARP_XOR, mask))

def _i(x: int) -> UOp: return index_const(x)
def _imin(a: UOp, b: UOp) -> UOp: return a.lt(b).where(a, b)

def tensor_core_for(renderer, din: DType):
  """The renderer's m16n8k16 tensor core for `din` inputs with float32 accumulation, or None."""
  return next((t for t in getattr(renderer, "tensor_cores", None) or [] if t.dims == (16, 8, 16) and t.dtype_in == din
               and t.dtype_out == dtypes.float32 and t.frags is not None), None)

def layout_plan(tc) -> tuple[list[tuple[int, int]], list[int], tuple[int, ...]] | None:
  """From the fragment functions: for each A element of a k step, (which of the two score n-tiles, its accumulator
  element), the same for every lane; each accumulator element's row (0 or 1: the lane's two rows); the lane masks whose
  XOR keeps a lane's rows (the lanes a row is spread over). None where the layout isn't like that."""
  (_, N0, K0), T = tc.dims, tc.threads
  fa, _, fc = tc.frags
  ea, _, ec = tc.elements_per_thread
  if K0 != 2 * N0: return None
  p_src = []
  for i in range(ea):
    srcs = set()
    for ln in range(T):
      r, c = fa(ln, i)
      es = [e for e in range(ec) if fc(ln, e) == (r, c % N0)]
      if len(es) != 1: return None
      srcs.add((c // N0, es[0]))
    if len(srcs) != 1: return None
    p_src.append(srcs.pop())
  rows0 = [sorted({fc(ln, e)[0] for e in range(ec)}) for ln in range(T)]
  if any(len(r) != 2 for r in rows0): return None
  row_of = [rows0[0].index(fc(0, e)[0]) for e in range(ec)]
  if any(rows0[ln].index(fc(ln, e)[0]) != row_of[e] for ln in range(T) for e in range(ec)): return None
  masks = tuple(m for m in (1, 2, 4, 8, 16) if m < T and all(rows0[ln] == rows0[ln ^ m] for ln in range(T)))
  sharing = [sum(rows0[x] == rows0[ln] for x in range(T)) for ln in range(T)]
  if any(s != 1 << len(masks) for s in sharing): return None   # the XOR masks must reach every lane sharing the rows
  return p_src, row_of, masks

def attention_tc_flops(ast: UOp) -> int:
  node = ast.src[0]
  a: AttentionTCArg = node.arg
  *batch, sq, d = node.src[0].shape
  sk, dv = node.src[2].shape[-2:]
  visible = sum(min(i + 1, sk) for i in range(sq)) if a.causal else sq * sk
  return 2 * prod(batch) * visible * (d + dv)

def attention_tc_program(ast: UOp, renderer) -> list[UOp]:
  node = ast.src[0]
  a: AttentionTCArg = node.arg
  qb, kb, vb = (_global(x) for x in node.src)
  din = node.src[0].dtype.scalar()
  *batch, sq, d = node.src[0].shape
  sk, dv = node.src[2].shape[-2:]
  tc = tensor_core_for(renderer, din)
  if tc is None or (plan := layout_plan(tc)) is None: raise ValueError(f"{renderer!r} has no m16n8k16 {din.name} tensor core for attention")
  p_src, row_of, masks = plan
  (M0, N0, K0), WS = tc.dims, tc.threads
  fa, _, fc = tc.frags
  ea, eb, ec = tc.elements_per_thread
  BQ, BK = a.block_q, a.block_k
  T, MT = WS * a.warps, BQ // (M0 * a.warps)   # threads; m16 tiles per warp
  if MT < 1 or BQ % (M0 * a.warps): raise ValueError(f"attention_tc: {BQ} query rows don't split into {a.warps} warps of m16 tiles")
  VEC = 16 // din.itemsize                  # elements per 16-byte copy
  # the address arithmetic below relies on rows of 8+ chunks and on copy rows that advance by multiples of 8
  if any(c % VEC or c // VEC < 8 or T % (c // VEC) or (T // (c // VEC)) % 8 for c in (d, dv)) or BK % K0:
    raise ValueError(f"attention_tc: head dims {d}/{dv} don't fit {T} threads and {VEC}-element chunks")
  bh, nqb = prod(batch), -(-sq // BQ)
  f32 = dtypes.float32
  odt = f32 if a.with_lse else din
  ocols = dv + (1 if a.with_lse else 0)
  out = UOp(Ops.DEFINE_GLOBAL, odt.ptr(prod(a.out_shape)), (), 0)
  P = _Program()
  for buf in (out, qb, kb, vb): P.emit(buf)   # declared up front (k and v may be one buffer)
  # K's two stages, then V's: 2 * BK * (d + dv) elements
  smem = P.emit(UOp(Ops.DEFINE_LOCAL, din.ptr(2 * BK * (d + dv), "local"), (), 0))
  t0 = P.emit(UOp(Ops.SPECIAL, dtypes.index, (_i(T * bh * nqb),), ("gidx0", T)))
  tid, blk = t0 % T, t0 // T
  # the heaviest (last, under a causal mask) query block of every batch entry first: the tail of the launch is short work
  qblk = (_i(nqb - 1) - blk // bh) if a.causal else blk // bh
  b, q0 = blk % bh, qblk * BQ
  lane, warp = tid % WS, tid // WS
  row0 = [q0 + warp * (M0 * MT) + M0 * mi for mi in range(MT)]   # each m16 tile's first row
  c2 = a.scale * 1.4426950408889634         # scores in base 2
  # Q fragments for every k step of D, in registers for the whole kernel (rows past Sq read the last row: never stored)
  qf: list[list[UOp]] = [[] for _ in range(MT)]
  for mi in range(MT):
    for ks in range(d // K0):
      els = []
      for i in range(ea):
        r, c = fa(lane, i)
        row = _imin(row0[mi] + r, _i(sq - 1))
        els.append(UOp(Ops.LOAD, din, (UOp(Ops.INDEX, qb.dtype, (qb, b * (sq * d) + row * d + (ks * K0 + c))),)))
      qf[mi].append(P.emit(UOp(Ops.VECTORIZE, din.vec(ea), tuple(els))))
  # key tiles: all up to the block's last real row (causal) or all keys; the first `nfull` need no mask
  last = _imin(q0 + BQ, _i(sq))
  kv_end = _imin(last, _i(sk)) if a.causal else _i(sk)
  ntiles = P.emit((kv_end + (BK - 1)) // BK)
  nfull = P.emit(_imin((q0 + 1) // BK, _i(sk // BK)) if a.causal else _i(sk // BK))

  def copies(tile: UOp, gate: UOp | None) -> list[UOp]:
    """This thread's 16-byte copies of K and V rows [tile*BK, +BK) into stage tile % 2; keys past Sk are zero-filled."""
    slot, cps = tile % 2, []
    for buf, cols, base in ((kb, d, 0), (vb, dv, 2 * BK * d)):
      nch = cols // VEC
      # thread tid copies chunk tid % nch of rows tid // nch + (T / nch) i: the swizzle (row % 8) is the thread's alone
      rl, cl = tid // nch, tid % nch
      for i in range(BK * nch // T):
        row, col = rl + (T // nch) * i, cl * VEC
        key = tile * BK + row
        kgate = key.lt(_i(sk)) if sk % BK else None
        if gate is not None: kgate = gate if kgate is None else _alu(Ops.AND, dtypes.bool, kgate, gate)   # past the last tile nothing is read
        src = UOp(Ops.INDEX, buf.dtype, (buf, b * (sk * cols) + key * cols + col) + ((kgate,) if kgate is not None else ()), ("vec", VEC))
        dst_at = slot * (BK * cols) + rl * cols + (cl ^ (rl % 8)) * VEC + ((T // nch) * i * cols + base)
        dst = UOp(Ops.INDEX, smem.dtype, (smem, dst_at) + ((gate,) if gate is not None else ()), ("vec", VEC))
        cps.append(UOp(Ops.STORE, dtypes.void, (dst, UOp(Ops.LOAD, din.vec(VEC), (src,))), ASYNC))
    return cps

  # Matrix-load row addresses (lanes 0-15 give one 8-element row each: lane l row l % 8 of matrix l // 8). A shared row
  # of 8+ chunks is swizzled by row % 8, which here is the lane's y = l % 8 alone (tile rows start at multiples of 8), so
  # chunk ^ y splits into a lane part and a constant: (c0 + x) ^ y = (c0 & ~7) + ((c0 & 7) ^ (x ^ y)) for c0 even and
  # x in {0, 1}. Each address is then a few lane registers plus an immediate, not one live register per fragment.
  ln = lane % 16
  x, y = ln // 8, ln % 8
  z = x ^ y

  def frag_k(slot: UOp, nt: int, ks: int, bar: UOp) -> UOp:
    """B fragment of S for keys [8nt, 8nt+8) x head dims [16ks, 16ks+16): K rows are B's n rows (no transpose)."""
    c0 = ks * (K0 // VEC)   # the 16-byte chunk of head dim 16ks (even)
    at = slot * (BK * d) + y * d + ((z ^ (c0 & 7)) * VEC) + (nt * N0 * d + (c0 & ~7) * VEC)
    return UOp(Ops.LOAD, din.vec(eb), (UOp(Ops.INDEX, smem.dtype, (smem, at), (LDMATRIX, 2, False)), bar))

  def frag_v(slot: UOp, ks: int, j: int, bar: UOp) -> UOp:
    """B fragment of O for keys [16ks, 16ks+16) x value dims [8j, 8j+8): V rows are B's k rows (transposed load)."""
    at = slot * (BK * dv) + (x * 8 + y) * dv + ((y ^ (j & 7)) * VEC) + (2 * BK * d + ks * K0 * dv + (j & ~7) * VEC)
    return UOp(Ops.LOAD, din.vec(eb), (UOp(Ops.INDEX, smem.dtype, (smem, at), (LDMATRIX, 2, True)), bar))

  # per m16 tile: each row's running max (scaled, base 2, the same in every lane of the row), this lane's share of each
  # row's sum, the O accumulators
  m = [[P.reg(f32, -math.inf) for _ in range(2)] for _ in range(MT)]
  l = [[P.reg(f32, 0.0) for _ in range(2)] for _ in range(MT)]
  o = [[[P.reg(f32, 0.0) for _ in range(ec)] for _ in range(dv // N0)] for _ in range(MT)]
  zero = UOp(Ops.VECTORIZE, f32.vec(ec), tuple(_f(0.0) for _ in range(ec)))

  def chains(a_ops: list[UOp], b_ops: list[UOp], c0: UOp) -> list[UOp]:
    """The mma chain c0 + sum_k a_k b_k, each step's node (the last is the result)."""
    out, acc = [], c0
    for x, y in zip(a_ops, b_ops):
      acc = UOp(Ops.WMMA, f32.vec(ec), (x, y, acc), (tc.name, tc.dims))
      out.append(acc)
    return out

  def emit_interleaved(ch: list[list[list[UOp]]]) -> None:
    """Emits ch[mi][n][k] in (n, k, mi) order: each B fragment is loaded once and used by every m16 tile in a row,
    not kept live from the first tile's use to the last's."""
    for n in range(len(ch[0])):
      for k in range(len(ch[0][n])):
        for mi in range(MT): P.emit(ch[mi][n][k])

  def tile_updates(t: UOp, masked: bool, kf: list[list[UOp]], vf: list[list[UOp]]) -> list[tuple[UOp, UOp]]:
    """S = Q K^T, the online softmax and O += P V of key tile t for every m16 tile: the (register, new value) updates."""
    sch = [[chains(qf[mi], kf[nt], zero) for nt in range(BK // N0)] for mi in range(MT)]
    emit_interleaved(sch)
    updates: list[tuple[UOp, UOp]] = []
    och = []
    for mi in range(MT):
      s = [[UOp(Ops.GEP, f32, (sch[mi][nt][-1],), (e,)) for e in range(ec)] for nt in range(BK // N0)]
      if masked:   # keys past Sk and (causal) after the row are -inf
        for nt in range(BK // N0):
          for e in range(ec):
            r, c = fc(lane, e)
            key, row = t * BK + nt * N0 + c, row0[mi] + r
            vis = key.lt(_i(sk))
            if a.causal: vis = _alu(Ops.AND, dtypes.bool, vis, key.lt(row + 1))
            s[nt][e] = _alu(Ops.WHERE, f32, vis, s[nt][e], _f(-math.inf))
      mm, ll, oo = m[mi], l[mi], o[mi]
      m_new, alpha, l_new = [], [], []
      p: list[list[UOp]] = [[_f(0.0)] * ec for _ in range(BK // N0)]
      for h in range(2):
        xs = [s[nt][e] for nt in range(BK // N0) for e in range(ec) if row_of[e] == h]
        mx = P.emit(_tree(Ops.MAX, xs))
        for msk in masks: mx = P.emit(_max(mx, warp_xor(mx, msk)))
        mn = P.emit(_max(mm[h], _alu(Ops.MUL, f32, mx, _f(c2))))
        m_new.append(mn)
        alpha.append(P.emit(_alu(Ops.EXP2, f32, _alu(Ops.SUB, f32, mm[h], mn))))
        for nt in range(BK // N0):
          for e in range(ec):
            if row_of[e] == h: p[nt][e] = P.emit(_alu(Ops.EXP2, f32, _alu(Ops.SUB, f32, _alu(Ops.MUL, f32, s[nt][e], _f(c2)), mn)))
        l_new.append(_alu(Ops.ADD, f32, _alu(Ops.MUL, f32, ll[h], alpha[h]),
                          _tree(Ops.ADD, [p[nt][e] for nt in range(BK // N0) for e in range(ec) if row_of[e] == h])))
      # P in the input dtype, straight from the score accumulators into A fragments (one per 16 keys)
      pf = [UOp(Ops.VECTORIZE, din.vec(ea), tuple(UOp(Ops.CAST, din, (p[2 * ks + tile][e],)) for tile, e in p_src))
            for ks in range(BK // K0)]
      # the rescale by 2^(m_old - m_new) rides in as the C operand of the tile's first P V mma
      och.append([chains(pf, vf[j], UOp(Ops.VECTORIZE, f32.vec(ec), tuple(_alu(Ops.MUL, f32, oo[j][e], alpha[row_of[e]]) for e in range(ec))))
                  for j in range(dv // N0)])
      updates += [(mm[h], m_new[h]) for h in range(2)] + [(ll[h], l_new[h]) for h in range(2)]
      updates += [(oo[j][e], UOp(Ops.GEP, f32, (och[mi][j][-1],), (e,))) for j in range(dv // N0) for e in range(ec)]
    emit_interleaved(och)
    return updates

  def tile_body(t: UOp, masked: bool) -> None:
    slot = t % 2
    nxt = t + 1
    # tile t+1 in flight (its stage was last read in iteration t-1, before that iteration's closing barrier)
    cps = [P.emit(c) for c in copies(nxt, nxt.lt(ntiles))]
    commit = P.emit(UOp(Ops.BARRIER, dtypes.void, tuple(cps) + (t,), (ASYNC_COMMIT,)))
    ready = P.emit(UOp(Ops.BARRIER, dtypes.void, (commit,), (ASYNC_WAIT, 1)))
    bar = P.emit(UOp(Ops.BARRIER, dtypes.void, (ready,)))
    loads: list[UOp] = []
    kf = [[frag_k(slot, nt, ks, bar) for ks in range(d // K0)] for nt in range(BK // N0)]   # shared by the m16 tiles
    vf = [[frag_v(slot, ks, j, bar) for ks in range(BK // K0)] for j in range(dv // N0)]
    loads += [x for xs in kf + vf for x in xs]
    P.assign_all(tile_updates(t, masked, kf, vf))
    # every warp is done with stage t % 2 before iteration t+1 copies tile t+2 into it
    P.emit(UOp(Ops.BARRIER, dtypes.void, tuple(P.emit(x) for x in loads)))

  P.emit(UOp(Ops.BARRIER, dtypes.void, tuple(P.emit(c) for c in copies(_i(0), None)), (ASYNC_COMMIT,)))
  t = P.loop(nfull)
  tile_body(t, False)
  P.end(t)
  tt = P.loop(ntiles - nfull)
  tile_body(nfull + tt, True)
  P.end(tt)

  # the row sums over the lanes sharing each row, then O / l
  final, lse = [], []
  for mi in range(MT):
    inv = []
    for h in range(2):
      tot = l[mi][h]
      for msk in masks: tot = P.emit(_alu(Ops.ADD, f32, tot, warp_xor(tot, msk)))
      inv.append(P.emit(_alu(Ops.RECIP, f32, tot)))
      lse.append(_alu(Ops.MUL, f32, _alu(Ops.ADD, f32, m[mi][h], _alu(Ops.LOG2, f32, tot)), _f(math.log(2))))
    final.append([[_alu(Ops.MUL, f32, o[mi][j][e], inv[row_of[e]]) for e in range(ec)] for j in range(dv // N0)])
  obase = b * (sq * ocols)
  if a.with_lse:   # float32 rows of Dv + 1: stored from registers (one lane of each quad writes the lse)
    for mi in range(MT):
      for j in range(dv // N0):
        for e in range(ec):
          r, c = fc(lane, e)
          row = row0[mi] + r
          P.emit(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, out.dtype, (out, obase + row * ocols + (j * N0 + c), row.lt(_i(sq)))), final[mi][j][e])))
      for h in range(2):
        e = row_of.index(h)
        r, c = fc(lane, e)
        row = row0[mi] + r
        first = _alu(Ops.AND, dtypes.bool, row.lt(_i(sq)), c.lt(_i(1)) if isinstance(c, UOp) else UOp.const(dtypes.bool, c == 0))
        P.emit(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, out.dtype, (out, obase + row * ocols + dv, first)), lse[2 * mi + h])))
    return P.out
  # O in the input dtype through shared memory (free since the last tile's closing barrier), then 16-byte row stores
  writes = []
  for mi in range(MT):
    for j in range(dv // N0):
      for e in range(ec):
        r, c = fc(lane, e)
        at = _swizzled(warp * (M0 * MT) + M0 * mi + r, j * N0 + c, dv, VEC, True)
        writes.append(P.emit(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, smem.dtype, (smem, at)), UOp(Ops.CAST, din, (final[mi][j][e],))))))
  ready = P.emit(UOp(Ops.BARRIER, dtypes.void, tuple(writes)))
  nch = dv // VEC
  for i in range(BQ * nch // T):
    c = tid + T * i
    row, col = c // nch, c % nch * VEC
    val = UOp(Ops.LOAD, din.vec(VEC), (UOp(Ops.INDEX, smem.dtype, (smem, _swizzled(row, col, dv, VEC, True)), ("vec", VEC, 16)), ready))
    grow = q0 + row
    dst = UOp(Ops.INDEX, out.dtype, (out, obase + grow * dv + col, grow.lt(_i(sq))), ("vec", VEC, 16))
    P.emit(UOp(Ops.STORE, dtypes.void, (dst, val)))
  return P.out
