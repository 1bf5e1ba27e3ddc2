"""The NCCL collective engine: collectives on NV device memory, no host round trip, through NCCL's C API (ctypes).

libnccl comes from the `nvidia-nccl-cu13` wheel (found through its metadata, as NVRTC is) or the loader's path.
Rank 0 makes the communicator's ncclUniqueId and the MPI host engine broadcasts it (so launch with mpirun/srun);
each rank then joins with ncclCommInitRank. Operations are enqueued on the default stream after the device's own
work; the wait polls cuStreamQuery against the deadline, and on timeout ncclCommAbort releases the kernels that wait
for a dead peer, so the rank fails fast (NCCL's own calls would block forever). NCCL has no message tags: send/recv
pairs match in call order. Written against NCCL 2.x's documented API (nccl.h); this machine has no GPU, so only
loading the library, the symbols, the version and ncclGetUniqueId are tested here (plugins/nv/tests/test_nccl.py)."""
from __future__ import annotations
import ctypes, ctypes.util, functools, glob, os, time
from tinycore.dtype import dtypes
from tinycore.distributed.engine import CollectiveEngine, CollectiveError, CollectiveTimeout

NCCL_UNIQUE_ID_BYTES = 128
class ncclUniqueId(ctypes.Structure):
  _fields_ = [("internal", ctypes.c_char * NCCL_UNIQUE_ID_BYTES)]

# ncclRedOp_t and ncclDataType_t, from nccl.h
RED_OPS = {"sum": 0, "max": 2, "min": 3, "mean": 4}   # ncclAvg (4) since NCCL 2.10
DTYPES = {dtypes.int8: 0, dtypes.uint8: 1, dtypes.int32: 2, dtypes.uint32: 3, dtypes.int64: 4, dtypes.uint64: 5,
          dtypes.float16: 6, dtypes.float32: 7, dtypes.float64: 8, dtypes.bfloat16: 9}
SYMBOLS = ("ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy", "ncclCommAbort", "ncclCommGetAsyncError",
           "ncclGetErrorString", "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv",
           "ncclGroupStart", "ncclGroupEnd")

def find_nccl() -> str | None:
  """Path of libnccl.so.2: the nvidia-nccl wheel first, then the loader's search path."""
  from importlib import metadata
  for dist in ("nvidia-nccl-cu13", "nvidia-nccl-cu12"):
    try: files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError: continue
    for f in files:
      if os.path.basename(str(f)).startswith("libnccl.so"): return str(f.locate())
  for d in os.environ.get("NCCL_HOME", ""), "/usr/lib/x86_64-linux-gnu":
    if d and (hits := sorted(glob.glob(os.path.join(d, "**", "libnccl.so*"), recursive=True), key=len)): return hits[0]
  return ctypes.util.find_library("nccl")

@functools.cache
def libnccl() -> ctypes.CDLL:
  path = find_nccl()
  if path is None: raise FileNotFoundError("libnccl.so not found: pip install nvidia-nccl-cu13")
  lib = ctypes.CDLL(path)
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

def nccl_version() -> tuple[int, int, int]:
  v = ctypes.c_int()
  _check(libnccl().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
  code = v.value   # 2.19.3 -> 21903 (since 2.9: major*10000 + minor*100 + patch)
  return code // 10000, code // 100 % 100, code % 100

def unique_id() -> bytes:
  uid = ncclUniqueId()
  _check(libnccl().ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
  return _raw(uid)

def _raw(uid: ncclUniqueId) -> bytes:
  # all 128 bytes: reading the c_char array field would stop at its first NUL byte
  return ctypes.string_at(ctypes.addressof(uid), NCCL_UNIQUE_ID_BYTES)

def _check(rc: int, what: str) -> None:
  if rc != 0: raise CollectiveError(f"{what} failed: NCCL error {rc} ({(libnccl().ncclGetErrorString(rc) or b'?').decode()})")

class NCCLEngine(CollectiveEngine):
  name = "nccl"

  @classmethod
  def available(cls, launch) -> str | None:
    if find_nccl() is None: return "libnccl.so not found (pip install nvidia-nccl-cu13)"
    if ctypes.util.find_library("cuda") is None: return "libcuda.so not found (NCCL needs an NVIDIA GPU and driver)"
    if launch.world_size > 1 and launch.launcher not in ("openmpi", "pmi", "pmix", "slurm"):
      return f"the NCCL engine bootstraps over MPI; the {launch.launcher} launcher is not an MPI launcher (use mpirun or srun --mpi=pmix)"
    return None

  def __init__(self, launch, timeout: float):
    super().__init__(launch, timeout)
    from tinycore.distributed.mpi_engine import MPIEngine
    self.host = MPIEngine(launch, timeout) if launch.world_size > 1 else None   # bootstrap only: it carries the unique id
    self._rank, self._size = (self.host.rank, self.host.world_size) if self.host else (0, 1)
    uid = ncclUniqueId()
    if self._rank == 0: ctypes.memmove(ctypes.addressof(uid), unique_id(), NCCL_UNIQUE_ID_BYTES)
    if self.host is not None:
      got = self.host.comm.bcast(_raw(uid) if self._rank == 0 else None, root=0)
      if not isinstance(got, bytes) or len(got) != NCCL_UNIQUE_ID_BYTES: raise CollectiveError("the NCCL unique id from rank 0 is malformed")
      ctypes.memmove(ctypes.addressof(uid), got, NCCL_UNIQUE_ID_BYTES)
    self.comm = ctypes.c_void_p()
    _check(libnccl().ncclCommInitRank(ctypes.byref(self.comm), self._size, uid, self._rank), "ncclCommInitRank")
    self.broken: str | None = None

  @property
  def rank(self) -> int: return self._rank
  @property
  def world_size(self) -> int: return self._size

  def _dtype(self, buf) -> int:
    if (dt := DTYPES.get(buf.dtype)) is None: raise CollectiveError(f"NCCL has no {buf.dtype}; cast to float32 first")
    return dt

  def _run(self, what: str, enqueue) -> None:
    """Enqueue after the device's pending work, then wait for the stream with the deadline."""
    if self.broken is not None: raise CollectiveError(f"the NCCL communicator is unusable: an earlier {self.broken} timed out")
    from tinycore_nv.cuda import libcuda
    _check(enqueue(), what)
    cuda, deadline, delay = libcuda(), time.monotonic() + self.timeout, 5e-5
    while (rc := cuda.cuStreamQuery(None)) == 600:   # CUDA_ERROR_NOT_READY
      err = ctypes.c_int()
      libnccl().ncclCommGetAsyncError(self.comm, ctypes.byref(err))
      if err.value not in (0, 7): _check(err.value, what)   # 7: ncclInProgress
      if time.monotonic() > deadline:
        self.broken = what
        libnccl().ncclCommAbort(self.comm)   # frees the kernels that wait for the dead peer
        raise CollectiveTimeout(f"{what} on rank {self._rank} of {self._size} timed out after {self.timeout:g} s: another rank died, "
                                "hangs, or called a different collective")
      time.sleep(delay)
      delay = min(delay * 2, 1e-3)
    if rc != 0: raise CollectiveError(f"{what}: cuStreamQuery failed with CUDA error {rc}")

  @staticmethod
  def _ptr(buf) -> ctypes.c_void_p:
    buf.ensure_allocated().compiled.synchronize()   # the device's kernels that write it have finished
    return ctypes.c_void_p(buf._buf)

  def allreduce(self, out, inp, op: str) -> None:
    dt, lib = self._dtype(inp), libnccl()
    self._run(f"allreduce({op})", lambda: lib.ncclAllReduce(self._ptr(inp), self._ptr(out), inp.size, dt, RED_OPS[op], self.comm, None))
  def allgather(self, out, inp) -> None:
    dt, lib = self._dtype(inp), libnccl()
    self._run("allgather", lambda: lib.ncclAllGather(self._ptr(inp), self._ptr(out), inp.size, dt, self.comm, None))
  def reduce_scatter(self, out, inp, op: str) -> None:
    dt, lib = self._dtype(inp), libnccl()
    self._run(f"reduce_scatter({op})", lambda: lib.ncclReduceScatter(self._ptr(inp), self._ptr(out), out.size, dt, RED_OPS[op], self.comm, None))
  def broadcast(self, out, inp, root: int) -> None:
    dt, lib = self._dtype(inp), libnccl()
    self._run("broadcast", lambda: lib.ncclBroadcast(self._ptr(inp), self._ptr(out), inp.size, dt, root, self.comm, None))
  def send(self, buf, dst: int, tag: int) -> None:
    dt, lib = self._dtype(buf), libnccl()
    self._run(f"send to rank {dst}", lambda: lib.ncclSend(self._ptr(buf), buf.size, dt, dst, self.comm, None))
  def recv(self, buf, src: int, tag: int) -> None:
    dt, lib = self._dtype(buf), libnccl()
    self._run(f"recv from rank {src}", lambda: lib.ncclRecv(self._ptr(buf), buf.size, dt, src, self.comm, None))
  def barrier(self) -> None:
    if self.host is not None: self.host.barrier()
  def abort(self, code: int = 1) -> None:
    if self.host is not None: self.host.abort(code)
    super().abort(code)
  def close(self) -> None:
    if self.comm and self.broken is None: libnccl().ncclCommDestroy(self.comm)
    if self.host is not None: self.host.close()
