"""The collective engine contract and how one is chosen.

An engine moves bytes between the processes of a job: MPI through mpi4py on host memory (core's fallback, in
mpi_engine.py), NCCL on NVIDIA device memory (contributed by tinycore-nv through the `tinycore_collectives` hook).
Core never names one: it asks the plugins of the tensor's device for engines, best first, and falls back to the host
engine. TINYCORE_COLLECTIVE=<name> asks for one engine by name (an error says which exist if it is not found).

Every operation takes `tinycore.device.Buffer`s (allocated, contiguous, same dtype) and a deadline: an engine must
raise CollectiveTimeout instead of waiting forever on a peer that died or hangs."""
from __future__ import annotations
import os
from typing import Any
from tinycore.device import Buffer
from tinycore.distributed.launcher import LaunchInfo

REDUCE_OPS = ("sum", "mean", "max", "min")

class CollectiveError(RuntimeError):
  """A collective could not run: no engine, mismatched buffers, an engine failure."""

class CollectiveTimeout(CollectiveError):
  """A peer did not take part in a collective before the deadline: it died, hangs, or the ranks called different
  collectives. The job's communicator is unusable afterwards."""

class CollectiveEngine:
  """One communicator over every rank of the job. Subclasses set `name` and implement the operations; `available()`
  says why the engine can't run here (None when it can), without side effects."""
  name = "?"
  def __init__(self, launch: LaunchInfo, timeout: float): self.launch, self.timeout = launch, timeout
  @classmethod
  def available(cls, launch: LaunchInfo) -> str | None: return None
  @property
  def rank(self) -> int: raise NotImplementedError
  @property
  def world_size(self) -> int: raise NotImplementedError
  # out and inp may be the same buffer (in place) for allreduce and broadcast
  def allreduce(self, out: Buffer, inp: Buffer, op: str) -> None: raise NotImplementedError
  def allgather(self, out: Buffer, inp: Buffer) -> None: raise NotImplementedError          # out: world_size * inp
  def reduce_scatter(self, out: Buffer, inp: Buffer, op: str) -> None: raise NotImplementedError   # inp: world_size * out
  def broadcast(self, out: Buffer, inp: Buffer, root: int) -> None: raise NotImplementedError
  def send(self, buf: Buffer, dst: int, tag: int) -> None: raise NotImplementedError
  def recv(self, buf: Buffer, src: int, tag: int) -> None: raise NotImplementedError
  def barrier(self) -> None: raise NotImplementedError
  # nonblocking allreduce (gradient buckets overlapped with backward): start returns a handle, wait finishes it (the
  # result is in `out` only after wait), progress lets an engine without its own progress thread move it along. The
  # default runs the blocking allreduce in start, so an engine without a nonblocking form still works, unoverlapped.
  def allreduce_start(self, out: Buffer, inp: Buffer, op: str) -> Any:
    self.allreduce(out, inp, op)
    return None
  def allreduce_wait(self, handle: Any) -> None: pass
  def progress(self, handle: Any) -> None: pass
  def abort(self, code: int = 1) -> None:
    """End every rank of the job (after an error one rank can't recover from); default: this process only."""
    os._exit(code)
  def close(self) -> None: pass

def engine_classes(device: str) -> list[type[CollectiveEngine]]:
  """Engines for `device`: what its plugins contribute (best first), then core's host engines (MPI under an MPI
  launcher, gloo under torchrun), then the one-process engine (a script run without a launcher)."""
  from tinycore import plugins
  from tinycore.device import Device
  from tinycore.distributed.mpi_engine import MPIEngine
  from tinycore.distributed.local_engine import LocalEngine
  from tinycore.distributed.gloo_engine import GlooEngine
  found: list[type[CollectiveEngine]] = []
  base = device.split(":")[0].upper()
  try: Device[device]   # opens the device, which loads the plugin that provides it
  except Exception: pass   # an unknown device still gets the host engine; the tensor op reports the device error itself
  for _, xs in plugins.call("tinycore_collectives", device=base):
    found += [x for x in (xs if isinstance(xs, (list, tuple)) else [xs]) if isinstance(x, type) and issubclass(x, CollectiveEngine)]
  return found + [MPIEngine, GlooEngine, LocalEngine]

def choose(device: str, launch: LaunchInfo, timeout: float, want: str | None = None) -> CollectiveEngine:
  """The first engine for `device` that can run here (or the one named `want`), opened."""
  classes = engine_classes(device)
  if want is not None:
    named = [c for c in classes if c.name.lower() == want.lower()]
    if not named: raise CollectiveError(f"no collective engine named {want!r} for device {device}; there are: {', '.join(c.name for c in classes)}")
    classes = named
  why: list[str] = []
  for cls in classes:
    if (reason := cls.available(launch)) is not None:
      why.append(f"{cls.name}: {reason}")
      continue
    return cls(launch, timeout)
  raise CollectiveError(f"no collective engine can run for device {device}: " + "; ".join(why))

def host_view(buf: Buffer) -> tuple[Any, bool]:
  """A numpy array over `buf`'s bytes and whether it *is* the buffer's memory (CPU-like allocators) rather than a copy
  (devices: one copy out). A result written into a copy must be copied back with `write_back`."""
  import numpy as np
  buf.ensure_allocated()
  if buf._base is None:
    try:
      buf.compiled.synchronize()
      return np.frombuffer(buf.allocator._as_buffer(buf._buf), dtype=np.uint8, count=buf.nbytes), True
    except NotImplementedError: pass
  return np.frombuffer(buf.as_buffer(), dtype=np.uint8, count=buf.nbytes), buf._base is not None and _zero_copy(buf._base)

def _zero_copy(buf: Buffer) -> bool:
  try: buf.allocator._as_buffer(buf._buf); return True
  except NotImplementedError: return False

def write_back(buf: Buffer, arr: Any, is_view: bool) -> None:
  if not is_view: buf.copyin(memoryview(arr).cast("B"))
