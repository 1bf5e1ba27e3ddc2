"""The one-process engine: a script started without a launcher (or without MPI installed) is rank 0 of 1, and every
collective is the identity (a copy into the output), so the same training script runs unchanged on one process."""
from __future__ import annotations
from tinycore.device import Buffer
from tinycore.distributed.engine import CollectiveEngine, CollectiveError
from tinycore.distributed.launcher import LaunchInfo

class LocalEngine(CollectiveEngine):
  name = "local"
  @classmethod
  def available(cls, launch: LaunchInfo) -> str | None:
    if launch.world_size != 1: return f"only runs a job of one process, the {launch.launcher} launcher started {launch.world_size}"
    return None
  @property
  def rank(self) -> int: return 0
  @property
  def world_size(self) -> int: return 1
  def _copy(self, out: Buffer, inp: Buffer) -> None:
    if out is not inp: out.copyin(inp.as_buffer())
  def allreduce(self, out: Buffer, inp: Buffer, op: str) -> None: self._copy(out, inp)
  def allgather(self, out: Buffer, inp: Buffer) -> None: self._copy(out, inp)
  def reduce_scatter(self, out: Buffer, inp: Buffer, op: str) -> None: self._copy(out, inp)
  def broadcast(self, out: Buffer, inp: Buffer, root: int) -> None: self._copy(out, inp)
  def send(self, buf: Buffer, dst: int, tag: int) -> None: raise CollectiveError("send: a one-process job has no other rank")
  def recv(self, buf: Buffer, src: int, tag: int) -> None: raise CollectiveError("recv: a one-process job has no other rank")
  def barrier(self) -> None: pass
