"""Fused attention: softmax(q k^T * scale [+ causal mask]) v as one kernel with an online softmax (flash attention).

The tensor-level node is CUSTOM(q, kT, v) with arg AttentionArg (tensor_attention.py builds it): q (..., Sq, D),
kT (..., Skp/keys, D, keys) the keys zero-padded to a whole number of key tiles and each tile transposed (contiguous
per tile), v (..., Skp, Dv) padded alike,
all float32 and contiguous (the scheduler realizes them so). The output is (..., Sq, Dv) float32, or (..., Sq, Dv + 1)
with each row's log-sum-exp (natural log, of the scaled scores) in its last column, which the backward pass reads
instead of recomputing the row statistics.

`attention_program` writes the kernel's linearized program directly (it has loops carrying several accumulators with a
rescale per tile, which the reduce lowering can't express): for a tile of `rows` query rows, a loop over tiles of
`keys` keys keeps per row the running max m, a vector of partial sums l and `Dv` output accumulators in vector
registers. Per key tile: scores = q_rows @ kT[:, tile] (one vector FMA per row and head dim, kT's tile loaded once for
all rows), masked, m' = max(m, rowmax), p = 2^(scores - m'), acc = acc * 2^(m - m') + p @ v[tile]. The S x S scores
never leave registers. Scores are kept in base 2 (scaled by log2(e)) so each exponential is one exp2.

The register budget comes from the renderer (`Renderer.attention_vector`: the vector width and the number of vector
registers); nothing here knows a device."""
from __future__ import annotations
import math
from dataclasses import dataclass
from typing import Callable
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes, DType
from tinycore.helpers import prod

@dataclass(frozen=True)
class AttentionArg:
  prefix = "attn_"               # kernel name (no annotation: a class constant, not a field)
  out_shape: tuple[int, ...]   # (..., Sq, Dv), or (..., Sq, Dv + 1) with the log-sum-exp column
  sk: int                      # real key count (kT and v are padded to a multiple of `keys`)
  causal: bool                 # key j is visible to query i only when j <= i (top-left aligned, as torch)
  scale: float
  with_lse: bool
  rows: int                    # query rows per tile
  keys: int                    # keys per tile (a multiple of `width`)
  width: int                   # lanes of a score vector

def plan_tiles(d: int, dv: int, vector: tuple[int, int]) -> tuple[int, int, int, int]:
  """(rows, keys, width, dv_width) for head dims d, dv under a (vector width, vector registers) budget: the output
  accumulators (rows x dv/dv_width vectors) take half the registers, the scores (rows x keys/width) the other half:
  a long key tile spreads each row's max, rescale and exps over more multiply-adds (measured on AVX-512 at D = 64,
  one thread: 64 keys x 4 rows 5% faster than 32 x 4; two register blocks of 4 rows per tile, the compiler spilling
  one, 10% slower)."""
  width, regs = vector
  dvw = next(w for w in (width, 8, 4, 2, 1) if w <= width and dv % w == 0)
  per_row = dv // dvw
  rows = max(1, min(4, (regs // 2) // max(per_row, 1)))
  keys = width * max(1, min(4, (regs // 2) // rows))
  return rows, keys, width, dvw

class _Program:
  """A linearized program being written: every UOp is appended after its sources, once per scope (a loop's values go
  out of scope at its END), and a value that reads a register is emitted again after the register changes."""
  def __init__(self):
    self.out: list[UOp] = []
    self.scopes: list[set[UOp]] = [set()]
    self.readers: dict[UOp, set[UOp]] = {}   # register -> emitted values computed from its current contents
    self.n_reg = 0
    self.n_range = 0
  def _known(self, u: UOp) -> bool: return any(u in s for s in reversed(self.scopes))
  def emit(self, u: UOp) -> UOp:
    # depth-first down to values already emitted (no full toposort per call: score sums are long chains)
    stack: list[tuple[UOp, bool]] = [(u, False)]
    while stack:
      n, ready = stack.pop()
      if n.op is Ops.NOOP or self._known(n): continue
      if not ready:
        stack.append((n, True))
        stack.extend((x, False) for x in reversed(n.src))
        continue
      self.out.append(n)
      self.scopes[-1].add(n)
      for x in n.src:
        for reg in ([x] if x.op is Ops.DEFINE_REG else []) + [r for r, rd in self.readers.items() if x in rd]:
          self.readers[reg].add(n)
    return u
  def reg(self, dt: DType, init) -> UOp:
    # a NOOP source makes each register a distinct node; the renderer only names it
    r = UOp(Ops.DEFINE_REG, dt, (UOp(Ops.NOOP, dtypes.void, (), ("reg", self.n_reg)),), (self.n_reg, init))
    self.n_reg += 1
    self.readers[r] = set()
    return self.emit(r)
  def assign(self, r: UOp, val: UOp) -> None:
    self.emit(val)
    self.out.append(UOp(Ops.ASSIGN, r.dtype, (r, val)))
    for s in self.scopes: s.difference_update(self.readers[r])   # values computed from the old contents are stale now
    self.readers[r] = set()
  def assign_all(self, pairs: list[tuple[UOp, UOp]]) -> None:
    """Several registers at once: every new value is computed from the old contents before any is overwritten."""
    for _, val in pairs: self.emit(val)
    for r, val in pairs:
      self.out.append(UOp(Ops.ASSIGN, r.dtype, (r, val)))
      for s in self.scopes: s.difference_update(self.readers[r])
    for r, _ in pairs: self.readers[r] = set()
  def scratch(self, n: int) -> UOp:
    """A per-thread array of n floats (rendered as a local array: memory, not registers)."""
    r = UOp(Ops.DEFINE_REG, dtypes.float32.ptr(n, "reg"), (UOp(Ops.NOOP, dtypes.void, (), ("reg", self.n_reg)),), (self.n_reg, None))
    self.n_reg += 1
    self.readers[r] = set()   # its loads, stale after a store to it
    return self.emit(r)
  def loop(self, bound: UOp, kind: str = "r") -> UOp:
    self.emit(bound)
    rng = UOp(Ops.RANGE, dtypes.index, (bound,), ("g", 0) if kind == "g" else ("r", self.n_range, 0))
    self.n_range += 1
    self.out.append(rng)
    self.scopes.append({rng})
    return rng
  def end(self, rng: UOp) -> None:
    self.out.append(UOp(Ops.END, dtypes.void, (rng,)))
    self.scopes.pop()
  def store(self, buf: UOp, idx: UOp, val: UOp) -> None:
    n = val.dtype.count
    ind = UOp(Ops.INDEX, buf.dtype, (buf, idx), ("vec", n) if n > 1 else None)
    self.emit(UOp(Ops.STORE, dtypes.void, (ind, val)))
    if buf.op is Ops.DEFINE_REG:   # a scratch array: values loaded from it before are stale now
      for s in self.scopes: s.difference_update(self.readers[buf])
      self.readers[buf] = set()

def _f(x: float) -> UOp: return UOp.const(dtypes.float32, x)
def _i(x: int) -> UOp: return index_const(x)
def _alu(op: Ops, dt: DType, *src: UOp) -> UOp: return UOp(op, dt, tuple(src))
def _load(buf: UOp, idx: UOp, n: int) -> UOp:
  return UOp(Ops.LOAD, dtypes.float32.vec(n) if n > 1 else dtypes.float32, (UOp(Ops.INDEX, buf.dtype, (buf, idx), ("vec", n) if n > 1 else None),))
def _min(a: UOp, b: UOp) -> UOp: return a.lt(b).where(a, b)
def _max(a: UOp, b: UOp) -> UOp:
  # a compare and select (one vmaxps), not MAX's NaN-propagating form: a NaN score makes its row's p, l and output NaN anyway
  return UOp(Ops.WHERE, b.dtype if b.dtype.count > 1 else a.dtype, (_alu(Ops.CMPLT, dtypes.bool.vec(max(a.dtype.count, b.dtype.count)), a, b), b, a))
def _tree(op: Ops, xs: list[UOp]) -> UOp:
  """Pairwise combination (independent ops per level, so they overlap)."""
  comb = _max if op is Ops.MAX else lambda x, y: _alu(op, x.dtype, x, y)
  while len(xs) > 1: xs = [comb(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]

def _allmax(x: UOp) -> UOp:
  """The max of a vector's lanes in every lane: log2(lanes) steps of max with the lanes swapped in halves, quarters, ...
  (a shuffle each), not one extract per lane."""
  n, step = x.dtype.count, x.dtype.count // 2
  while step:
    x = _max(x, UOp(Ops.GEP, x.dtype, (x,), tuple(i ^ step for i in range(n))))
    step //= 2
  return x

def dot_tile(P: _Program, n: int, rows: int, chunks: int, fv: DType, col: Callable[[UOp, int], UOp],
             row: Callable[[UOp, int], UOp]) -> list[list[UOp]]:
  """rows x chunks vector registers of sum over e < n of row(e, r) * col(e, c): `col` loads a vector (shared by every
  row), `row` one element (broadcast). The loop over e is unrolled by up to 8; the row loads stay inside it (hoisted
  out of an enclosing loop they would park n x rows broadcast vectors on the stack). The forward's scores and the
  backward's sT and dpT."""
  acc = [[P.reg(fv, 0.0) for _ in range(chunks)] for _ in range(rows)]
  U = next(x for x in (8, 4, 2, 1) if n % x == 0)
  kk = P.loop(_i(n // U))
  for u in range(U):
    e = kk * U + u
    cols = [P.emit(col(e, c)) for c in range(chunks)]
    for r in range(rows):
      x = P.emit(row(e, r))
      for c in range(chunks): P.assign(acc[r][c], _alu(Ops.ADD, fv, _alu(Ops.MUL, fv, x, cols[c]), acc[r][c]))
  P.end(kk)
  return acc

def _global(u: UOp) -> UOp:
  while u.op is not Ops.DEFINE_GLOBAL: u = u.src[0]
  return u

def attention_flops(ast: UOp) -> int:
  """Multiply-adds of q k^T and p v times two, over the visible keys only (the kernel skips key tiles a causal mask hides)."""
  node = ast.src[0]
  if getattr(node.arg, "prefix", None) == "attn_tc_":
    from tinycore.codegen.attention_tc import attention_tc_flops
    return attention_tc_flops(ast)
  if not isinstance(node.arg, AttentionArg):
    from tinycore.codegen.attention_backward import attention_backward_flops
    return attention_backward_flops(ast)
  a: AttentionArg = node.arg
  *batch, sq, d = node.src[0].shape
  dv = node.src[2].shape[-1]
  visible = sum(min(i + 1, a.sk) for i in range(sq)) if a.causal else sq * a.sk
  return 2 * prod(batch) * visible * (d + dv)

def attention_program(ast: UOp, renderer=None) -> list[UOp]:
  """The fused kernel's program: this file's (vector registers), the backward's, or the tensor-core forward's
  (attention_tc.py, which reads the renderer's fragment layouts)."""
  node = ast.src[0]
  if getattr(node.arg, "prefix", None) == "attn_tc_":
    from tinycore.codegen.attention_tc import attention_tc_program
    return attention_tc_program(ast, renderer)
  if not isinstance(node.arg, AttentionArg):
    from tinycore.codegen.attention_backward import attention_backward_program
    return attention_backward_program(ast)
  a: AttentionArg = node.arg
  qb, kb, vb = (_global(s) for s in node.src)
  *batch, sq, d = node.src[0].shape
  skp, dv = node.src[2].shape[-2:]
  bh = prod(batch)
  R, TK, W = a.rows, a.keys, a.width
  dvw = next(w for w in (W, 8, 4, 2, 1) if w <= W and dv % w == 0)
  ocols = dv + (1 if a.with_lse else 0)
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(prod(a.out_shape)), (), 0)
  f, fv, fdv = dtypes.float32, dtypes.float32.vec(W), dtypes.float32.vec(dvw)
  log2e = 1.4426950408889634
  nqt = (sq + R - 1) // R
  P = _Program()
  # every buffer declared up front: one emitted inside a loop goes out of scope at its end, and a second input that
  # is the same buffer (self-attention with v = q) would declare it again
  for buf in (out, qb, kb, vb): P.emit(buf)
  pbuf = P.scratch(R * TK)   # each tile's p, so p @ v broadcasts p[row, key] with a load, not a lane shuffle
  g = P.loop(_i(bh * nqt), "g")
  # query tiles alternate from both ends (0, n-1, 1, n-2, ...): with a causal mask a tile's work grows with its row, and
  # the runtime gives each thread a contiguous range of g, which now holds as many long tiles as short ones
  b, tq = g // nqt, g % nqt
  q0 = (tq % 2).ne(0).where(_i(nqt - 1) - tq // 2, tq // 2) * R
  # rows past the end of a partial tile redo the last row (same values, same thread): no bounds checks in the loops
  rows = [_min(q0 + r, _i(sq - 1)) for r in range(R)]
  m = [P.reg(fv, -math.inf) for _ in range(R)]   # the running max in every lane: rescales are vector ops
  l = [P.reg(fv, 0.0) for _ in range(R)]
  acc = [[P.reg(fdv, 0.0) for _ in range(dv // dvw)] for _ in range(R)]
  # visible keys per row: all real ones, or up to the row itself when causal; key tiles past the last row's bound are skipped
  bound = [_min(i + 1, _i(a.sk)) if a.causal else _i(a.sk) for i in rows]
  ntiles = (bound[-1] + (TK - 1)) // TK if a.causal else _i(skp // TK)
  t = P.loop(ntiles)
  j0 = t * TK
  iota = [UOp(Ops.VECTORIZE, fv, tuple(_f(float(c * W + x)) for x in range(W))) for c in range(TK // W)]
  jf = [P.emit(_alu(Ops.ADD, fv, j0.cast(f), iota[c])) for c in range(TK // W)]
  # scores: one kT vector per (head dim, column chunk) shared by every row, q[row, k] broadcast from memory
  s = dot_tile(P, d, R, TK // W, fv, lambda k, c: _load(kb, b * (d * skp) + t * (d * TK) + k * TK + c * W, W),
               lambda k, r: _load(qb, b * (sq * d) + rows[r] * d + k, 1))
  sc = _f(a.scale * log2e)
  p_all = []
  for r in range(R):
    bf = bound[r].cast(f)
    sr = [P.emit(_alu(Ops.WHERE, fv, _alu(Ops.CMPLT, dtypes.bool.vec(W), jf[c], bf), _alu(Ops.MUL, fv, s[r][c], sc), _f(-math.inf)))
          for c in range(TK // W)]
    m_new = P.emit(_max(m[r], _allmax(_tree(Ops.MAX, sr))))
    alpha = P.emit(_alu(Ops.EXP2, fv, _alu(Ops.SUB, fv, m[r], m_new)))
    p = [P.emit(_alu(Ops.EXP2, fv, _alu(Ops.SUB, fv, x, m_new))) for x in sr]
    P.assign(l[r], _alu(Ops.ADD, fv, _alu(Ops.MUL, fv, l[r], alpha), _tree(Ops.ADD, p)))
    alpha_dv = alpha if dvw == W else UOp(Ops.GEP, f, (alpha,), (0,))
    for c in range(dv // dvw): P.assign(acc[r][c], _alu(Ops.MUL, fdv, acc[r][c], alpha_dv))
    for c in range(TK // W): P.store(pbuf, _i(r * TK + c * W), p[c])
    p_all.append((p, m_new))
  P.emit(UOp(Ops.BARRIER, dtypes.void, ()))   # p is read back from memory: broadcast loads, not lane shuffles
  # p @ v[tile]: one v row (dv/dvw vectors) per key shared by every row, p[row, key] broadcast from its lane
  for jj in range(TK):
    vv = [P.emit(_load(vb, b * (skp * dv) + (j0 + jj) * dv + c * dvw, dvw)) for c in range(dv // dvw)]
    for r in range(R):
      pj = P.emit(_load(pbuf, _i(r * TK + jj), 1))
      for c in range(dv // dvw): P.assign(acc[r][c], _alu(Ops.ADD, fdv, _alu(Ops.MUL, fdv, pj, vv[c]), acc[r][c]))
  for r in range(R): P.assign(m[r], p_all[r][1])   # last: p above was computed from the old max
  P.end(t)
  for r in range(R):
    lsum = P.emit(_tree(Ops.ADD, [UOp(Ops.GEP, f, (l[r],), (x,)) for x in range(W)]))
    inv = P.emit(_alu(Ops.RECIP, f, lsum))
    base = b * (sq * ocols) + rows[r] * ocols
    for c in range(dv // dvw): P.store(out, base + c * dvw, _alu(Ops.MUL, fdv, acc[r][c], inv))
    if a.with_lse:   # the natural log-sum-exp of the scaled scores: (m + log2 l) in base 2, times ln 2
      lse2 = _alu(Ops.ADD, f, UOp(Ops.GEP, f, (m[r],), (0,)), _alu(Ops.LOG2, f, lsum))
      P.store(out, base + dv, _alu(Ops.MUL, f, lse2, _f(math.log(2))))
  P.end(g)
  return P.out
