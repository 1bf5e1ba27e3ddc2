"""The torchrun engine: gloo through torch.distributed, on host memory, for jobs started without an MPI launcher.

torchrun (and anything that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) starts the processes without MPI's
process manager, so MPI can't form a communicator from them (mpi4py's dynamic process management needs an MPI port
name, not a TCP address). gloo, the collective library torch.distributed ships, bootstraps from exactly those
variables through its TCP store; this engine uses it when torch is installed (core never imports torch otherwise).

Buffers are handed to gloo as torch tensors over their host views (torch.from_numpy: no copy on CPU). Every operation
is issued asynchronously and waited with the deadline, so a dead or wedged peer raises CollectiveTimeout (gloo reports
a closed connection as an error, which becomes CollectiveError). The engine works on its own process group, so the
user's torch.distributed traffic can't match ours. gloo has no reduce_scatter on CPU: it is an allreduce followed by
this rank's part (world_size times the bytes of a native one).

The groups are destroyed at exit (or shutdown()) while the interpreter is still alive: left to its finalization, gloo's
worker threads can be torn down after Python is gone and the process dies with SIGABRT ("terminate called without an
active exception", pytorch/pytorch#190489), so a rank that finished its work still failed the job, now and then."""
from __future__ import annotations
import atexit, os
from datetime import timedelta
from typing import Any
from tinycore.device import Buffer
from tinycore.distributed.engine import CollectiveEngine, CollectiveError, CollectiveTimeout, host_view, write_back
from tinycore.distributed.launcher import LaunchInfo

class GlooEngine(CollectiveEngine):
  name = "gloo"

  @classmethod
  def available(cls, launch: LaunchInfo) -> str | None:
    if launch.launcher != "torchrun": return f"only for jobs that torchrun started (this one: {launch.launcher})"
    if launch.master_addr is None or launch.master_port is None: return "torchrun's MASTER_ADDR and MASTER_PORT are not set"
    try: import torch.distributed as td
    except ImportError as e: return f"torch is not installed ({e}); pip install torch (the CPU build is enough)"
    if not td.is_available() or not td.is_gloo_available(): return "this torch build has no gloo backend"
    return None

  def __init__(self, launch: LaunchInfo, timeout: float):
    super().__init__(launch, timeout)
    import torch, torch.distributed as td
    self.torch, self.td, self.deadline = torch, td, timedelta(seconds=timeout)
    if not td.is_initialized():
      os.environ.setdefault("MASTER_ADDR", str(launch.master_addr))
      os.environ.setdefault("MASTER_PORT", str(launch.master_port))
      td.init_process_group("gloo", init_method="env://", rank=launch.rank, world_size=launch.world_size, timeout=self.deadline)
      self.owns_default = True
    else: self.owns_default = False
    self.group = td.new_group(backend="gloo", timeout=self.deadline)   # ours alone, like MPI's Dup
    self._rank, self._size = td.get_rank(self.group), td.get_world_size(self.group)
    if (self._rank, self._size) != (launch.rank, launch.world_size):
      raise CollectiveError(f"torchrun says rank {launch.rank} of {launch.world_size} but gloo says {self._rank} of {self._size}")
    self._ops = {"sum": td.ReduceOp.SUM, "mean": td.ReduceOp.SUM, "max": td.ReduceOp.MAX, "min": td.ReduceOp.MIN}
    self.broken: str | None = None
    self.closed = False
    atexit.register(self.close)   # a script that never calls distributed.shutdown() (see the module's docstring)

  @property
  def rank(self) -> int: return self._rank
  @property
  def world_size(self) -> int: return self._size

  def _tensor(self, buf: Buffer, typed: bool, what: str) -> tuple[Any, Any, bool]:
    """(torch tensor over the host view, the numpy array, whether that is the buffer's own memory)."""
    arr, is_view = host_view(buf)
    if typed:
      if buf.dtype.fmt is None or buf.dtype.fmt == "?":
        raise CollectiveError(f"{what} can't reduce {buf.dtype} on the gloo engine; cast to float32 (or int32 for bool) first")
      arr = arr.view(buf.dtype.np)
    return self.torch.from_numpy(arr), arr, is_view

  def _issue(self, what: str, fn) -> Any:
    if self.broken is not None: raise CollectiveError(f"the communicator is unusable: an earlier {self.broken} failed on this rank")
    try: return (fn(), what)
    except RuntimeError as e: self._fail(what, e)

  def _fail(self, what: str, e: Exception):
    self.broken = what
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    if "timeout" in msg.lower() or "timed out" in msg.lower():
      raise CollectiveTimeout(f"{what} on rank {self._rank} of {self._size} timed out after {self.timeout:g} s: another rank died, hangs, "
                              "or called a different collective (raise the limit with distributed.init(timeout=...) or TINYCORE_DIST_TIMEOUT)") from e
    raise CollectiveError(f"{what} on rank {self._rank} of {self._size} failed in gloo: {msg} (did another rank die?)") from e

  def _finish(self, handle: Any) -> None:
    work, what = handle
    try: work.wait(timeout=self.deadline)
    except RuntimeError as e: self._fail(what, e)

  # ***** operations *****
  def allreduce_start(self, out: Buffer, inp: Buffer, op: str) -> Any:
    t, arr, is_view = self._tensor(out, True, "allreduce")
    if out is not inp: arr[:] = self._tensor(inp, True, "allreduce")[1]
    work = self._issue(f"allreduce({op}) of {inp.nbytes} bytes",
                       lambda: self.td.all_reduce(t, op=self._ops[op], group=self.group, async_op=True))
    return (work, out, arr, is_view, op)
  def allreduce_wait(self, handle: Any) -> None:
    work, out, arr, is_view, op = handle
    self._finish(work)
    if op == "mean":
      if arr.dtype.kind != "f": raise CollectiveError(f"allreduce op 'mean' needs a float tensor, got {out.dtype}; use 'sum'")
      arr /= self._size
    write_back(out, arr, is_view)
  def allreduce(self, out: Buffer, inp: Buffer, op: str) -> None: self.allreduce_wait(self.allreduce_start(out, inp, op))

  def allgather(self, out: Buffer, inp: Buffer) -> None:
    src, _, _ = self._tensor(inp, False, "allgather")
    dst, arr, is_view = self._tensor(out, False, "allgather")
    parts = list(dst.chunk(self._size))   # views of out, one per rank, that gloo writes in place
    self._finish(self._issue(f"allgather of {inp.nbytes} bytes", lambda: self.td.all_gather(parts, src, group=self.group, async_op=True)))
    write_back(out, arr, is_view)

  def reduce_scatter(self, out: Buffer, inp: Buffer, op: str) -> None:
    import numpy as np
    _, src, _ = self._tensor(inp, True, "reduce_scatter")
    whole = np.array(src)   # gloo reduces in place: a copy, so the input stays the caller's
    t = self.torch.from_numpy(whole)
    self._finish(self._issue(f"reduce_scatter({op}) of {inp.nbytes} bytes",
                             lambda: self.td.all_reduce(t, op=self._ops[op], group=self.group, async_op=True)))
    _, arr, is_view = self._tensor(out, True, "reduce_scatter")
    n = out.size
    arr[:] = whole[self._rank * n:(self._rank + 1) * n]
    if op == "mean": arr /= self._size
    write_back(out, arr, is_view)

  def broadcast(self, out: Buffer, inp: Buffer, root: int) -> None:
    t, arr, is_view = self._tensor(out, False, "broadcast")
    if self._rank == root and out is not inp: arr[:] = host_view(inp)[0]
    self._finish(self._issue(f"broadcast of {out.nbytes} bytes from rank {root}",
                             lambda: self.td.broadcast(t, src=root, group=self.group, async_op=True)))
    write_back(out, arr, is_view)

  def send(self, buf: Buffer, dst: int, tag: int) -> None:
    t, _, _ = self._tensor(buf, False, "send")
    self._finish(self._issue(f"send of {buf.nbytes} bytes to rank {dst}", lambda: self.td.isend(t, dst, group=self.group, tag=tag)))

  def recv(self, buf: Buffer, src: int, tag: int) -> None:
    t, arr, is_view = self._tensor(buf, False, "recv")
    self._finish(self._issue(f"recv of {buf.nbytes} bytes from rank {src}", lambda: self.td.irecv(t, src, group=self.group, tag=tag)))
    write_back(buf, arr, is_view)

  def barrier(self) -> None:
    self._finish(self._issue("barrier", lambda: self.td.barrier(group=self.group, async_op=True)))

  def close(self) -> None:
    if self.closed: return
    self.closed = True
    atexit.unregister(self.close)
    if self.broken is not None: return
    try:
      self.td.destroy_process_group(self.group)
      if self.owns_default: self.td.destroy_process_group()
    except Exception: pass
