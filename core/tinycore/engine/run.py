"""Running a schedule: compile (cached) each kernel, allocate buffers just in time, free intermediates after last use."""
from __future__ import annotations
import operator, time
from typing import Callable
from dataclasses import dataclass
from tinycore.uop import UOp
from tinycore.device import Device, Buffer
from tinycore.helpers import DEBUG, GlobalCounters, colored
from tinycore.compiler import Compiler
from tinycore import progress
from tinycore.renderer import ProgramSpec
from tinycore.viz import switch as viz

def sym_infer(x, var_vals: dict) -> int:
  if isinstance(x, int): return x
  return int(x.substitute({v: UOp.const(v.dtype, val) for v, val in var_vals.items()}).ssimplify())

@dataclass
class CompiledRunner:
  p: ProgramSpec
  prg: Callable[..., float | None]
  device: str
  ast: UOp | None = None   # what it was compiled from (the conformance kit's --compile-also recompiles it elsewhere)
  accesses: list | None = None   # its accesses that depend on a Variable (engine/bounds.py), found on the first call
  proven: dict | None = None     # buffer sizes -> True if in bounds for every Variable value, else the set of values checked
  def __post_init__(self):
    self._static_size = all(isinstance(g, int) for g in self.p.global_size)   # no sym_infer per call
    self._work = self.p.ops + self.p.mem
  def __call__(self, bufs: list[Buffer], var_vals: dict[UOp, int], wait=False) -> float | None:
    p = self.p
    vals = tuple([var_vals[v] for v in p.vars]) if p.vars else ()
    if vals: self._check_bounds(bufs, vals)
    gs = p.global_size if self._static_size else tuple(sym_infer(g, var_vals) for g in p.global_size)
    return self.prg(*map(_handle, bufs), global_size=gs, local_size=p.local_size, vals=vals, wait=wait, work=self._work)

  def _check_bounds(self, bufs: list[Buffer], vals: tuple) -> None:
    from tinycore.engine.bounds import symbolic_accesses, check_bounds, OutOfBoundsAccess
    if self.accesses is None: self.accesses, self.proven = symbolic_accesses(self.p.uops or []), {}
    if not self.accesses: return
    sizes = tuple(b.nbytes for b in bufs)
    if (seen := self.proven.get(sizes)) is None:
      # in bounds for every value the Variables may take (a KV cache sized for the longest context): no check per call
      try: check_bounds(self.accesses, list(sizes), {}, self.p.name); self.proven[sizes] = True; return
      except OutOfBoundsAccess: self.proven[sizes] = seen = set()
    if seen is True or vals in seen: return
    check_bounds(self.accesses, list(sizes), dict(zip(self.p.vars, vals)), self.p.name)
    if len(seen) > 4096: seen.clear()
    seen.add(vals)

_handle = operator.attrgetter("_buf")   # a buffer's device memory, for the program's arguments

class CopyRunner:
  def __init__(self, nbytes: int): self.nbytes = nbytes
  def __call__(self, bufs: list[Buffer], var_vals, wait=False) -> float | None:
    dst, src = bufs
    st = time.perf_counter()
    dst.copyin(src.as_buffer())
    return time.perf_counter() - st if wait else None

class _RunnerCache(dict):
  """Compiled runners by (device, spec, ast). The eager schedule cache holds runners too: forgetting the runners (tests,
  a BEAM rerun) forgets the schedules that hold them, so the next realize compiles again."""
  def clear(self) -> None:
    super().clear()
    from tinycore.engine import schedule_cache
    schedule_cache.clear()

_runners: dict[tuple, CompiledRunner] = _RunnerCache()
def get_runner(device: str, ast: UOp) -> CompiledRunner:
  """Compile `ast` for `device` once per process (and once per machine through the compiler's disk cache)."""
  from tinycore.helpers import BEAM, NOOPT, ALLOW_TF32
  dev = Device[device]
  # BEAM, NOOPT and ALLOW_TF32 choose the kernel's optimizations: a runner made under other values is another kernel
  key = (device, str(dev.spec), ast, BEAM.value, NOOPT.value, ALLOW_TF32.value)
  if (r := _runners.get(key)) is not None: return r
  from tinycore.codegen import get_program
  opts = None
  from tinycore.codegen import is_fused
  if BEAM >= 1 and not is_fused(ast):
    from tinycore.codegen.search import beam_search
    opts = beam_search(ast, dev, int(BEAM.value))
  if (rec := viz.recorder) is not None: rec.begin_kernel(ast, device)
  p = get_program(ast, dev.renderer, opts, device=device)
  if DEBUG >= 4: print(p.src)
  # through load_cached: a cache entry that doesn't load (another compiler's, damaged) is recompiled, not fatal
  r = _runners[key] = CompiledRunner(p, dev.compiler.load_cached(p.src, lambda lib: dev.runtime(p.name, lib)), device, ast)
  if rec is not None: rec.end_kernel(p, dev)
  return r

@dataclass
class ExecItem:
  runner: Callable[..., float | None]
  bufs: list[Buffer]
  var_vals: dict
  def run(self, var_vals: dict | None = None, wait=False) -> float | None:
    for b in self.bufs:
      if not hasattr(b, "_buf"): b.allocate()
    debug = DEBUG.value
    if (prof := viz.profiler) is not None: st = prof.now()
    et = self.runner(self.bufs, {**self.var_vals, **var_vals} if var_vals else self.var_vals, wait=wait or debug >= 2 or prof is not None)
    if prof is not None: prof.record(self, st, et)
    GlobalCounters.kernel_count += 1
    if (p := getattr(self.runner, "p", None)) is not None:
      GlobalCounters.global_ops += p.ops
      GlobalCounters.global_mem += p.mem
    if et is not None: GlobalCounters.time_sum_s += et
    if debug >= 2:
      # a collective (distributed/) names itself and may have one buffer or none
      name = p.name if p is not None else getattr(self.runner, "name", None) or f"copy {self.bufs[1].device} -> {self.bufs[0].device}"
      ops = p.ops if p is not None else 0
      mem = p.mem if p is not None else self.bufs[0].nbytes if self.bufs else 0
      t = et or 1e-9
      print(f"*** {self.bufs[0].device if self.bufs else '':8s} {GlobalCounters.kernel_count:4d} {colored(name, 'cyan'):40s} "
            f"{t*1e6:9.2f} us  {ops/t*1e-9:8.2f} GFLOP/s  {mem/t*1e-9:7.2f} GB/s")
    return et

def lower_item(si) -> ExecItem:
  if si.is_copy: return ExecItem(CopyRunner(si.bufs[0].nbytes), si.bufs, si.var_vals)
  return ExecItem(get_runner(si.bufs[0].device, si.ast), si.bufs, si.var_vals)

def lower_schedule(schedule: list) -> list[ExecItem]:
  """lower_item for each item. A first run can compile for a while: once it has taken over a second, a progress bar on
  stderr (tinycore.progress: terminals, or PROGRESS=1) counts kernels compiled and kernels taken from a cache."""
  # DEBUG>=4 prints each kernel's source as it compiles: a bar redrawn between those lines would garble them
  if DEBUG >= 4 or not progress.enabled(): return [lower_item(si) for si in schedule]
  items, compiled, cached = [], 0, 0
  with progress.Bar("kernels", total=sum(not si.is_copy for si in schedule)) as bar:
    for si in schedule:
      before = Compiler.compiles
      items.append(lower_item(si))
      if si.is_copy: continue
      if Compiler.compiles > before: compiled += 1
      else: cached += 1   # from this process's runners or the disk cache
      bar.advance(detail=f"{compiled} compiled, {cached} from cache")
  return items

# TinyJit capture (engine/jit.py): each hook sees every ExecItem run_schedule is about to run
capture_hooks: list = []

def _frees_after(schedule: list, keep: set) -> dict[int, list[Buffer]]:
  """The memory plan: item index -> intermediates to free once it has run. An intermediate is a buffer this schedule
  writes first (not allocated before it, not one of the results in `keep`); it is freed after its last reader, and its
  block goes back to the allocator's LRU cache, where the next intermediate of that size reuses it."""
  born, last = set(), {}
  for i, si in enumerate(schedule):
    out = si.bufs[0].base
    if out not in keep and not out.is_allocated() and out not in last: born.add(out)
    for b in si.bufs: last[b.base] = i
  plan: dict[int, list[Buffer]] = {}
  for b in born: plan.setdefault(last[b], []).append(b)
  return plan

def run_schedule(schedule: list, var_vals: dict | None = None, keep: set | None = None) -> None:
  """Run `schedule` in order. Buffers are allocated as items run (ExecItem.run); with `keep` (the buffers the caller
  reads afterwards), intermediates are freed after their last use (_frees_after), so a long chain peaks at a few."""
  plan = _frees_after(schedule, {b.base for b in keep}) if keep is not None else {}
  run_items(lower_schedule(schedule), plan, var_vals)

def run_items(items: list[ExecItem], frees: dict[int, list[Buffer]], var_vals: dict | None = None) -> None:
  """Run lowered items in order, freeing frees[i] after item i; TinyJit's capture hooks see each item first."""
  st = time.perf_counter()
  for i, ei in enumerate(items):
    if capture_hooks:
      for h in capture_hooks: h(ei)
    ei.run(var_vals)
    if frees and (done := frees.get(i)):
      for b in done: b.deallocate()
  if DEBUG.value >= 1 and items:
    peak = f", peak memory {GlobalCounters.mem_peak/1e6:.2f} MB" if DEBUG >= 2 else ""
    print(f"realized {len(items)} kernels in {(time.perf_counter()-st)*1e3:.2f} ms{peak}")
