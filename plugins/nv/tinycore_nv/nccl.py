"""The NCCL collective engine: collectives on NV device memory, no host round trip, through NCCL's C API (ctypes).

The API itself (types, calls, the unique-id bootstrap over MPI, the deadline, abort on timeout) is core's
tinycore.distributed.ccl_engine, shared with AMD's RCCL; this file says where libnccl is and how to ask CUDA's
default stream whether the enqueued work has finished. libnccl comes from the `nvidia-nccl-cu13` wheel (found through
its metadata, as NVRTC is) or the loader's path. Written against NCCL 2.x's documented API (nccl.h); this machine has
no GPU, so only loading the library, the symbols, the version and ncclGetUniqueId are tested here
(plugins/nv/tests/test_nccl.py)."""
from __future__ import annotations
import ctypes, ctypes.util, functools, glob, os
from tinycore.distributed.engine import CollectiveError
from tinycore.distributed.ccl_engine import (NcclApiEngine, NCCL_UNIQUE_ID_BYTES, ncclUniqueId, SYMBOLS, bind, check, version,
                                             raw_id, new_unique_id)

__all__ = ["NCCLEngine", "find_nccl", "libnccl", "nccl_version", "unique_id", "CollectiveError", "NCCL_UNIQUE_ID_BYTES",
           "ncclUniqueId", "SYMBOLS"]

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
  return bind(ctypes.CDLL(path))

def nccl_version() -> tuple[int, int, int]: return version(libnccl())
def unique_id() -> bytes: return new_unique_id(libnccl())
def _raw(uid: ncclUniqueId) -> bytes: return raw_id(uid)
def _check(rc: int, what: str) -> None: check(libnccl(), rc, what)

CUDA_ERROR_NOT_READY = 600

class NCCLEngine(NcclApiEngine):
  name, api_name = "nccl", "NCCL"

  @classmethod
  def available(cls, launch) -> str | None:
    if find_nccl() is None: return "libnccl.so not found (pip install nvidia-nccl-cu13)"
    if ctypes.util.find_library("cuda") is None: return "libcuda.so not found (NCCL needs an NVIDIA GPU and driver)"
    if launch.world_size > 1 and launch.launcher not in ("openmpi", "pmi", "pmix", "slurm"):
      return f"the NCCL engine bootstraps over MPI; the {launch.launcher} launcher is not an MPI launcher (use mpirun or srun --mpi=pmix)"
    return None

  @classmethod
  def library(cls) -> ctypes.CDLL: return libnccl()

  def stream_pending(self) -> bool:
    from tinycore_nv.cuda import libcuda
    rc = libcuda().cuStreamQuery(None)
    if rc not in (0, CUDA_ERROR_NOT_READY): raise CollectiveError(f"cuStreamQuery failed with CUDA error {rc}")
    return rc == CUDA_ERROR_NOT_READY
