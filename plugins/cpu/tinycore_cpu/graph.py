"""The CPU's device graph: a TinyJit batch of kernels runs in one C call (graph_driver.c), with the GIL released.

Per kernel the driver gets its function pointer, a block of 64-bit arguments (buffer pointers, then Variable values),
its outer-loop size and how many pieces to cut it into for the worker team. Everything is laid out once; a replay only
writes this call's input buffer pointers and Variable values into the blocks (and the sizes of kernels whose size
depends on a Variable), then makes one foreign call instead of one per kernel.

Splitting kernels between threads pays when the threads run at once; on a machine with more runnable threads than
cores a worker is often descheduled in the middle of its piece and the caller waits for it, and the batch is faster on
the caller alone. Which is faster is measured, not guessed: each graph times its own replays both ways (_SplitChooser)
and runs the faster, trying the other now and then.

Declined (the kernels replay one by one): DEBUG_BUFFERS (its guard checks each kernel's buffers around its own call),
a program that isn't a CPUProgram, no C compiler to build the driver with."""
from __future__ import annotations
import atexit, ctypes, functools, time
from collections import deque
from tinycore.engine.jit_graph import GraphKernel, GraphUnsupported
from tinycore_cpu import runtime

MAXARGS = 126   # buffers + Variables per kernel the driver has a call for (graph_driver.c)
# a kernel of at least this much work (FLOPs + bytes) is split between the threads; smaller ones run on the caller. The
# team's threads are already awake between kernels of a replay, so a split pays off far below the per-call pool's 2 MB
SPLIT_WORK = 1 << 19

class _Kernel(ctypes.Structure):
  _fields_ = [("fn", ctypes.c_void_p), ("args", ctypes.c_void_p), ("nargs", ctypes.c_int64), ("n", ctypes.c_int64), ("chunks", ctypes.c_int64)]

def _call_cases() -> str:
  """One `case` per arity: the kernel is called through a pointer of exactly its own type."""
  lines = []
  for n in range(MAXARGS + 1):
    params = ", ".join(["I"] * (n + 2))
    args = "".join(f"a[{i}], " for i in range(n))
    lines.append(f"    case {n}: ((void (*)({params}))fn)({args}s, e); break;")
  return "\n".join(lines)

@functools.cache
def _driver():
  """The compiled driver library (once per process, from the disk cache after the first), or None without a C compiler."""
  from tinycore_cpu.compiler_c import CCompiler, find_cc
  if find_cc() is None: return None
  src = runtime.c_source("graph_driver.c").replace("TC_CALL_CASES", _call_cases())
  lib = runtime.CPUProgram("tc_graph_run", CCompiler().compile_cached(src)).lib
  lib.tc_graph_run.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
  lib.tc_graph_run.restype = ctypes.c_int64
  lib.tc_graph_workers.restype = ctypes.c_int64
  # the workers are plain pthreads Python doesn't know about: joined at exit so none spins while the process tears down
  atexit.register(lib.tc_graph_shutdown)
  return lib

def _chunks(n: int, work: int, threads: int) -> int:
  """Pieces of a kernel's outer loop: 1 (the caller alone) for small kernels, else per thread; several per thread for
  big ones so a thread slowed by another process on its core holds up only a small piece (runtime.py's rule)."""
  if work < SPLIT_WORK or threads <= 1 or n <= 1: return 1
  return min(n, threads * (runtime.CHUNKS_PER_THREAD if work >= runtime.DYNAMIC_WORK else 1))

def _address(prg) -> int:
  fxn = getattr(prg, "fxn", None)
  if not isinstance(prg, runtime.CPUProgram) or fxn is None: raise GraphUnsupported(f"{type(prg).__name__} is not a CPU program")
  return ctypes.cast(fxn, ctypes.c_void_p).value or 0

class _SplitChooser:
  """Split between the threads, or the caller alone: the median of each way's last few replay times decides. The
  other way is timed again every 16th replay, or every 64th once one is 30% faster (so a wrong pick costs little).
  Until the caller alone has been timed SEED times it is only tried every 16th replay: splitting is right on a quiet
  machine, and alternating from the start made a short timing loop (5 replays) measure half of them on one core.
  The decision is brought up to date when a time is recorded (only the median of the way just timed can change), so a
  pick is a counter and a comparison: sorting both windows on every pick cost ~1-3 us per replay, a tenth of a small
  matrix-vector product's."""
  WINDOW, SEED, PROBE = 5, 3, 16
  def __init__(self):
    # indexed by the way (False: the caller alone, True: split)
    self.times: list[deque] = [deque(maxlen=self.WINDOW), deque(maxlen=self.WINDOW)]
    self.medians = [0.0, 0.0]
    self.n = 0
    self.split, self.every = True, self.PROBE   # the way to take, and how often to probe the other
  def pick(self) -> bool:
    self.n += 1
    return (not self.split) if self.n % self.every == 0 else self.split
  def record(self, split: bool, seconds: float) -> None:
    (t := self.times[split]).append(seconds)
    (m := self.medians)[split] = sorted(t)[len(t) >> 1]
    if len(self.times[False]) < self.SEED: return   # split, probing the caller alone now and then
    s, a = m[True], m[False]
    self.split, self.every = s <= a, (64 if s > 1.3 * a or a > 1.3 * s else 16)

class CPUGraph:
  def __init__(self, kernels: list[GraphKernel], inputs: dict[tuple[int, int], int]):
    if runtime.GUARD is not None: raise GraphUnsupported("DEBUG_BUFFERS checks every kernel's buffers around its own call")
    if (drv := _driver()) is None: raise GraphUnsupported("no C compiler to build the graph driver with")
    self.run, self.threads = drv.tc_graph_run, runtime.cpu_count()
    too_many = [k.name for k in kernels if len(k.bufs) + len(k.vals) > MAXARGS]
    if too_many: raise GraphUnsupported(f"kernel {too_many[0]} has more than {MAXARGS} arguments")
    self.args = (ctypes.c_int64 * max(1, sum(len(k.bufs) + len(k.vals) for k in kernels)))()
    self.table = (_Kernel * len(kernels))()
    self.input_slots: list[tuple[int, int]] = []      # (argument index, input index)
    self.var_slots: list[tuple[int, object]] = []     # (argument index, Variable)
    self.sized: list[tuple[int, GraphKernel]] = []     # kernels whose size depends on a Variable
    base, at = ctypes.addressof(self.args), 0
    for j, k in enumerate(kernels):
      e = self.table[j]
      e.fn, e.args, e.nargs = _address(k.prg), base + 8 * at, len(k.bufs) + len(k.vals)
      for i, b in enumerate(k.bufs):
        if b is None: self.input_slots.append((at, inputs[(j, i)]))
        else: self.args[at] = b._buf
        at += 1
      for v in k.vals:
        if isinstance(v, int): self.args[at] = v
        else: self.var_slots.append((at, v))
        at += 1
      if all(isinstance(g, int) for g in k.global_size): self._size(e, k.global_size, k.work)
      else: self.sized.append((j, k))
    self.kernels = kernels   # the programs stay loaded while the table points at them
    self.table_at = ctypes.addressof(self.table)   # an int converts faster than the array on every call
    # with no kernel big enough to split, nothing to choose (and no team to start)
    self.chooser: _SplitChooser | None = _SplitChooser() if self.threads > 1 and (self.sized or any(
      self.table[j].chunks > 1 for j in range(len(kernels)))) else None

  def _size(self, e: _Kernel, global_size: tuple, work: int) -> None:
    e.n = global_size[0] if global_size else 1
    e.chunks = _chunks(e.n, work, self.threads)

  def __call__(self, input_bufs: list, var_vals: dict) -> None:
    args = self.args
    for at, k in self.input_slots: args[at] = input_bufs[k]._buf
    for at, v in self.var_slots: args[at] = var_vals[v]
    for j, k in self.sized: self._size(self.table[j], k.size(var_vals), k.work)
    if (c := self.chooser) is None: rc = self.run(self.table_at, len(self.kernels), self.threads)
    else:
      split = c.pick()
      st = time.perf_counter()
      rc = self.run(self.table_at, len(self.kernels), self.threads if split else 1)
      c.record(split, time.perf_counter() - st)
    if rc != 0:
      raise RuntimeError(f"CPU graph: kernel {self.kernels[-rc - 1].name} has an arity the driver has no call for")
