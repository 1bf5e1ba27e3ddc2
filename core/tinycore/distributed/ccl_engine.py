"""The NCCL C API as a collective engine, for any library that implements it: NVIDIA's NCCL (tinycore-nv) and AMD's
RCCL (tinycore-amd), which exports the same functions under the same names. Core knows the API (nccl.h: the types,
the calls, the unique-id bootstrap); a plugin subclass says where its library is and how to ask its device's default
stream whether the enqueued work has finished.

Rank 0 makes the communicator's ncclUniqueId and the MPI host engine broadcasts it (so launch with mpirun/srun);
each rank then joins with ncclCommInitRank. Operations are enqueued on the default stream after the device's own
work (the buffers' device is synchronized first); the wait polls the stream against the deadline, and on timeout
ncclCommAbort releases the kernels that wait for a dead peer, so the rank fails fast (the library's own calls would
block forever). The NCCL API has no message tags: send/recv pairs match in call order."""
from __future__ import annotations
import ctypes, time
from typing import Any
from tinycore.dtype import dtypes
from tinycore.distributed.engine import CollectiveEngine, CollectiveError, CollectiveTimeout

NCCL_UNIQUE_ID_BYTES = 128
class ncclUniqueId(ctypes.Structure):
  _fields_ = [("internal", ctypes.c_char * NCCL_UNIQUE_ID_BYTES)]

# ncclRedOp_t and ncclDataType_t, from nccl.h (rccl.h has the same values)
RED_OPS = {"sum": 0, "max": 2, "min": 3, "mean": 4}   # ncclAvg (4) since NCCL 2.10
DTYPES = {dtypes.int8: 0, dtypes.uint8: 1, dtypes.int32: 2, dtypes.uint32: 3, dtypes.int64: 4, dtypes.uint64: 5,
          dtypes.float16: 6, dtypes.float32: 7, dtypes.float64: 8, dtypes.bfloat16: 9}
SYMBOLS = ("ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclCommAbort", "ncclCommGetAsyncError",
           "ncclGetErrorString", "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv",
           "ncclGroupStart", "ncclGroupEnd")
IN_PROGRESS = 7   # ncclInProgress: an async error query while work is still running

def bind(lib: ctypes.CDLL) -> ctypes.CDLL:
  """Declare the argument types of the API's functions on `lib` (a libnccl or librccl)."""
  P, I, S, V = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
  lib.ncclGetVersion.argtypes = [ctypes.POINTER(I)]
  lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(ncclUniqueId)]
  lib.ncclCommInitRank.argtypes = [ctypes.POINTER(P), I, ncclUniqueId, I]
  lib.ncclCommDestroy.argtypes = lib.ncclCommAbort.argtypes = [P]
  lib.ncclCommGetAsyncError.argtypes = [P, ctypes.POINTER(I)]
  lib.ncclGetErrorString.argtypes, lib.ncclGetErrorString.restype = [I], ctypes.c_char_p
  lib.ncclAllReduce.argtypes = [V, V, S, I, I, P, P]        # send, recv, count, datatype, op, comm, stream
  lib.ncclAllGather.argtypes = [V, V, S, I, P, P]           # send, recv, sendcount, datatype, comm, stream
  lib.ncclReduceScatter.argtypes = [V, V, S, I, I, P, P]    # send, recv, recvcount, datatype, op, comm, stream
  lib.ncclBroadcast.argtypes = [V, V, S, I, I, P, P]        # send, recv, count, datatype, root, comm, stream
  lib.ncclSend.argtypes = lib.ncclRecv.argtypes = [V, S, I, I, P, P]   # buf, count, datatype, peer, comm, stream
  return lib

def check(lib: ctypes.CDLL, rc: int, what: str, name: str = "NCCL") -> None:
  if rc != 0: raise CollectiveError(f"{what} failed: {name} error {rc} ({(lib.ncclGetErrorString(rc) or b'?').decode()})")

def version(lib: ctypes.CDLL, name: str = "NCCL") -> tuple[int, int, int]:
  v = ctypes.c_int()
  check(lib, lib.ncclGetVersion(ctypes.byref(v)), "ncclGetVersion", name)
  code = v.value   # 2.19.3 -> 21903 (since 2.9: major*10000 + minor*100 + patch)
  return code // 10000, code // 100 % 100, code % 100

def raw_id(uid: ncclUniqueId) -> bytes:
  # all 128 bytes: reading the c_char array field would stop at its first NUL byte
  return ctypes.string_at(ctypes.addressof(uid), NCCL_UNIQUE_ID_BYTES)

def new_unique_id(lib: ctypes.CDLL, name: str = "NCCL") -> bytes:
  uid = ncclUniqueId()
  check(lib, lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId", name)
  return raw_id(uid)

class NcclApiEngine(CollectiveEngine):
  """Collectives on device memory through the NCCL API. Subclasses set `name`, `api_name` ("NCCL", "RCCL") and
  implement `library()` (the bound CDLL) and `stream_pending()` (True while the default stream has work, raising on
  a device error)."""
  api_name = "NCCL"
  @classmethod
  def library(cls) -> ctypes.CDLL: raise NotImplementedError
  def stream_pending(self) -> bool: raise NotImplementedError
  def check_buffer(self, buf: Any) -> None:
    """Raise when `buf` is not memory this library can address (default: anything allocated)."""

  def __init__(self, launch, timeout: float):
    super().__init__(launch, timeout)
    from tinycore.distributed.mpi_engine import MPIEngine
    lib = self.lib = self.library()
    self.host = MPIEngine(launch, timeout) if launch.world_size > 1 else None   # bootstrap only: it carries the unique id
    self._rank, self._size = (self.host.rank, self.host.world_size) if self.host else (0, 1)
    uid = ncclUniqueId()
    if self._rank == 0: ctypes.memmove(ctypes.addressof(uid), new_unique_id(lib, self.api_name), NCCL_UNIQUE_ID_BYTES)
    if self.host is not None:
      got = self.host.comm.bcast(raw_id(uid) if self._rank == 0 else None, root=0)
      if not isinstance(got, bytes) or len(got) != NCCL_UNIQUE_ID_BYTES:
        raise CollectiveError(f"the {self.api_name} unique id from rank 0 is malformed")
      ctypes.memmove(ctypes.addressof(uid), got, NCCL_UNIQUE_ID_BYTES)
    self.comm = ctypes.c_void_p()
    self._check(lib.ncclCommInitRank(ctypes.byref(self.comm), self._size, uid, self._rank), "ncclCommInitRank")
    self.broken: str | None = None

  @property
  def rank(self) -> int: return self._rank
  @property
  def world_size(self) -> int: return self._size
  def _check(self, rc: int, what: str) -> None: check(self.lib, rc, what, self.api_name)

  def _dtype(self, buf) -> int:
    if (dt := DTYPES.get(buf.dtype)) is None: raise CollectiveError(f"{self.api_name} has no {buf.dtype}; cast to float32 first")
    return dt

  def _run(self, what: str, enqueue) -> None:
    """Enqueue after the device's pending work, then wait for the stream with the deadline."""
    if self.broken is not None: raise CollectiveError(f"the {self.api_name} communicator is unusable: an earlier {self.broken} timed out")
    self._check(enqueue(), what)
    deadline, delay = time.monotonic() + self.timeout, 5e-5
    while self.stream_pending():
      err = ctypes.c_int()
      self.lib.ncclCommGetAsyncError(self.comm, ctypes.byref(err))
      if err.value not in (0, IN_PROGRESS): self._check(err.value, what)
      if time.monotonic() > deadline:
        self.broken = what
        self.lib.ncclCommAbort(self.comm)   # frees the kernels that wait for the dead peer
        raise CollectiveTimeout(f"{what} on rank {self._rank} of {self._size} timed out after {self.timeout:g} s: another rank died, "
                                "hangs, or called a different collective")
      time.sleep(delay)
      delay = min(delay * 2, 1e-3)

  def _ptr(self, buf) -> ctypes.c_void_p:
    self.check_buffer(buf)
    buf.ensure_allocated().compiled.synchronize()   # the device's kernels that write it have finished
    return ctypes.c_void_p(buf._buf)

  def allreduce(self, out, inp, op: str) -> None:
    dt, lib = self._dtype(inp), self.lib
    self._run(f"allreduce({op})", lambda: lib.ncclAllReduce(self._ptr(inp), self._ptr(out), inp.size, dt, RED_OPS[op], self.comm, None))
  def allgather(self, out, inp) -> None:
    dt, lib = self._dtype(inp), self.lib
    self._run("allgather", lambda: lib.ncclAllGather(self._ptr(inp), self._ptr(out), inp.size, dt, self.comm, None))
  def reduce_scatter(self, out, inp, op: str) -> None:
    dt, lib = self._dtype(inp), self.lib
    self._run(f"reduce_scatter({op})", lambda: lib.ncclReduceScatter(self._ptr(inp), self._ptr(out), out.size, dt, RED_OPS[op], self.comm, None))
  def broadcast(self, out, inp, root: int) -> None:
    dt, lib = self._dtype(inp), self.lib
    self._run("broadcast", lambda: lib.ncclBroadcast(self._ptr(inp), self._ptr(out), inp.size, dt, root, self.comm, None))
  def send(self, buf, dst: int, tag: int) -> None:
    dt, lib = self._dtype(buf), self.lib
    self._run(f"send to rank {dst}", lambda: lib.ncclSend(self._ptr(buf), buf.size, dt, dst, self.comm, None))
  def recv(self, buf, src: int, tag: int) -> None:
    dt, lib = self._dtype(buf), self.lib
    self._run(f"recv from rank {src}", lambda: lib.ncclRecv(self._ptr(buf), buf.size, dt, src, self.comm, None))
  def barrier(self) -> None:
    if self.host is not None: self.host.barrier()
  def abort(self, code: int = 1) -> None:
    if self.host is not None: self.host.abort(code)
    super().abort(code)
  def close(self) -> None:
    if self.comm and self.broken is None: self.lib.ncclCommDestroy(self.comm)
    if self.host is not None: self.host.close()
