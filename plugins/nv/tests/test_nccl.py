"""The NCCL engine without a GPU: libnccl from the nvidia-nccl-cu13 wheel loads, has every symbol the engine calls,
reports a 2.x version, makes a unique id; the engine says why it can't run here, and the NV plugin offers it for NV
only. Running collectives needs NVIDIA GPUs: not done on this machine."""
import ctypes.util
import pytest
from tinycore.distributed.launcher import LaunchInfo
from tinycore_nv import nccl, plugin

needs_nccl = pytest.mark.skipif(nccl.find_nccl() is None, reason="libnccl not found (pip install nvidia-nccl-cu13; scripts/setup.d/mpi.sh)")

@needs_nccl
def test_library_symbols_version_and_unique_id():
  lib = nccl.libnccl()
  missing = [s for s in nccl.SYMBOLS if not hasattr(lib, s)]
  assert not missing, f"libnccl lacks {missing}"
  major, minor, _ = nccl.nccl_version()
  assert major == 2 and minor >= 10, (major, minor)   # ncclAvg (the 'mean' op) needs 2.10
  a, b = nccl.unique_id(), nccl.unique_id()
  assert len(a) == nccl.NCCL_UNIQUE_ID_BYTES and a != b and any(a)
  assert nccl.ncclUniqueId.from_buffer_copy(a) is not None and nccl._raw(nccl.ncclUniqueId.from_buffer_copy(a)) == a

@needs_nccl
def test_error_strings_come_from_nccl():
  with pytest.raises(nccl.CollectiveError, match=r"ncclThing failed: NCCL error 4 \(.*invalid argument"): nccl._check(4, "ncclThing")

def test_engine_offered_for_nv_only_and_says_why_not_here():
  assert plugin.tinycore_collectives("NV") == [nccl.NCCLEngine] and plugin.tinycore_collectives("CPU") is None
  why = nccl.NCCLEngine.available(LaunchInfo(0, 2, 0, "torchrun"))
  if ctypes.util.find_library("cuda") is None: assert why and "libcuda" in why or "libnccl" in why
  else: assert why and "bootstraps over MPI" in why
