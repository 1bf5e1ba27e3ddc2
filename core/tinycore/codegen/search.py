"""BEAM search: time real compiled variants of a kernel and keep the fastest (`BEAM=n`, n = beam width).

Each round extends every kept candidate by one more optimization action (tile axis and width, a wider tile of several
vectors, a second tile axis (the renderer's taller matmul tile too, clamped where it doesn't divide the rows), then the
loop order and the outer loop's grouping), compiles and times the new variants
on scratch buffers, and keeps the n fastest. The winner is cached on disk per (renderer, kernel) so a later process
pays nothing (`IGNORE_BEAM_CACHE=1` searches again)."""
from __future__ import annotations
import contextlib, json, os, time, warnings
from typing import Callable
from tinycore.uop import UOp, Ops
from tinycore.digest import sha256
from tinycore.helpers import cache_dir, ContextVar, IGNORE_BEAM_CACHE, DEBUG
from tinycore.codegen import opt as O
from tinycore.fileio import atomic_write, read_regular
from tinycore import progress

BEAM_DEBUG = ContextVar("BEAM_DEBUG", 0)
BEAM_TIME_LIMIT = ContextVar("BEAM_TIME_LIMIT", 60.0)   # seconds of search per kernel

def _row_axes(k: UOp, first) -> list[UOp]:
  """Output axes a taller row tile may take, best first as in opt._second_axes, but any length (12 rows needn't divide
  them): the reused ones other than the vector axis."""
  wide = [ind for ind in O._loads(k) if ind.arg is not None or any(g.arg == first for g in ind.toposort() if g.op is Ops.RANGE)]
  cands = [g for g in reversed(O._globals(k)) if g.arg != first and O._bound(g) and O._reused(k, g)]
  return sorted(cands, key=lambda g: -sum(g not in ind.toposort() for ind in wide))[:2]

def next_actions(k: UOp, renderer, applied: tuple) -> list[tuple]:
  """Actions that may follow `applied` on kernel `k` (which already has them applied)."""
  kinds = [a[0] for a in applied]
  if not applied:
    out = []
    vec = getattr(renderer, "vector_types", False)
    for g in O._tile_axes(k)[:3]:
      for amt in (16, 8, 4):
        if O._bound(g) % amt: continue
        if vec and amt >= 8: out.append(("VEC", g.arg, amt))
        # lanes stored one by one where the output isn't contiguous along them (a conv's output channels into NCHW)
        if vec and amt == 16 and getattr(renderer, "register_block", None): out.append(("VEC_S", g.arg, amt))
        out.append(("UPCAST", g.arg, amt))
    for r in [u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "r"]:
      if O._bound(r) and O._bound(r) >= 64 and O._unit_stride(k, r):
        out += [("UPCAST_R", r.arg, a) for a in (4, 8, 16) if O._bound(r) % a == 0]
        if vec and O._bound(r) % 16 == 0: out.append(("VEC_R", r.arg, 16))
    return out
  first = applied[0][1]
  # a widened tile: the first action's axis unrolled again (2 or 4 vectors side by side, the CPU register block)
  widened = len(applied) == 2 and applied[1][0] == "UPCAST" and applied[1][1] == first
  if kinds[0] in ("VEC", "VEC_S", "UPCAST") and (len(applied) == 1 or widened):
    # (a whole axis too where it isn't the outermost loop the threads split: the 8 rows of a row-panel operand)
    outer = O._globals(k)[0].arg if O._globals(k) else None
    second = [("UPCAST", g.arg, a) for g in O._second_axes(k, first)[:2] for a in (2, 4, 8)
              if O._bound(g) % a == 0 and (O._bound(g) // a >= 2 or g.arg != outer)]
    if kinds[0] == "VEC" and (blk := getattr(renderer, "register_block", None)):
      # the renderer's taller matmul tile (12 rows with AVX-512), and the block's rows where they don't divide the axis,
      # the last tile clamped (UPCAST_T, also where 12 divides: gcc spills a plain 12-row UPCAST, codegen/opt.py)
      tall = getattr(renderer, "matmul_tall_rows", 0)
      second += [("UPCAST_T", g.arg, t) for g in _row_axes(k, first) for t in (tall, blk[0])
                 if t and O._bound(g) >= 2 * t and (t == tall or O._bound(g) % t)]
    if kinds[0] == "VEC_S":   # a conv's pixel rows: 7 where no multiple of 4 divides them
      second += [("UPCAST", g.arg, 7) for g in O._pixel_axes(k, first, renderer.register_block)[:2] if O._bound(g) % 7 == 0]
    if widened or kinds[0] not in ("VEC", "VEC_S"): return second
    rest = next((O._bound(r) for r in O._globals(k) if r.arg == first), None)   # None: the vector took the whole axis
    return [("UPCAST", first, a) for a in (2, 4) if rest and rest % a == 0] + second
  if kinds[0] == "VEC_R" and len(applied) <= 2:
    # vectors along the reduce: a block of outputs sharing the loads (4 rows of g times 4 of W.T in a dot-form matmul)
    done = {a[1] for a in applied[1:]}
    return [("UPCAST", g.arg, a) for g in O._sharing_axes(k) if g.arg not in done for a in (2, 4) if O._bound(g) % a == 0]
  if "SWAP" not in kinds and kinds[0] in ("VEC", "VEC_S", "UPCAST"):
    # the outermost loop (split across threads) swapped with another output axis: the vector axis, or the axis of the
    # packed panels the vector walks inside, so one panel stays in cache per thread
    glob = O._globals(k)
    return [("SWAP", glob[0].arg, g.arg) for g in glob[1:]] if glob else []
  if kinds[-1] == "SWAP":
    # the new outermost loop in groups, the inner part innermost (a row tile meets several packed panels in turn)
    glob = O._globals(k)
    b = O._bound(glob[0]) if glob else None
    return [("GROUP", glob[0].arg, a) for a in (2, 4, 8) if b and b % a == 0 and b // a >= 2]
  return []

def beam_cache_path(renderer, unoptimized_src: str) -> str:
  """Where the winner for a kernel (named by its unoptimized source) on this renderer is cached."""
  key = sha256(f"{type(renderer).__name__}\0{renderer.name}\0{renderer.arch}\0{unoptimized_src}".encode()).hexdigest()
  return os.path.join(cache_dir(), "beam", key[:2], key + ".json")

def _tuples(x):
  """JSON's lists back to the tuples actions and range args are made of."""
  return tuple(_tuples(v) for v in x) if isinstance(x, list) else x

def _cached_opts(path: str, k0: UOp, renderer=None) -> tuple | None:
  """The cached winner for this kernel, or None when there is none usable. An entry that isn't a regular small JSON file
  of actions, or whose actions don't fit the kernel (a poisoned or stale entry: an amount that doesn't divide its axis
  would compute garbage), is dropped with a warning so the search runs again."""
  try: opts = _tuples(json.loads(read_regular(path, 1 << 20)))
  except FileNotFoundError: return None
  except (OSError, ValueError, RecursionError) as e: why = f"{type(e).__name__}: {e}"
  else:
    try:
      if not isinstance(opts, tuple): raise O.InvalidOpt(f"expected a list of actions, got {type(opts).__name__}")
      from tinycore.codegen.opt_smem import is_gemm, check_gemm_actions
      if is_gemm(opts): check_gemm_actions(k0, renderer, opts)
      else: O.apply_opts(k0, opts)
      return opts
    except O.InvalidOpt as e: why = str(e)
    except Exception as e: why = f"its actions fail on this kernel: {type(e).__name__}: {e}"   # e.g. CantVectorize
  warnings.warn(f"BEAM cache: dropping invalid entry {path} ({why}); searching again")
  try: os.unlink(path)
  except OSError: pass
  return None

def beam_search(ast: UOp, dev, width: int) -> tuple:
  from tinycore.codegen import get_program, prepare_kernel
  from tinycore.device import Buffer
  renderer = dev.renderer
  base = get_program(ast, renderer, opts=())
  path = beam_cache_path(renderer, base.src)
  k0 = prepare_kernel(ast, renderer.device, renderer)   # the kernel get_program applies the actions to (ranges split, device rules)
  if not IGNORE_BEAM_CACHE and (cached := _cached_opts(path, k0, renderer)) is not None: return cached
  if base.vars: return O.heuristic_opts(k0, renderer)   # symbolic sizes: no timing
  # scratch buffers of the kernel's sizes; values don't matter for timing
  glob = sorted({u.arg: u for u in base.uops if u.op is Ops.DEFINE_GLOBAL}.items())
  bufs = [Buffer(dev.device, max(u.dtype.size, 1), u.dtype.base).allocate() for _, u in glob]  # type: ignore[attr-defined]
  timed: dict[tuple, float] = {}
  runs: dict[tuple, Callable[[], float]] = {}
  def time_opts(opts: tuple) -> float:
    if opts in timed: return timed[opts]
    try:
      p = get_program(ast, renderer, opts=opts)
      prg = dev.compiler.load_cached(p.src, lambda lib: dev.runtime(p.name, lib))
      run = runs[opts] = lambda: prg(*[b._buf for b in bufs], global_size=p.global_size, local_size=p.local_size, vals=(), wait=True,
                                     work=p.ops + p.mem)
      t = run()
      # only contenders get repeat runs (the minimum of 3): a variant 2x slower than the best is out already
      best = min(timed.values(), default=float("inf"))
      if t < 2 * best: t = min([t] + [run() for _ in range(2)])
    except Exception as e:
      if BEAM_DEBUG: print(f"  beam: {opts} failed: {type(e).__name__}: {e}")
      t = float("inf")
    timed[opts] = t
    if BEAM_DEBUG: print(f"  beam: {t*1e6:10.1f} us  {opts}")
    return t
  st = time.perf_counter()
  # progress on long searches (tinycore.progress: stderr terminals or PROGRESS=1); BEAM_DEBUG prints every variant instead
  with progress.Bar(f"beam {base.name}") if not BEAM_DEBUG else contextlib.nullcontext() as bar:
    best = _final(_search(k0, renderer, width, time_opts, timed, st, bar), O.heuristic_opts(k0, renderer), timed, runs)
  if DEBUG >= 1 or BEAM_DEBUG: print(f"beam: {len(timed)} variants in {time.perf_counter()-st:.1f} s, best {timed[best]*1e6:.1f} us {best}")
  try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write(path, json.dumps(best))
  except OSError: pass   # a read-only or full cache disk only costs the next process a search
  return best

def _final(best: tuple, heuristic: tuple, timed: dict, runs: dict, rounds: int = 4) -> tuple:
  """The fastest of the 3 best variants and the heuristic's, timed again in turn (`rounds` times, each keeping its
  minimum): one round of 3 runs per variant picked a 1024^3 matmul 1.6x slower than the heuristic's on a loaded
  2-core machine (load 7.6), where a burst of load had landed on the heuristic's runs."""
  top = [o for o in sorted(timed, key=timed.get)[:3] if timed[o] < float("inf")]
  cands = list(dict.fromkeys(top + ([heuristic] if heuristic in runs and timed.get(heuristic, float("inf")) < float("inf") else [])))
  if len(cands) < 2: return best
  for _ in range(rounds):
    for o in cands:
      try: timed[o] = min(timed[o], runs[o]())
      except Exception: timed[o] = float("inf")
  return min(cands, key=timed.get)

def _search(k0: UOp, renderer, width: int, time_opts, timed: dict, st: float, bar) -> tuple:
  """The beam rounds, until no action extends a kept candidate or the time limit is spent; the fastest variant's actions."""
  beam: list[tuple] = [()]
  time_opts(())
  time_opts(O.heuristic_opts(k0, renderer))
  from tinycore.codegen.opt_smem import gemm_candidates, gemm_actions
  # a GPU tensor-core matmul: the search is over shared-memory GEMM tiles (block, warps, stages, swizzle), default first
  for i, t in enumerate(gemm_candidates(k0, renderer) if renderer.has_local else []):
    if i and time.perf_counter() - st > BEAM_TIME_LIMIT.value: break
    time_opts(gemm_actions(t))
    beam = []
  while beam:
    nxt: list[tuple] = []
    for opts in beam:
      try: k = O.apply_opts(k0, opts)
      except Exception: continue
      for a in next_actions(k, renderer, opts):
        try: O.apply_opt(k, a)
        except Exception: continue
        nxt.append(opts + (a,))
    if not nxt: break
    for i, opts in enumerate(nxt):
      if time.perf_counter() - st > BEAM_TIME_LIMIT.value:   # bound the time per kernel: keep the best found so far
        nxt = nxt[:i]; break
      time_opts(opts)
      if bar is not None: bar.update(len(timed), detail=f"variants timed, best {min(timed.values())*1e6:.0f} us")
    if not nxt: break
    beam = sorted(set(nxt), key=lambda o: timed[o])[:width]
  return min(timed, key=timed.get)
