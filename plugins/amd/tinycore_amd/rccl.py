"""The RCCL collective engine: collectives on AMD device memory (the HIP interface's hipMalloc'd buffers) through
RCCL, AMD's implementation of the NCCL C API (the same function names and values, in librccl.so).

The API (types, calls, the unique-id bootstrap over MPI, the deadline, abort on timeout) is core's
tinycore.distributed.ccl_engine, shared with tinycore-nv's NCCL engine; this file says where librccl is and how to ask
HIP's default stream whether the enqueued work has finished. librccl comes with ROCm (/opt/rocm/lib, $ROCM_PATH/lib)
or from TINYCORE_LIBRCCL (a path); there is no librccl wheel on PyPI (AMD's ROCm Python packages there are
placeholders), so on a machine without ROCm the engine says so and is not offered. Not run here: this machine has no
AMD GPU and no ROCm; plugins/amd/tests/test_rccl.py checks what can be checked without them."""
from __future__ import annotations
import ctypes, ctypes.util, functools, glob, os
from tinycore.distributed.engine import CollectiveError
from tinycore.distributed.ccl_engine import NcclApiEngine, bind

HIP_ERROR_NOT_READY = 600

def find_rccl() -> str | None:
  """Path of librccl.so: TINYCORE_LIBRCCL, then ROCm's lib folders, then the loader's search path."""
  if (p := os.environ.get("TINYCORE_LIBRCCL")): return p
  for d in (os.environ.get("ROCM_PATH", ""), "/opt/rocm"):
    if d and (hits := sorted(glob.glob(os.path.join(d, "lib", "librccl.so*")), key=len)): return hits[0]
  for d in sorted(glob.glob("/opt/rocm-*"), reverse=True):
    if (hits := sorted(glob.glob(os.path.join(d, "lib", "librccl.so*")), key=len)): return hits[0]
  return ctypes.util.find_library("rccl")

@functools.cache
def librccl() -> ctypes.CDLL:
  path = find_rccl()
  if path is None: raise FileNotFoundError("librccl.so not found: install ROCm's rccl package or set TINYCORE_LIBRCCL")
  return bind(ctypes.CDLL(path))

class RCCLEngine(NcclApiEngine):
  name, api_name = "rccl", "RCCL"

  @classmethod
  def available(cls, launch) -> str | None:
    if find_rccl() is None: return "librccl.so not found (ROCm's rccl package, or TINYCORE_LIBRCCL=/path/to/librccl.so)"
    if not (os.environ.get("TINYCORE_LIBAMDHIP64") or ctypes.util.find_library("amdhip64") or glob.glob("/opt/rocm*/lib/libamdhip64.so*")):
      return "libamdhip64.so not found (RCCL needs ROCm's HIP runtime and an AMD GPU)"
    if launch.world_size > 1 and launch.launcher not in ("openmpi", "pmi", "pmix", "slurm"):
      return f"the RCCL engine bootstraps over MPI; the {launch.launcher} launcher is not an MPI launcher (use mpirun or srun --mpi=pmix)"
    return None

  @classmethod
  def library(cls) -> ctypes.CDLL: return librccl()

  def check_buffer(self, buf) -> None:
    from tinycore_amd.device import HIPAllocator
    if not isinstance(buf.ensure_allocated().allocator, HIPAllocator):
      raise CollectiveError(f"RCCL needs buffers of the HIP interface (DEV=AMD); {buf.device} allocates through "
                            f"{type(buf.allocator).__name__}: use the MPI engine (TINYCORE_COLLECTIVE=mpi)")

  def stream_pending(self) -> bool:
    from tinycore_amd.hip import libhip
    lib = libhip()
    lib.hipStreamQuery.argtypes, lib.hipStreamQuery.restype = [ctypes.c_void_p], ctypes.c_int
    rc = lib.hipStreamQuery(None)
    if rc not in (0, HIP_ERROR_NOT_READY): raise CollectiveError(f"hipStreamQuery failed with HIP error {rc}")
    return rc == HIP_ERROR_NOT_READY
