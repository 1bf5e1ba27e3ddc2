"""Fused attention backward (flash attention's): dq, dk and dv in one kernel, P recomputed per tile from each row's
saved log-sum-exp, never an S x S buffer.

The node is CUSTOM(q, k, v, qT, do, doT, stats) with arg AttentionGradArg (tensor_attention.py builds it), all float32
and contiguous: q (..., Sqp, D) and do (..., Sqp, Dv) row-major with the queries zero-padded to whole query tiles,
qT/doT the same packed per query tile and transposed (..., Sqp/TQ, D or Dv, TQ), k (..., Skp, D) and v (..., Skp, Dv)
row-major (keys padded as for the forward), stats (..., 2, Sqp): each row's log-sum-exp in base 2 of the scaled
scores, then rowsum(do * o) (the "delta" of dS = P * (dP - delta)). The output is one flat buffer:
dk (..., Skp, D) | dv (..., Skp, Dv) | dq partials (chunks, ..., Sqp, D), summed over chunks (and scaled) outside.

Key-major: a program instance owns (batch, chunk of keys); per block of `rows` keys (rows of registers) it walks the
query tiles (queries in vector lanes): sT = k q^T and dpT = v do^T as in the forward's score loop, pT = 2^(sT*c - lse),
dsT = pT (dpT - delta), then per query i: dv_j += p_ji do_i and dk_j += ds_ji q_i in registers, and the query's dq row
(in memory, L1/L2-resident) += sum_j ds_ji k_j. The key range is split into chunks only when the batch alone leaves
cores idle; each chunk writes its own dq partial, so no two instances write the same memory."""
from __future__ import annotations
from dataclasses import dataclass
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.codegen.attention import _Program, _f, _i, _alu, _load, _global, dot_tile

@dataclass(frozen=True)
class AttentionGradArg:
  prefix = "attn_bwd_"               # kernel name (no annotation: a class constant, not a field)
  out_shape: tuple[int, ...]   # (total,): dk | dv | dq partials, flat
  sq: int                      # real query count (q, do and the stats are padded to a multiple of `queries`)
  sk: int                      # real key count
  causal: bool
  scale: float
  chunks: int                  # key chunks per batch entry (each with its own dq partial)
  rows: int                    # keys per register block
  queries: int                 # queries per tile (a multiple of `width`)
  width: int

def plan_backward(d: int, dv: int, vector: tuple[int, int]) -> tuple[int, int, int]:
  """(rows, queries, width): the dk and dv accumulators (rows x (d + dv) / width vectors) may fill the registers, the
  compiler spilling some of the score tiles to L1: each key row read shares every q and do load it meets. Measured on
  AVX-512, one thread, S = 512: D = 64 4 rows x 32 queries 11% faster than 2 x 32 (and 4 x 16 18%); D = 128 2 rows
  45% faster than 1. Rows are a power of two so they divide the key padding (a multiple of the forward's key tile)."""
  width, regs = vector
  per_row = max(1, -(-d // width) + -(-dv // width))
  fit = max(1, min(4, regs // per_row))
  rows = 1 << (fit.bit_length() - 1)
  queries = width * max(1, min(2, regs // 16))
  return rows, queries, width

def backward_chunks(bh: int, skp: int, rows: int, want: int = 8) -> int:
  """Key chunks per batch entry: enough instances for the cores (`want`) where the batch is small, each a whole number
  of key blocks (a divisor of the block count)."""
  blocks = skp // rows   # rows divides skp (plan_backward)
  need = -(-want // bh)
  return max(c for c in range(1, blocks + 1) if blocks % c == 0 and c <= need)

def attention_backward_flops(ast: UOp) -> int:
  node = ast.src[0]
  a: AttentionGradArg = node.arg
  *batch, _, d = node.src[0].shape
  dv = node.src[2].shape[-1]
  visible = sum(min(i + 1, a.sk) for i in range(a.sq)) if a.causal else a.sq * a.sk
  return 2 * prod(batch) * visible * (3 * d + 2 * dv)   # s, dp, dv, dk, dq

def _width(n: int, W: int) -> int: return next(w for w in (W, 8, 4, 2, 1) if w <= W and n % w == 0)

def attention_backward_program(ast: UOp) -> list[UOp]:
  node = ast.src[0]
  a: AttentionGradArg = node.arg
  qb, kb, vb, qtb, dob, dotb, stb = (_global(s) for s in node.src)
  *batch, sqp, d = node.src[0].shape
  skp, dv = node.src[2].shape[-2:]
  bh = prod(batch)
  R, TQ, W, C = a.rows, a.queries, a.width, a.chunks
  dw, dvw = _width(d, W), _width(dv, W)
  f, fv = dtypes.float32, dtypes.float32.vec(W)
  fd, fdv = dtypes.float32.vec(dw) if dw > 1 else f, dtypes.float32.vec(dvw) if dvw > 1 else f
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(prod(a.out_shape)), (), 0)
  dv_off, dq_off = bh * skp * d, bh * skp * (d + dv)
  kc = skp // C                    # keys per chunk, a whole number of blocks
  nqt = sqp // TQ
  P = _Program()
  for buf in (out, qb, kb, vb, qtb, dob, dotb, stb): P.emit(buf)
  g = P.loop(_i(bh * C), "g")
  b, ch = g // C, g % C
  dq_base = dq_off + (ch * bh + b) * (sqp * d)
  # this instance's dq partial starts at zero (a causal chunk never touches the rows before its first key)
  z = P.loop(_i(sqp * d // dw))
  P.store(out, dq_base + z * dw, UOp(Ops.VECTORIZE, fd, (_f(0.0),) * dw) if dw > 1 else _f(0.0))
  P.end(z)
  blk = P.loop(_i(kc // R))
  j0 = ch * kc + blk * R
  keys = [j0 + r for r in range(R)]
  dk = [[P.reg(fd, 0.0) for _ in range(d // dw)] for _ in range(R)]
  dvacc = [[P.reg(fdv, 0.0) for _ in range(dv // dvw)] for _ in range(R)]
  # causal: key j is seen by queries i >= j only, so the walk starts at the query tile holding the block's first key
  t0 = j0 // TQ if a.causal else _i(0)
  tt = P.loop(_i(nqt) - t0)
  t = t0 + tt
  i0 = t * TQ
  iota = [UOp(Ops.VECTORIZE, fv, tuple(_f(float(c * W + x)) for x in range(W))) for c in range(TQ // W)]
  qi = [P.emit(_alu(Ops.ADD, fv, i0.cast(f), iota[c])) for c in range(TQ // W)]

  def scores(rowb: UOp, tb: UOp, n: int) -> list[list[UOp]]:
    """rows x (queries / W) vectors of row_j . col_i: rowb (..., Skp, n) broadcast per element, tb the packed (n, TQ) tile."""
    return dot_tile(P, n, R, TQ // W, fv, lambda e, c: _load(tb, b * (n * sqp) + t * (n * TQ) + e * TQ + c * W, W),
                    lambda e, r: _load(rowb, b * (skp * n) + keys[r] * n + e, 1))
  sT, dpT = scores(kb, qtb, d), scores(vb, dotb, dv)
  lse = [P.emit(_load(stb, b * (2 * sqp) + i0 + c * W, W)) for c in range(TQ // W)]
  delta = [P.emit(_load(stb, b * (2 * sqp) + sqp + i0 + c * W, W)) for c in range(TQ // W)]
  sc = _f(a.scale * 1.4426950408889634)
  pT, dsT = [], []
  for r in range(R):
    # visible: a real key (its queries bound is sq, else 0), a real query, and (causal) the query at or after the key
    hi = keys[r].lt(_i(a.sk)).where(_i(a.sq), _i(0)).cast(f)
    pr, dr = [], []
    for c in range(TQ // W):
      e = _alu(Ops.EXP2, fv, _alu(Ops.SUB, fv, _alu(Ops.MUL, fv, sT[r][c], sc), lse[c]))
      p = _alu(Ops.WHERE, fv, _alu(Ops.CMPLT, dtypes.bool.vec(W), qi[c], hi), e, _f(0.0))
      if a.causal: p = _alu(Ops.WHERE, fv, _alu(Ops.CMPLT, dtypes.bool.vec(W), qi[c], keys[r].cast(f)), _f(0.0), p)
      p = P.emit(p)
      pr.append(p)
      dr.append(P.emit(_alu(Ops.MUL, fv, p, _alu(Ops.SUB, fv, dpT[r][c], delta[c]))))
    pT.append(pr); dsT.append(dr)
  for i in range(TQ):
    row = i0 + i
    pb = [UOp(Ops.GEP, f, (pT[r][i // W],), (i % W,)) for r in range(R)]
    db = [UOp(Ops.GEP, f, (dsT[r][i // W],), (i % W,)) for r in range(R)]
    dor = [P.emit(_load(dob, b * (sqp * dv) + row * dv + c * dvw, dvw)) for c in range(dv // dvw)]
    for r in range(R):
      for c in range(dv // dvw): P.assign(dvacc[r][c], _alu(Ops.ADD, fdv, _alu(Ops.MUL, fdv, pb[r], dor[c]), dvacc[r][c]))
    qr = [P.emit(_load(qb, b * (sqp * d) + row * d + c * dw, dw)) for c in range(d // dw)]
    for r in range(R):
      for c in range(d // dw): P.assign(dk[r][c], _alu(Ops.ADD, fd, _alu(Ops.MUL, fd, db[r], qr[c]), dk[r][c]))
    for c in range(d // dw):
      at = dq_base + row * d + c * dw
      val = _load(out, at, dw)
      for r in range(R): val = _alu(Ops.ADD, fd, _alu(Ops.MUL, fd, db[r], _load(kb, b * (skp * d) + keys[r] * d + c * dw, dw)), val)
      P.store(out, at, val)
  P.end(tt)
  s = _f(a.scale)
  for r in range(R):
    for c in range(d // dw): P.store(out, b * (skp * d) + keys[r] * d + c * dw, _alu(Ops.MUL, fd, dk[r][c], s))
    for c in range(dv // dvw): P.store(out, dv_off + b * (skp * dv) + keys[r] * dv + c * dvw, dvacc[r][c])
  P.end(blk)
  P.end(g)
  return P.out
