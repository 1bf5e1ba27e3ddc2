"""The host collective engine: MPI through mpi4py, on host memory.

Buffers are read through `host_view`: on allocators with host memory (CPU) numpy arrays *are* the buffers, so MPI
reads and writes them in place with no copy; elsewhere each buffer is copied out once and the result copied in once.
Every operation is nonblocking (MPI_I*) and polled against a deadline, because a blocking MPI call waits forever for
a peer that died or hangs; past the deadline CollectiveTimeout names the operation, the ranks and the timeout."""
from __future__ import annotations
import os, time, weakref
from typing import Any
from tinycore.device import Buffer
from tinycore.distributed.engine import CollectiveEngine, CollectiveError, CollectiveTimeout, host_view, write_back
from tinycore.distributed.launcher import LaunchInfo

def _mpi() -> Any:
  from mpi4py import MPI
  return MPI

class MPIEngine(CollectiveEngine):
  name = "mpi"

  @classmethod
  def available(cls, launch: LaunchInfo) -> str | None:
    # torchrun's processes are not an MPI job: each would be a singleton MPI world of one (the gloo engine serves them)
    if launch.launcher == "torchrun" and launch.world_size > 1: return "torchrun started this job, not an MPI launcher (mpirun, srun)"
    try: _mpi()
    except ImportError as e: return f"mpi4py is not installed ({e}); pip install mpi4py (needs an MPI such as Debian's libopenmpi-dev)"
    except Exception as e: return f"MPI failed to start: {type(e).__name__}: {e}"
    return None

  def __init__(self, launch: LaunchInfo, timeout: float):
    super().__init__(launch, timeout)
    MPI = _mpi()
    self.MPI, self.comm = MPI, MPI.COMM_WORLD.Dup()   # our own communicator: the user's MPI traffic can't match ours
    self.broken: str | None = None
    if launch.launcher != "none" and (launch.rank, launch.world_size) != (self.comm.Get_rank(), self.comm.Get_size()):
      raise CollectiveError(f"the {launch.launcher} launcher says rank {launch.rank} of {launch.world_size} but MPI says rank "
                            f"{self.comm.Get_rank()} of {self.comm.Get_size()}: the MPI engine needs processes started by an MPI "
                            "launcher (mpirun, srun --mpi=pmix)")
    self._ops = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
    self._views: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # Buffer -> (its allocation, typed array)

  @property
  def rank(self) -> int: return self.comm.Get_rank()
  @property
  def world_size(self) -> int: return self.comm.Get_size()

  # ***** waiting with a deadline *****
  def _wait(self, req: Any, what: str) -> None:
    start = time.monotonic()
    deadline, delay = start + self.timeout, 5e-5
    while not req.Test():
      now = time.monotonic()
      if now > deadline:
        self.broken = what
        raise CollectiveTimeout(f"{what} on rank {self.rank} of {self.world_size} timed out after {self.timeout:g} s: another rank died, "
                                "hangs, or called a different collective (raise the limit with distributed.init(timeout=...) or "
                                "TINYCORE_DIST_TIMEOUT)")
      # spin for the first 200 us (a small message between running ranks ends within that: yielding here hands the
      # core to another process for a whole time slice, 50x the message's latency on a busy machine), then poll
      # yielding the core until 10 ms (a peer rank that shares it can run), then sleep, backing off to 1 ms, so a
      # rank left waiting costs the others little
      if now - start < 2e-4: continue
      if now - start < 1e-2: os.sched_yield()
      else:
        time.sleep(delay)
        delay = min(delay * 2, 1e-3)

  def _start(self, what: str) -> None:
    if self.broken is not None: raise CollectiveError(f"the communicator is unusable: an earlier {self.broken} timed out on this rank")

  def _typed(self, arr: Any, buf: Buffer, what: str) -> Any:
    # MPI's reductions have no half-precision types (and bfloat16/fp8 have no numpy type at all)
    if buf.dtype.fmt is None or buf.dtype.fmt == "e" or buf.dtype.fmt == "?":
      raise CollectiveError(f"{what} can't reduce {buf.dtype} on the MPI engine; cast to float32 (or int32 for bool) first")
    return arr.view(buf.dtype.np)

  def _mean(self, arr: Any, buf: Buffer) -> None:
    if buf.dtype.np.kind != "f": raise CollectiveError(f"allreduce op 'mean' needs a float tensor, got {buf.dtype}; use 'sum'")
    arr /= self.world_size

  # ***** operations *****
  def allreduce(self, out: Buffer, inp: Buffer, op: str) -> None: self.allreduce_wait(self.allreduce_start(out, inp, op))

  def _reducible(self, buf: Buffer) -> Any:
    """`buf` as a numpy array of its dtype that MPI can reduce, and whether it *is* the buffer's memory. Views of
    host-memory buffers are cached per buffer (while it keeps the same allocation): a gradient bucket, a TinyJit
    replay's buffers and a repeated input cost no allocation and no lookup per call."""
    if (hit := self._views.get(buf)) is not None and buf.is_allocated() and hit[0] == buf._buf: return hit[1], True
    arr, is_view = host_view(buf)
    typed = self._typed(arr, buf, "allreduce")
    if is_view and buf._base is None: self._views[buf] = (buf._buf, typed)
    return typed, is_view

  def allreduce_start(self, out: Buffer, inp: Buffer, op: str) -> Any:
    if self.broken is not None: self._start("allreduce")
    s, _ = self._reducible(inp)
    d, dst_is_view = (s, _) if out is inp else self._reducible(out)
    return (self.comm.Iallreduce(self.MPI.IN_PLACE if out is inp else s, d, op=self._ops[op]), out, d, dst_is_view, op)

  def allreduce_wait(self, handle: Any) -> None:
    req, out, d, dst_is_view, op = handle
    if not req.Test(): self._wait(req, f"allreduce({op}) of {out.nbytes} bytes")   # a small one between live ranks is often done
    if op == "mean": self._mean(d, out)
    if not dst_is_view: write_back(out, d, False)

  def progress(self, handle: Any) -> None:
    if handle is not None: handle[0].Test()   # MPI moves a nonblocking collective along only inside MPI calls

  def allgather(self, out: Buffer, inp: Buffer) -> None:
    self._start("allgather")
    src, _ = host_view(inp)
    dst, dst_is_view = host_view(out)
    B = self.MPI.BYTE
    self._wait(self.comm.Iallgather([src, B], [dst, B]), f"allgather of {inp.nbytes} bytes")
    write_back(out, dst, dst_is_view)

  def reduce_scatter(self, out: Buffer, inp: Buffer, op: str) -> None:
    self._start("reduce_scatter")
    src, _ = host_view(inp)
    dst, dst_is_view = host_view(out)
    s, d = self._typed(src, inp, "reduce_scatter"), self._typed(dst, out, "reduce_scatter")
    self._wait(self.comm.Ireduce_scatter_block(s, d, op=self._ops[op]), f"reduce_scatter({op}) of {inp.nbytes} bytes")
    if op == "mean": self._mean(d, out)
    write_back(out, dst, dst_is_view)

  def broadcast(self, out: Buffer, inp: Buffer, root: int) -> None:
    self._start("broadcast")
    dst, dst_is_view = host_view(out)
    if self.rank == root and out is not inp: dst[:] = host_view(inp)[0]
    self._wait(self.comm.Ibcast([dst, self.MPI.BYTE], root=root), f"broadcast of {out.nbytes} bytes from rank {root}")
    write_back(out, dst, dst_is_view)

  def send(self, buf: Buffer, dst: int, tag: int) -> None:
    self._start("send")
    src, _ = host_view(buf)
    self._wait(self.comm.Isend([src, self.MPI.BYTE], dest=dst, tag=tag), f"send of {buf.nbytes} bytes to rank {dst}")

  def recv(self, buf: Buffer, src: int, tag: int) -> None:
    self._start("recv")
    dst, dst_is_view = host_view(buf)
    self._wait(self.comm.Irecv([dst, self.MPI.BYTE], source=src, tag=tag), f"recv of {buf.nbytes} bytes from rank {src}")
    write_back(buf, dst, dst_is_view)

  def barrier(self) -> None:
    self._start("barrier")
    self._wait(self.comm.Ibarrier(), "barrier")

  def abort(self, code: int = 1) -> None: self.MPI.COMM_WORLD.Abort(code)   # mpirun/srun then end every rank

  def close(self) -> None:
    if self.broken is None:
      try: self.comm.Free()
      except Exception: pass
