"""Fused attention: softmax(q k^T * scale [+ causal mask]) v as one kernel with an online softmax (flash attention).

The tensor-level node is CUSTOM(q, kT, v) with arg AttentionArg (tensor_attention.py builds it): q (..., Sq, D),
kT (..., Skp/keys, D, keys) the keys zero-padded to a whole number of key tiles and each tile transposed (contiguous
per tile), v (..., Skp, Dv) padded alike,
all float32 and contiguous (the scheduler realizes them so). The output is (..., Sq, Dv) float32, or (..., Sq, Dv + 1)
with each row's log-sum-exp (natural log, of the scaled scores) in its last column, which the backward pass reads
instead of recomputing the row statistics.

`attention_program` writes the kernel's linearized program directly (it has loops carrying several accumulators with a
rescale per tile, which the reduce lowering can't express). A program instance owns a band of query rows, cut into
register blocks of `rows` rows; per row a per-thread scratch array (L1) keeps the running max m, a vector of partial
sums l and the Dv output accumulators. For each tile of `keys` keys, each register block in turn (the tile's kT and v
stay in L1 for all of them): scores = q_rows @ kT[:, tile] in registers (one vector FMA per row and head dim, kT's tile
loaded once for all rows), masked, m' = max(m, rowmax), p = 2^(scores - m') stored to scratch, then
acc = acc * 2^(m - m') + p @ v[tile] with the accumulators loaded into registers for the tile and p[row, key]
broadcast from scratch (a load, where a lane of a register would be a shuffle on an FMA port). The S x S scores never
leave the instance's scratch. Scores are kept in base 2 (scaled by log2(e)) so each exponential is one exp2.
Only a tile's blocks that see every one of its keys run unmasked on the whole tile; a causal diagonal block or a
partial last tile runs masked steps of W keys, as many as hold keys the block sees (a causal mask's key tiles past the
band's last row, and blocks wholly above the diagonal, are skipped).

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
  """(rows, keys, width, dv_width) for head dims d, dv under a (vector width, vector registers) budget. The output
  accumulators live in a per-thread scratch array (L1) between key tiles, so each phase has the registers to itself:
  q k^T holds rows x keys/width score vectors plus one kT vector per chunk and a broadcast, p @ v rows x (up to 4)
  output vectors plus the v vectors. Keys: 4 vectors, a long tile spreading each row's max, rescale and exps over more
  multiply-adds (one thread, AVX-512: 64 keys 8% faster than 32 at D = 64, 5% at D = 128); rows: as many as fit
  (6 rows x 64 keys; 4 or 5 rows were as fast within the noise)."""
  width, regs = vector
  dvw = next(w for w in (width, 8, 4, 2, 1) if w <= width and dv % w == 0)
  nc = 4 if regs >= 16 else 2
  rows = max(1, min(6, (regs - nc - 2) // nc))
  return rows, width * nc, width, dvw

def _pv_group(rows: int, chunks: int, regs: int) -> int:
  """Output vectors per row in one pass of p @ v: rows x group accumulators, the group's v vectors and a broadcast fit
  the registers; a wider head dim takes more passes over the tile's keys (the p broadcasts are L1 loads)."""
  return max(1, min(chunks, (regs - 1) // (rows + 1)))

def _row_blocks(bh: int, sq: int, rows: int) -> int:
  """Register blocks of rows per program instance. They take turns on each key tile, which then stays in L1 (and the
  head's K and V in L2) for all of them instead of streaming once per block: up to 16 blocks (96 rows on AVX-512; one
  thread, 4096 keys at D = 128: 146 -> 182 GFLOP/s against 4 blocks), as even as the row count allows, and at least 16
  instances so every core gets work."""
  blocks = -(-sq // rows)
  most = max(1, min(16, (bh * blocks) // 16))
  return -(-blocks // -(-blocks // most))

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
    if buf.op is Ops.DEFINE_REG:
      # a scratch array: a load of it emitted before reads the old contents, so asking for it again means a new load;
      # values computed from the old contents stay what they are (alpha from the old max, after the new one is stored)
      stale = {u for u in self.readers[buf] if u.op in (Ops.INDEX, Ops.LOAD)}
      for s in self.scopes: s.difference_update(stale)
      self.readers[buf] = set()

def _f(x: float) -> UOp: return UOp.const(dtypes.float32, x)
def _i(x: int) -> UOp: return index_const(x)
def _alu(op: Ops, dt: DType, *src: UOp) -> UOp: return UOp(op, dt, tuple(src))
def _load(buf: UOp, idx: UOp, n: int) -> UOp:
  return UOp(Ops.LOAD, dtypes.float32.vec(n) if n > 1 else dtypes.float32, (UOp(Ops.INDEX, buf.dtype, (buf, idx), ("vec", n) if n > 1 else None),))
def _vec(x: float, n: int) -> UOp:
  return UOp(Ops.VECTORIZE, dtypes.float32.vec(n), tuple(_f(x) for _ in range(n))) if n > 1 else _f(x)
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
    return attention_backward_program(ast, renderer)
  a: AttentionArg = node.arg
  qb, kb, vb = (_global(s) for s in node.src)
  *batch, sq, d = node.src[0].shape
  skp, dv = node.src[2].shape[-2:]
  bh = prod(batch)
  R, TK, W = a.rows, a.keys, a.width
  NC = TK // W
  dvw = next(w for w in (W, 8, 4, 2, 1) if w <= W and dv % w == 0)
  DC = dv // dvw
  regs = getattr(renderer, "attention_vector", None) or (W, 32)
  G = _pv_group(R, DC, regs[1])
  NB = _row_blocks(bh, sq, R)
  SB = NB * R   # rows per program instance
  ocols = dv + (1 if a.with_lse else 0)
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(prod(a.out_shape)), (), 0)
  f, fv, fdv = dtypes.float32, dtypes.float32.vec(W), dtypes.float32.vec(dvw)
  log2e = 1.4426950408889634
  nsb = (sq + SB - 1) // SB
  P = _Program()
  # every buffer declared up front: one emitted inside a loop goes out of scope at its end, and a second input that
  # is the same buffer (self-attention with v = q) would declare it again
  for buf in (out, qb, kb, vb): P.emit(buf)
  # per-thread scratch: each tile's p (so p @ v broadcasts p[row, key] with a load, not a lane shuffle), and each row's
  # output accumulators, running max and partial sums between key tiles
  pbuf, obuf, mbuf, lbuf = P.scratch(R * TK), P.scratch(SB * dv), P.scratch(SB * W), P.scratch(SB * W)
  g = P.loop(_i(bh * nsb), "g")
  # row blocks alternate from both ends (0, n-1, 1, n-2, ...): with a causal mask a block's work grows with its row,
  # and the runtime gives each thread a contiguous range of g, which now holds as many long blocks as short ones
  b, ts = g // nsb, g % nsb
  q0 = (ts % 2).ne(0).where(_i(nsb - 1) - ts // 2, ts // 2) * SB
  nblk = _min(_i(NB), _i(-(-sq // R)) - q0 // R)   # the last instance's row blocks: those holding real rows
  for i in range(SB):
    P.store(mbuf, _i(i * W), _vec(-math.inf, W))
    P.store(lbuf, _i(i * W), _vec(0.0, W))
    for c in range(DC): P.store(obuf, _i(i * dv + c * dvw), _vec(0.0, dvw))
  iota = [UOp(Ops.VECTORIZE, fv, tuple(_f(float(c * W + x)) for x in range(W))) for c in range(NC)]
  sc = _f(a.scale * log2e)
  PU = next(x for x in (8, 4, 2, 1) if TK % x == 0)

  def step(rb: UOp, j0: UOp, kcol: UOp, nc: int, masked: bool) -> None:
    """One online-softmax step of register block rb over the nc * W keys from j0 (kcol: their first column in kT)."""
    rows = [_min(q0 + rb * R + r, _i(sq - 1)) for r in range(R)]
    slot = [rb * R + r for r in range(R)]   # the row's place in the scratch arrays
    # scores: one kT vector per (head dim, column chunk) shared by every row, q[row, k] broadcast from memory
    s = dot_tile(P, d, R, nc, fv, lambda k, c: _load(kb, kcol + k * TK + c * W, W),
                 lambda k, r: _load(qb, b * (sq * d) + rows[r] * d + k, 1))
    if masked: jf = [P.emit(_alu(Ops.ADD, fv, j0.cast(f), iota[c])) for c in range(nc)]
    alphas = []
    for r in range(R):
      # a positive scale commutes with the max: the tree runs on the raw scores and the scaling folds into each
      # exponent's subtraction (one FMA); otherwise the scores are scaled first
      pos = a.scale > 0
      sr = [s[r][c] if pos else _alu(Ops.MUL, fv, s[r][c], sc) for c in range(nc)]
      if masked:
        bf = (_min(rows[r] + 1, _i(a.sk)) if a.causal else _i(a.sk)).cast(f)
        sr = [_alu(Ops.WHERE, fv, _alu(Ops.CMPLT, dtypes.bool.vec(W), jf[c], bf), x, _f(-math.inf)) for c, x in enumerate(sr)]
      sr = [P.emit(x) for x in sr]
      m_old = P.emit(_load(mbuf, slot[r] * W, W))
      tmax = _allmax(_tree(Ops.MAX, sr))
      m_new = P.emit(_max(m_old, _alu(Ops.MUL, fv, tmax, sc) if pos else tmax))
      alpha = P.emit(_alu(Ops.EXP2, fv, _alu(Ops.SUB, fv, m_old, m_new)))
      p = [P.emit(_alu(Ops.EXP2, fv, _alu(Ops.SUB, fv, _alu(Ops.MUL, fv, x, sc) if pos else x, m_new))) for x in sr]
      P.store(lbuf, slot[r] * W, _alu(Ops.ADD, fv, _alu(Ops.MUL, fv, _load(lbuf, slot[r] * W, W), alpha), _tree(Ops.ADD, p)))
      P.store(mbuf, slot[r] * W, m_new)
      for c in range(nc): P.store(pbuf, _i(r * TK + c * W), p[c])
      alphas.append(alpha if dvw == W else UOp(Ops.GEP, f, (alpha,), (0,)))
    P.emit(UOp(Ops.BARRIER, dtypes.void, ()))   # p is read back from memory: broadcast loads, not lane shuffles
    # p @ v[keys], G output vectors per row at a time: one v row piece per key shared by every row, p[row, key]
    # broadcast; the key loop unrolled by 8, not fully: a quarter of the code (gcc's time) at the same speed
    for g0 in range(0, DC, G):
      cs = range(g0, min(DC, g0 + G))
      acc = {(r, c): P.reg(fdv, 0.0) for r in range(R) for c in cs}
      P.assign_all([(acc[r, c], _alu(Ops.MUL, fdv, _load(obuf, slot[r] * dv + c * dvw, dvw), alphas[r])) for r in range(R) for c in cs])
      jl = P.loop(_i(nc * W // PU))
      for u in range(PU):
        jj = jl * PU + u
        vv = {c: P.emit(_load(vb, b * (skp * dv) + (j0 + jj) * dv + c * dvw, dvw)) for c in cs}
        for r in range(R):
          pj = P.emit(_load(pbuf, _i(r * TK) + jj, 1))
          for c in cs: P.assign(acc[r, c], _alu(Ops.ADD, fdv, _alu(Ops.MUL, fdv, pj, vv[c]), acc[r, c]))
      P.end(jl)
      for (r, c), x in acc.items(): P.store(obuf, slot[r] * dv + c * dvw, x)

  # rows past the end of a partial block redo the last row (same values, same thread): no bounds checks in the loops
  last = _min(q0 + (SB - 1), _i(sq - 1))
  if a.causal:
    # key tiles past the last row's bound are skipped; in a tile, row blocks wholly above the diagonal see none of it,
    # blocks whose first row sees every key of it take the whole tile unmasked, and the blocks in between (the
    # diagonal) take only the W-key pieces their last row sees, masked
    t = P.loop((_min(last + 1, _i(a.sk)) + (TK - 1)) // TK)
    j0, kt0 = t * TK, b * (d * skp) + t * (d * TK)
    rb0 = j0.lt(q0).where(_i(0), (j0 - q0) // R)
    # the first block whose row 0 is at or past j0 + TK - 1 (the tile's last key), and no later than nblk
    past = (j0 + (TK - 1)).lt(q0 + 1).where(_i(0), (j0 + (TK - 1) - q0 + (R - 1)) // R)
    whole = past.lt(rb0).where(rb0, _min(nblk, past))
    rbd = _i(a.sk).lt(j0 + TK).where(nblk, whole) if a.sk % TK else whole   # a partial tile: masked everywhere
    dl = P.loop(rbd - rb0)
    rb = rb0 + dl
    hi = _min(_min(q0 + rb * R + (R - 1), _i(sq - 1)) + 1, _i(a.sk))
    sl = P.loop(_min((hi - j0 + (W - 1)) // W, _i(NC)))
    step(rb, j0 + sl * W, kt0 + sl * W, 1, True)
    P.end(sl)
    P.end(dl)
    il = P.loop(nblk - rbd)
    step(rbd + il, j0, kt0, NC, False)
    P.end(il)
    P.end(t)
  else:
    # every key of the whole tiles is visible: no compare and select per score; the partial last tile takes only its
    # W-key pieces that hold real keys, masked
    if a.sk >= TK:
      t = P.loop(_i(a.sk // TK))
      rbl = P.loop(nblk)
      step(rbl, t * TK, b * (d * skp) + t * (d * TK), NC, False)
      P.end(rbl)
      P.end(t)
    if a.sk % TK:
      rbl = P.loop(nblk)
      step(rbl, _i(a.sk // TK * TK), b * (d * skp) + _i(a.sk // TK * (d * TK)), -(-(a.sk % TK) // W), True)
      P.end(rbl)
  fb = P.loop(nblk)
  for r in range(R):
    i, row = fb * R + r, _min(q0 + fb * R + r, _i(sq - 1))
    lv = P.emit(_load(lbuf, i * W, W))
    lsum = P.emit(_tree(Ops.ADD, [UOp(Ops.GEP, f, (lv,), (x,)) for x in range(W)]))
    inv = P.emit(_alu(Ops.RECIP, f, lsum))
    base = b * (sq * ocols) + row * ocols
    for c in range(DC): P.store(out, base + c * dvw, _alu(Ops.MUL, fdv, _load(obuf, i * dv + c * dvw, dvw), inv))
    if a.with_lse:   # the natural log-sum-exp of the scaled scores: (m + log2 l) in base 2, times ln 2
      lse2 = _alu(Ops.ADD, f, _load(mbuf, i * W, 1), _alu(Ops.LOG2, f, lsum))
      P.store(out, base + dv, _alu(Ops.MUL, f, lse2, _f(math.log(2))))
  P.end(fb)
  P.end(g)
  return P.out
