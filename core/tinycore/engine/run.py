"""Running a schedule: compile (cached) each kernel, allocate buffers just in time, free intermediates after last use."""
from __future__ import annotations
import time
from dataclasses import dataclass
from tinycore.uop import UOp
from tinycore.device import Device, Buffer
from tinycore.helpers import DEBUG, GlobalCounters, colored
from tinycore.renderer import ProgramSpec

def sym_infer(x, var_vals: dict) -> int:
  if isinstance(x, int): return x
  return int(x.substitute({v: UOp.const(v.dtype, val) for v, val in var_vals.items()}).ssimplify())

@dataclass
class CompiledRunner:
  p: ProgramSpec
  prg: object
  device: str
  ast: UOp | None = None   # what it was compiled from (the conformance kit's --compile-also recompiles it elsewhere)
  def __call__(self, bufs: list[Buffer], var_vals: dict[UOp, int], wait=False) -> float | None:
    vals = tuple(var_vals[v] for v in self.p.vars)
    gs = tuple(sym_infer(g, var_vals) for g in self.p.global_size)
    return self.prg(*[b._buf for b in bufs], global_size=gs, local_size=self.p.local_size, vals=vals, wait=wait,
                    work=self.p.ops + self.p.mem)

class CopyRunner:
  def __init__(self, nbytes: int): self.nbytes = nbytes
  def __call__(self, bufs: list[Buffer], var_vals, wait=False) -> float | None:
    dst, src = bufs
    st = time.perf_counter()
    dst.copyin(src.as_buffer())
    return time.perf_counter() - st if wait else None

_runners: dict[tuple, CompiledRunner] = {}
def get_runner(device: str, ast: UOp) -> CompiledRunner:
  """Compile `ast` for `device` once per process (and once per machine through the compiler's disk cache)."""
  dev = Device[device]
  key = (device, str(dev.spec), ast)
  if (r := _runners.get(key)) is not None: return r
  from tinycore.codegen import get_program
  from tinycore.helpers import BEAM
  opts = None
  if BEAM >= 1:
    from tinycore.codegen.search import beam_search
    opts = beam_search(ast, dev, int(BEAM.value))
  p = get_program(ast, dev.renderer, opts)
  if DEBUG >= 4: print(p.src)
  # through load_cached: a cache entry that doesn't load (another compiler's, damaged) is recompiled, not fatal
  r = _runners[key] = CompiledRunner(p, dev.compiler.load_cached(p.src, lambda lib: dev.runtime(p.name, lib)), device, ast)
  return r

@dataclass
class ExecItem:
  runner: object
  bufs: list[Buffer]
  var_vals: dict
  def run(self, var_vals: dict | None = None, wait=False) -> float | None:
    for b in self.bufs: b.ensure_allocated()
    et = self.runner(self.bufs, {**self.var_vals, **(var_vals or {})}, wait=wait or DEBUG >= 2)
    GlobalCounters.kernel_count += 1
    if isinstance(self.runner, CompiledRunner):
      GlobalCounters.global_ops += self.runner.p.ops
      GlobalCounters.global_mem += self.runner.p.mem
    if et is not None: GlobalCounters.time_sum_s += et
    if DEBUG >= 2:
      name = self.runner.p.name if isinstance(self.runner, CompiledRunner) else f"copy {self.bufs[1].device} -> {self.bufs[0].device}"
      ops = self.runner.p.ops if isinstance(self.runner, CompiledRunner) else 0
      mem = self.runner.p.mem if isinstance(self.runner, CompiledRunner) else self.bufs[0].nbytes
      t = et or 1e-9
      print(f"*** {self.bufs[0].device:8s} {GlobalCounters.kernel_count:4d} {colored(name, 'cyan'):40s} "
            f"{t*1e6:9.2f} us  {ops/t*1e-9:8.2f} GFLOP/s  {mem/t*1e-9:7.2f} GB/s")
    return et

def lower_item(si) -> ExecItem:
  if si.is_copy: return ExecItem(CopyRunner(si.bufs[0].nbytes), si.bufs, si.var_vals)
  return ExecItem(get_runner(si.bufs[0].device, si.ast), si.bufs, si.var_vals)

# TinyJit capture (engine/jit.py): each hook sees every ExecItem run_schedule is about to run
capture_hooks: list = []

def run_schedule(schedule: list, var_vals: dict | None = None) -> None:
  # buffers are allocated as items run (ExecItem.run); intermediates are freed when the schedule drops them and their
  # blocks go back to the allocator's LRU cache, where later allocations of the same size reuse them
  st = time.perf_counter()
  for si in schedule:
    ei = lower_item(si)
    for h in capture_hooks: h(ei)
    ei.run(var_vals)
  if DEBUG >= 1 and schedule:
    print(f"realized {len(schedule)} kernels in {(time.perf_counter()-st)*1e3:.2f} ms")
