"""The profiler: one event per kernel run and copy, timed by the device (the runner's own timer when asked to wait),
with the bytes and FLOPs it moved and the memory in use, and its export as a Chrome trace (what Perfetto and
chrome://tracing open: the "JSON Array/Object format", complete events `ph: X`, counters `ph: C`)."""
from __future__ import annotations
import json, time
from typing import Any, NamedTuple
from tinycore.helpers import GlobalCounters
from tinycore.fileio import atomic_write

class Event(NamedTuple):
  name: str
  device: str
  kind: str        # "kernel" or "copy"
  start_ns: int    # since the profiler started
  dur_ns: int      # the device's time when it reports one, else the host's around the call
  flops: int
  nbytes: int
  mem_used: int    # bytes allocated on all devices right after it ran (GlobalCounters.mem_used)
  mem_peak: int    # the high-water mark so far (GlobalCounters.mem_peak)

class Profiler:
  def __init__(self):
    self.t0 = time.perf_counter_ns()
    self.events: list[Event] = []
  def now(self) -> int: return time.perf_counter_ns()
  def record(self, item: Any, st: int, device_s: float | None) -> None:
    """`item` (an ExecItem) started at `st` (perf_counter_ns) and took `device_s` seconds by its device's timer."""
    end = time.perf_counter_ns()
    dur = int(device_s * 1e9) if device_s is not None else end - st
    p, bufs = getattr(item.runner, "p", None), item.bufs
    if p is not None: ev = Event(p.name, str(bufs[0].device), "kernel", st - self.t0, dur, p.ops, p.mem, 0, 0)
    else: ev = Event(f"copy {bufs[1].device} -> {bufs[0].device}", str(bufs[0].device), "copy", st - self.t0, dur, 0, bufs[0].nbytes, 0, 0)
    self.events.append(ev._replace(mem_used=GlobalCounters.mem_used, mem_peak=GlobalCounters.mem_peak))

def chrome_trace(events: list[Event] | list[list]) -> dict:
  """The Chrome trace of `events` (Event tuples, or the lists a saved recording holds): a process per device, kernels
  on thread 0 and copies on thread 1, a memory counter per device; times in microseconds as the format wants."""
  pids: dict[str, int] = {}
  out: list[dict] = []
  for e in events:
    name, device, kind, st, dur, flops, nbytes, used, peak = e
    if (pid := pids.get(device)) is None:
      pid = pids[device] = len(pids) + 1
      out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": device}})
      out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "kernels"}})
      out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": 1, "args": {"name": "copies"}})
    secs = max(dur, 1) / 1e9
    out.append({"name": name, "cat": kind, "ph": "X", "pid": pid, "tid": 0 if kind == "kernel" else 1, "ts": st / 1e3, "dur": max(dur, 1) / 1e3,
                "args": {"flops": flops, "bytes": nbytes, "GFLOP/s": round(flops / secs / 1e9, 3), "GB/s": round(nbytes / secs / 1e9, 3)}})
    out.append({"name": "memory", "ph": "C", "pid": pid, "ts": (st + dur) / 1e3, "args": {"used MB": used / 1e6, "peak MB": peak / 1e6}})
  return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": {"generator": "tinycore PROFILE=1"}}

def write_chrome_trace(prof: Profiler, path: str) -> None:
  atomic_write(path, json.dumps(chrome_trace(prof.events), separators=(",", ":")))
