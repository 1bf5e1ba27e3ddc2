"""The register tile of a matrix-vector product (LLM decode at 1..8 tokens): every element of the weight is used by at
most MAX_ROWS outputs, so the kernel is bound by streaming the weight once, and the tile must never read it twice.

The general heuristic (opt.py) treats a few activation rows as one more output axis: it left that axis outermost,
where the runtime splits it between the threads, so each thread streamed the whole weight for its own row (2 rows:
twice the traffic), or tiled 4 of 8 rows (two passes). Here:
- every activation row (2..8 of them) is unrolled (UPCAST by its full size): each weight load feeds one FMA per row,
  and the only output axes left are the weight's own, which the threads split;
- the weight is read with vector loads along its contiguous axis: along the reduce (x @ W.T, W [N, K]: VEC_R, each
  thread streams whole rows of W, several long rows at once: ROW_STREAMS at one activation row, ROW_ACCS / rows
  at several) or along the outputs (x @ W, W [K, N]: VEC plus vectors side
  by side; in a row chunk of schedule.py, most of each row at once);
- enough independent accumulators to cover the FMA latency, few enough to stay in registers (rows x vectors <= ACCS)
  or, in a row chunk, in L1 (CHUNK_ACCS);
- in a row chunk, CHUNK_UNROLL weight rows per trip summed into the same accumulators (UNROLL), the activation rows
  innermost: one load and store of an L1 accumulator per CHUNK_UNROLL weight vectors, and several rows streamed side by
  side (2 threads, 1x4096 @ 4096x4096 from DRAM: a plain C read of 64 MB reaches ~54 GB/s as one stream per thread,
  ~57-60 with four; at 8 activation rows the old tile was bound by L1 loads and stores, not by memory).
A single row of x @ W (W row-major) outside a row chunk (a short reduce) is left to the general heuristic."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.renderer import Renderer

MAX_ROWS = 8      # activation rows (tokens) per weight element: above this the product is a matmul with real reuse
STREAM_ROWS = 8   # up to this many rows, `x @ W` (W row-major) is cut into row chunks (schedule.py) and streams whole rows
ROW_STREAMS = 4   # x @ W.T at one activation row: long weight rows streamed side by side by each thread
# ACCS and ROW_ACCS are for AVX-512's register file (32 registers of 16 floats); register_share scales them to others
ACCS = 16         # 16-float accumulators in registers: half of AVX-512's 32, leaving room for the loads and broadcasts
ROW_ACCS = 32     # x @ W.T at 2..8 rows: rows x weight rows accumulators; the few spilled to L1 cost less than re-reading x
CHUNK_ACCS = 512  # in a row chunk: rows x vectors accumulators, spilled to L1: 32 KiB of them stay there and keep up with DRAM
CHUNK_UNROLL = 4  # in a row chunk: weight rows per load and store of the accumulators (UNROLL), streamed side by side

def _bound(r: UOp) -> int | None: return r.src[0].arg if r.src[0].op is Ops.CONST else None

def unroll_reduce(k: UOp, r: UOp, amt: int) -> UOp:
  """UNROLL: `amt` consecutive steps of the reduce `r` per loop trip, summed into the same accumulator (unlike UPCAST_R,
  which gives each copy its own). A row chunk's accumulators live in L1, so this reads `amt` rows of the weight per
  load and store of each accumulator, and streams them side by side."""
  from tinycore.codegen.opt import _simplify, index_const
  from tinycore.codegen.mma_accumulate import FMA_CHAIN
  nr = UOp(Ops.RANGE, r.dtype, (index_const(_bound(r) // amt),), r.arg)
  repl = {}
  for red in k.toposort():
    if red.op is not Ops.REDUCE or r not in red.src[1:]: continue
    parts = [red.src[0].substitute({r: nr * amt + u}) for u in range(amt)]
    if red.arg is Ops.ADD and all(p.op is Ops.MUL for p in parts):
      # products: one FMA chain, which the program stage starts from the running sum (mma_accumulate.py), so the
      # accumulator takes the copies in order, exactly the sum of the loop without the unroll
      body = parts[0]
      for p in parts[1:]: body = UOp(Ops.MULACC, red.dtype, (p.src[0], p.src[1], body), FMA_CHAIN)
    else:
      while len(parts) > 1:   # a balanced tree: the copies' sum is short, then one update of the accumulator
        parts = [UOp(red.arg, red.dtype, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
      body = parts[0]
    repl[red] = UOp(Ops.REDUCE, red.dtype, (body, *(nr if x is r else x for x in red.src[1:])), red.arg)
  return _simplify(k.substitute(repl)) if repl else k

def _upcast_rows(k: UOp, rows: list[UOp], opts: list) -> tuple[list, UOp]:
  """Every activation row unrolled (UPCAST by its full size)."""
  from tinycore.codegen.opt import apply_opt
  for g in rows:
    opts.append(("UPCAST", g.arg, _bound(g)))
    k = apply_opt(k, opts[-1])
  return opts, k

def register_share(renderer: Renderer, accs: int) -> int:
  """`accs` (a count for AVX-512's 32 x 16 floats) scaled to the renderer's vector register file (attention_vector:
  lanes, registers; AVX2's 16 x 8 floats hold a quarter), at least 1: past the file the accumulators spill."""
  lanes, regs = renderer.attention_vector or (16, 32)
  return max(1, accs * lanes * regs // (16 * 32))

def gemv_heuristic(k: UOp, renderer: Renderer) -> tuple[tuple, UOp] | None:
  """(opts, optimized kernel) for a small-batch matrix-vector product; None for anything else."""
  from tinycore.codegen.opt import _loads, _terms, _globals, apply_opt, CantVectorize, _range
  if not renderer.vector_types: return None
  rngs = [u for u in k.toposort() if u.op is Ops.RANGE]
  reds = [u for u in rngs if u.arg[0] == "r"]
  if len(reds) != 1 or (K := _bound(reds[0])) is None: return None
  r = reds[0]
  loads = _loads(k)
  if not loads: return None
  weight = max(loads, key=lambda ind: ind.src[0].dtype.size)   # type: ignore[attr-defined]
  wr = {u for u in weight.toposort() if u.op is Ops.RANGE}
  glob = _globals(k)
  # the weight's axes: its output axis and, in a row chunk of schedule.py, the chunk axis (outermost: the threads split it)
  cols = [g for g in glob if g in wr]
  rows = [g for g in glob if g not in wr and _bound(g) != 1]
  if not cols or r not in wr or any(_bound(g) is None for g in cols + rows): return None
  terms = _terms(weight.src[1])
  n = next((g for g in cols if g in terms), cols[-1])
  N, M, size = _bound(n), 1, K
  for g in rows: M *= _bound(g)
  for g in cols: size *= _bound(g)
  # the weight (or the aligned part of it that ragged_matvec.py cut off) is read once per kernel, each element shared by
  # M <= MAX_ROWS rows
  if M > MAX_ROWS or size > weight.src[0].dtype.size or N is None: return None   # type: ignore[attr-defined]
  # one row: a product read along the reduce (x @ W.T) or a row chunk of x @ W; an unchunked x @ W (a short reduce) is
  # opt.py's
  if M == 1 and ((r not in terms and len(cols) == 1) or len({ind.src[0] for ind in loads}) < 2): return None
  opts: list = []
  try:
    if r in terms and K % 16 == 0 and K // 16 >= 4:
      opts.append(("VEC_R", r.arg, 16))
      k = apply_opt(k, opts[-1])
      for g in rows:
        opts.append(("UPCAST", g.arg, _bound(g)))
        k = apply_opt(k, opts[-1])
      # long rows of the weight side by side: several sequential streams per thread kept the memory busier than one (one
      # thread, 1x4096 @ 4096x4096 and 4096x11008 from DRAM: 12.4 -> 13.9 GB/s with two, interleaved pairs of runs; the
      # same from cache). One activation row takes ROW_STREAMS of them, each its own accumulator chain, which also hides
      # the FMA latency (1x4096 @ 4096x11008 on two threads, medians of three quiet interleaved pairs against two rows of
      # two accumulators: 3.70/3.86/3.81 -> 3.46/3.42/3.56 ms; 4096x4096 unchanged at 1.17 ms). Short rows (under a 4 KiB
      # page) stay one after another, a single stream (opt.py's matrix-vector note; 4 rows of 576 or 1536 measured
      # 5-15% slower from L2)
      # Several activation rows take up to 8 weight rows, as many as ROW_ACCS accumulators allow (rows x streams): each
      # load of x then feeds more FMAs, and x no longer fits in L1 beside the streams at 2+ rows of 4096 on a 32 KiB L1
      # (AMD Zen 4 with AVX-512, one core, CPU time, x @ W.T with W 4096x4096, weight rows old -> new: 2 activation rows
      # 2 (x 2 accumulators) -> 8 16.5 -> 30.1 GB/s (16: 23.2); 3 rows 2 -> 8 14.7 -> 21.0; 4 rows 2 -> 8 18.6 -> 24.9;
      # 5 rows 1 -> 4 12.3 -> 15.9; 7 rows 1 -> 4 10.6 -> 14.0; 8 rows 1 -> 4 7.5 -> 14.8 (8: 7.3, 64 accumulators)
      streams = 1
      if len(cols) == 1 and K >= 1024:
        cands = (ROW_STREAMS, 2) if M == 1 else tuple(s for s in (8, 4, 2) if M * s <= register_share(renderer, ROW_ACCS))
        streams = next((s for s in cands if N % s == 0 and N // s >= 2), 1)
        if streams > 1:
          opts.append(("UPCAST", n.arg, streams))
          k = apply_opt(k, opts[-1])
      left = _bound(_range(k, r.arg))
      # a second accumulator per product where few leave the FMA chain exposed (ROW_STREAMS rows are enough chains)
      if M < 4 and streams < ROW_STREAMS and left is not None and left % 2 == 0 and left // 2 >= 4:
        opts.append(("UPCAST_R", r.arg, 2))
        k = apply_opt(k, opts[-1])
      return tuple(opts), k
    if n in terms and N % 16 == 0:
      chunk = len(cols) > 1
      opts.append(("VEC", n.arg, 16))
      k = apply_opt(k, opts[-1])
      # vectors side by side along the outputs: each row of the weight read in longer runs, rows x vectors accumulators
      vecs = N // 16
      if chunk:
        # a row chunk: as much of each row at once as CHUNK_ACCS allows, so the rows stream (4096 wide: all of it at 1..2
        # activation rows, a quarter at 8)
        w = max(v for v in range(1, vecs + 1) if vecs % v == 0 and v * M <= CHUNK_ACCS)
      else:
        w = next((v for v in (8, 4, 2) if v * M <= register_share(renderer, ACCS) and vecs % v == 0 and vecs // v >= 2), 1)
        opts, k = _upcast_rows(k, rows, opts)
      if w > 1:
        opts.append(("UPCAST", n.arg, w))
        k = apply_opt(k, opts[-1])
      if chunk:
        # the rows innermost: each weight vector is loaded once and feeds every row's accumulator, instead of one pass
        # over the chunk's part of the weight per row, which at 8 rows was bound by L1 loads and stores, not by memory
        opts, k = _upcast_rows(k, rows, opts)
        if CHUNK_UNROLL > 1 and K % CHUNK_UNROLL == 0 and K // CHUNK_UNROLL >= 2:
          opts.append(("UNROLL", r.arg, CHUNK_UNROLL))
          k = apply_opt(k, opts[-1])
      return tuple(opts), k
  except CantVectorize: return None
  return None
