"""Fused attention backward (flash attention's): dq, dk and dv in one kernel, P recomputed per tile from each row's
saved log-sum-exp, never an S x S buffer.

The node is CUSTOM(q, k, kT, vT, do, stats) with arg AttentionGradArg (tensor_attention.py builds it), all float32 and
contiguous: q (..., Sqp, D) and do (..., Sqp, Dv) row-major with the queries zero-padded to whole query tiles, k
(..., Skp, D) row-major, kT and vT packed per key tile and transposed (..., Skp/keys, D or Dv, keys) as the forward's
kT (keys padded as for the forward), stats (..., 2, Sqp): each row's log-sum-exp in base 2 of the scaled scores, then
rowsum(do * o) (the "delta" of dS = P * (dP - delta)). The output is one flat buffer:
dk (..., Skp, D) | dv (..., Skp, Dv) | dq partials (chunks, ..., Sqp, D), summed over chunks outside.

Key-major: a program instance owns (batch, chunk of keys); per block of `keys` keys it walks the query tiles. Each
(key block, query tile) is five small matmuls, each register-blocked as the forward's (a row of the result per
register row, vectors along its columns, one broadcast per row and step): S = q kT and dP = do vT (queries x keys, keys
in lanes), P = 2^(S c - lse) and dS' = scale P (dP - delta) into per-thread scratch (L1); then dv += P^T do and
dk += dS'^T q (key rows, accumulators in the instance's own rows of the output), dq += dS' k (query rows, in the
chunk's dq partial). The key range is split into chunks only when the batch alone leaves cores idle; each chunk writes
its own dq partial, so no two instances write the same memory."""
from __future__ import annotations
from dataclasses import dataclass
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.codegen.attention import _Program, _f, _i, _alu, _load, _global, _min, _vec, dot_tile

def _max(a: UOp, b: UOp) -> UOp: return a.lt(b).where(b, a)

@dataclass(frozen=True)
class AttentionGradArg:
  prefix = "attn_bwd_"               # kernel name (no annotation: a class constant, not a field)
  out_shape: tuple[int, ...]   # (total,): dk | dv | dq partials, flat
  sq: int                      # real query count (q, do and the stats are padded to a multiple of `queries`)
  sk: int                      # real key count
  causal: bool
  scale: float
  chunks: int                  # key chunks per batch entry (each with its own dq partial)
  rows: int                    # query rows of a register block in the score and dq steps (dk/dv: 4 key rows)
  queries: int                 # queries per tile (a multiple of `rows`)
  keys: int                    # keys per block: the forward's key tile (a multiple of `width`)
  width: int

def plan_backward(vector: tuple[int, int], sq: int, skp: int, keys: int, causal: bool) -> tuple[int, int]:
  """(rows, queries): the score steps hold rows x (keys / width) vectors as the forward's (6 x 4 on AVX-512), the dq
  step rows x up to 4; 8 register rows of queries per tile, so P and dS' (2 x 48 x 64 floats on AVX-512) stay in L1.
  One thread, AVX-512, against 4 rows x 32 queries: D = 128 -8%, D = 64 -3% (S = 512, not causal). Causal tiles start
  at each key block, so short sequences pad more: 4 x 32 where 48-query tiles would pad by 7% more (S = 128: -8%,
  S = 256: -4%); not causal, 4 x 32 wasn't faster even at S = 128 (144 padded queries) and lost 5% at S = 200, D = 128."""
  width, regs = vector
  if regs < 32: return (4 if regs >= 16 else 2), 32 if regs >= 16 else 16
  def padded(tq: int) -> int: return sum(-(-(sq - j) // tq) * tq for j in range(0, min(sq, skp), keys))
  return (6, 48) if not causal or padded(48) <= 1.07 * padded(32) else (4, 32)

def backward_chunks(bh: int, skp: int, keys: int, want: int = 8) -> int:
  """Key chunks per batch entry: enough instances for the cores (`want`) where the batch is small, each a whole number
  of key blocks (a divisor of the block count)."""
  blocks = skp // keys
  need = -(-want // bh)
  return max(c for c in range(1, blocks + 1) if blocks % c == 0 and c <= need)

def attention_backward_flops(ast: UOp) -> int:
  node = ast.src[0]
  a: AttentionGradArg = node.arg
  *batch, _, d = node.src[0].shape
  dv = node.src[4].shape[-1]
  visible = sum(min(i + 1, a.sk) for i in range(a.sq)) if a.causal else a.sq * a.sk
  return 2 * prod(batch) * visible * (3 * d + 2 * dv)   # s, dp, dv, dk, dq

def _width(n: int, W: int) -> int: return next(w for w in (W, 8, 4, 2, 1) if w <= W and n % w == 0)

def _group(rows: int, chunks: int, regs: int) -> int:
  """Accumulator vectors per row in one pass: rows x group, the group's loads and a broadcast fit the registers, the
  passes as even as the chunks allow."""
  most = max(1, min(chunks, (regs - 1) // (rows + 1)))
  return -(-chunks // -(-chunks // most))

def attention_backward_program(ast: UOp, renderer=None) -> list[UOp]:
  node = ast.src[0]
  a: AttentionGradArg = node.arg
  qb, kb, ktb, vtb, dob, stb = (_global(s) for s in node.src)
  *batch, sqp, d = node.src[0].shape
  skp, dv = node.src[1].shape[-2], node.src[4].shape[-1]
  bh = prod(batch)
  R, TQ, TK, W, C = a.rows, a.queries, a.keys, a.width, a.chunks
  RK = 4 if TK % 4 == 0 else 2   # key rows of the dk/dv steps
  NC = TK // W
  regs = (getattr(renderer, "attention_vector", None) or (W, 32))[1]
  dw, dvw = _width(d, W), _width(dv, W)
  f, fv = dtypes.float32, dtypes.float32.vec(W)
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(prod(a.out_shape)), (), 0)
  dk_off, dv_off, dq_off = 0, bh * skp * d, bh * skp * (d + dv)
  kc = skp // C                    # keys per chunk, a whole number of blocks
  nqt = sqp // TQ
  U = next(x for x in (8, 4, 2, 1) if TQ % x == 0 and TK % x == 0)
  P = _Program()
  for buf in (out, qb, kb, ktb, vtb, dob, stb): P.emit(buf)
  pbuf, sbuf = P.scratch(TQ * TK), P.scratch(TQ * TK)   # P and dS' of the tile, query-major
  g = P.loop(_i(bh * C), "g")
  b, ch = g // C, g % C
  dq_base = dq_off + (ch * bh + b) * (sqp * d)
  def zero(base: UOp, n: int, w: int) -> None:
    z = P.loop(_i(n // w))
    P.store(out, base + z * w, _vec(0.0, w))
    P.end(z)
  zero(dq_base, sqp * d, dw)   # this chunk's dq partial (a causal chunk never touches the rows before its first key)
  blk = P.loop(_i(kc // TK))
  j0 = ch * kc + blk * TK
  t = j0 // TK                   # the key tile in kT / vT
  zero(dk_off + b * (skp * d) + j0 * d, TK * d, dw)
  zero(dv_off + b * (skp * dv) + j0 * dv, TK * dv, dvw)
  if a.causal:
    # key j is seen by queries i >= j only: the tiles start at the block's first key (the queries are padded by a tile
    # for the last one), and each step loop below stops where the diagonal does
    tt = P.loop(j0.lt(_i(a.sq)).where((_i(a.sq + TQ - 1) - j0) // TQ, _i(0)))
    i0 = j0 + tt * TQ
  else:
    tt = P.loop(_i(nqt))
    i0 = tt * TQ
  iota = [UOp(Ops.VECTORIZE, fv, tuple(_f(float(c * W + x)) for x in range(W))) for c in range(NC)]
  sc = _f(a.scale * 1.4426950408889634)
  # scores of R query rows at a time: P and dS' to scratch
  rl = P.loop(_i(TQ // R))
  qrow = [i0 + rl * R + r for r in range(R)]
  s = dot_tile(P, d, R, NC, fv, lambda e, c: _load(ktb, b * (d * skp) + t * (d * TK) + e * TK + c * W, W),
               lambda e, r: _load(qb, b * (sqp * d) + qrow[r] * d + e, 1))
  jf = [P.emit(_alu(Ops.ADD, fv, j0.cast(f), iota[c])) for c in range(NC)]
  for r in range(R):
    # visible: a real key of a real query (its bound is 0 past sq), and (causal) at or before the query
    hi = qrow[r].lt(_i(a.sq)).where(_min(qrow[r] + 1, _i(a.sk)) if a.causal else _i(a.sk), _i(0)).cast(f)
    lse = _load(stb, b * (2 * sqp) + qrow[r], 1)
    for c in range(NC):
      e = _alu(Ops.EXP2, fv, _alu(Ops.SUB, fv, _alu(Ops.MUL, fv, s[r][c], sc), lse))
      P.store(pbuf, (rl * R + r) * TK + c * W, _alu(Ops.WHERE, fv, _alu(Ops.CMPLT, dtypes.bool.vec(W), jf[c], hi), e, _f(0.0)))
  dp = dot_tile(P, dv, R, NC, fv, lambda e, c: _load(vtb, b * (dv * skp) + t * (dv * TK) + e * TK + c * W, W),
                lambda e, r: _load(dob, b * (sqp * dv) + qrow[r] * dv + e, 1))
  for r in range(R):
    delta = _load(stb, b * (2 * sqp) + sqp + qrow[r], 1)
    for c in range(NC):
      at = (rl * R + r) * TK + c * W
      ds = _alu(Ops.MUL, fv, _load(pbuf, at, W), _alu(Ops.MUL, fv, _alu(Ops.SUB, fv, dp[r][c], delta), _f(a.scale)))
      P.store(sbuf, at, ds)
  P.end(rl)
  P.emit(UOp(Ops.BARRIER, dtypes.void, ()))   # P and dS' are read back from memory: broadcast loads, not lane shuffles

  def matmul(R: int, acc_at, n: int, w: int, s0: UOp, steps: UOp, coef, vec_at) -> None:
    """acc[row, :n] += sum over steps s0 .. steps - 1 (multiples of U) of coef(row, step) * vec(step, :n) for R rows:
    accumulators loaded from and stored to memory around the step loop, each step's vectors shared by every row, coef
    broadcast."""
    fw = dtypes.float32.vec(w) if w > 1 else f
    G = _group(R, n // w, regs)
    for g0 in range(0, n // w, G):
      cs = range(g0, min(n // w, g0 + G))
      acc = {(r, c): P.reg(fw, 0.0) for r in range(R) for c in cs}
      P.assign_all([(acc[r, c], _load(out, acc_at(r) + c * w, w)) for r in range(R) for c in cs])
      sl = P.loop((steps - s0) // U)
      for u in range(U):
        st = s0 + sl * U + u
        vv = {}
        for c in cs:
          vbuf, vidx = vec_at(st, c * w)
          vv[c] = P.emit(_load(vbuf, vidx, w))
        for r in range(R):
          x = P.emit(coef(r, st))
          for c in cs: P.assign(acc[r, c], _alu(Ops.ADD, fw, _alu(Ops.MUL, fw, x, vv[c]), acc[r, c]))
      P.end(sl)
      for (r, c), x in acc.items(): P.store(out, acc_at(r) + c * w, x)
  # dv += P^T do and dk += dS'^T q: R key rows at a time, a step per query of the tile
  kl = P.loop(_i(TK // RK))
  key = [j0 + kl * RK + r for r in range(RK)]
  # causal: the block's first key row sees no query before it (whole steps of U queries skipped)
  q0 = _max(key[0] - i0, _i(0)).lt(_i(TQ)).where(_max(key[0] - i0, _i(0)) // U * U, _i(TQ)) if a.causal else _i(0)
  matmul(RK, lambda r: dv_off + b * (skp * dv) + key[r] * dv, dv, dvw, q0, _i(TQ), lambda r, i: _load(pbuf, i * TK + kl * RK + r, 1),
         lambda i, o: (dob, b * (sqp * dv) + (i0 + i) * dv + o))
  matmul(RK, lambda r: dk_off + b * (skp * d) + key[r] * d, d, dw, q0, _i(TQ), lambda r, i: _load(sbuf, i * TK + kl * RK + r, 1),
         lambda i, o: (qb, b * (sqp * d) + (i0 + i) * d + o))
  P.end(kl)
  # dq += dS' k: R query rows at a time, a step per key of the block (causal: up to the block's last row)
  ql = P.loop(_i(TQ // R))
  k1 = _min(_i(TK), (i0 + ql * R + (R - 1) - j0 + U) // U * U) if a.causal else _i(TK)
  matmul(R, lambda r: dq_base + (i0 + ql * R + r) * d, d, dw, _i(0), k1, lambda r, j: _load(sbuf, (ql * R + r) * TK + j, 1),
         lambda j, o: (kb, b * (skp * d) + (j0 + j) * d + o))
  P.end(ql)
  P.end(tt)
  P.end(blk)
  P.end(g)
  return P.out
