"""The RCCL engine without an AMD GPU or ROCm: a fake librccl (fake_rccl/fake_rccl.c, a world of one rank) over the
fake HIP runtime (fake_hip/), both built here with the system C compiler. Checks the NCCL-API calls the engine makes
through ctypes (device pointers, counts, dtype and op codes), the unique-id bootstrap, the deadline (a stream that
never finishes ends in CollectiveTimeout and ncclCommAbort) and the errors. The real librccl is not on this machine
(ROCm is not installed and there is no librccl wheel on PyPI): collectives over several AMD GPUs are not run here."""
import ctypes, os, shutil, subprocess
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.device import Device
from tinycore.distributed.launcher import LaunchInfo
from tinycore.distributed import CollectiveError, CollectiveTimeout
from tinycore_amd import device as amd_device, hip, plugin, rccl

HERE = os.path.dirname(os.path.abspath(__file__))
CC = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)

def _build(tmp_path_factory, src: str, name: str) -> str:
  if CC is None: pytest.skip("no C compiler (cc/gcc/clang) to build the fakes")
  so = str(tmp_path_factory.mktemp(name) / f"{name}.so")
  r = subprocess.run([CC, "-shared", "-fPIC", "-O1", "-o", so, os.path.join(HERE, src)], capture_output=True, text=True)
  if r.returncode: pytest.fail(f"building {src} failed:\n{r.stderr}")
  return so

@pytest.fixture(scope="module")
def fake_libs(tmp_path_factory):
  return _build(tmp_path_factory, "fake_hip/fake_amdhip64.c", "fake_hip"), _build(tmp_path_factory, "fake_rccl/fake_rccl.c", "fake_rccl")

def _forget():
  hip.libhip.cache_clear(); rccl.librccl.cache_clear(); amd_device._contexts.clear(); Device.reset()

@pytest.fixture
def engine(fake_libs, registry, monkeypatch):
  hip_so, rccl_so = fake_libs
  monkeypatch.setenv("TINYCORE_LIBAMDHIP64", hip_so)
  monkeypatch.setenv("TINYCORE_LIBRCCL", rccl_so)
  _forget()
  hiplib, fake = ctypes.CDLL(hip_so), ctypes.CDLL(rccl_so)
  hiplib.fake_set_arch(b"gfx1100"); hiplib.fake_set_devices(1); hiplib.fake_set_stream_busy(0)
  fake.fake_last_count.restype = ctypes.c_size_t
  eng = rccl.RCCLEngine(LaunchInfo(0, 1, 0, "none"), timeout=0.3)
  yield eng, fake, hiplib
  hiplib.fake_set_stream_busy(0)
  _forget()

def _buf(a: np.ndarray):
  return Tensor(a, device="AMD").realize()._buffer()

def test_offered_for_amd_only_and_says_why_not_here(monkeypatch):
  assert plugin.tinycore_collectives("AMD") == [rccl.RCCLEngine] and plugin.tinycore_collectives("CPU") is None
  monkeypatch.delenv("TINYCORE_LIBRCCL", raising=False)
  if rccl.find_rccl() is None: assert "librccl.so not found" in rccl.RCCLEngine.available(LaunchInfo(0, 1, 0, "none"))
  monkeypatch.setenv("TINYCORE_LIBRCCL", "/x/librccl.so")
  monkeypatch.setenv("TINYCORE_LIBAMDHIP64", "/x/libamdhip64.so")
  assert "bootstraps over MPI" in rccl.RCCLEngine.available(LaunchInfo(0, 2, 0, "torchrun"))

def test_collectives_call_the_api_with_device_pointers(engine):
  eng, fake, _ = engine
  a = np.arange(12, dtype=np.float32)
  inp, out = _buf(a), _buf(np.zeros(12, np.float32))
  for op, code in (("sum", 0), ("max", 2), ("min", 3), ("mean", 4)):
    eng.allreduce(out, inp, op)
    assert (fake.fake_last_op(), fake.fake_last_dtype(), fake.fake_last_count()) == (code, 7, 12)
    np.testing.assert_array_equal(np.frombuffer(out.as_buffer(), np.float32), a)
  h = _buf(np.arange(6, dtype=np.float16))
  ho = _buf(np.zeros(6, np.float16))
  eng.allgather(ho, h)
  assert (fake.fake_last_dtype(), fake.fake_last_count()) == (6, 6)
  np.testing.assert_array_equal(np.frombuffer(ho.as_buffer(), np.float16), np.arange(6, dtype=np.float16))
  eng.broadcast(out, inp, 0)
  assert fake.fake_calls() == 6
  assert (eng.rank, eng.world_size) == (0, 1)

def test_send_without_a_peer_is_rccls_error(engine):
  eng, _, _ = engine
  with pytest.raises(CollectiveError, match=r"send to rank 0 failed: RCCL error 5 \(invalid usage\)"): eng.send(_buf(np.ones(2, np.float32)), 0, 0)

def test_no_rccl_dtype_is_a_clear_error(engine):
  eng, _, _ = engine
  b = Tensor([True, False], device="AMD").realize()._buffer()
  with pytest.raises(CollectiveError, match="RCCL has no dtypes.bool; cast to float32 first"): eng.allreduce(b, b, "sum")

def test_stream_that_never_finishes_times_out_and_aborts(engine):
  eng, fake, hiplib = engine
  b = _buf(np.ones(4, np.float32))
  hiplib.fake_set_stream_busy(1)
  with pytest.raises(CollectiveTimeout, match=r"allreduce\(sum\) on rank 0 of 1 timed out after 0.3 s"): eng.allreduce(b, b, "sum")
  assert fake.fake_aborts() >= 1
  with pytest.raises(CollectiveError, match="communicator is unusable"): eng.allreduce(b, b, "sum")

def test_collective_through_the_frontend(engine, monkeypatch):
  from tinycore import distributed as dist
  for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"): monkeypatch.delenv(k, raising=False)
  monkeypatch.setenv("TINYCORE_COLLECTIVE", "rccl")
  dist.init(device="AMD", abort_on_error=False)
  try:
    assert dist.get_engine("AMD").name == "rccl"
    x = Tensor(np.arange(5, dtype=np.float32), device="AMD").realize()   # copied in: the fake HIP runs no kernels
    y = dist.allreduce(x, "sum")
    assert y.dtype == dtypes.float32 and y.device == "AMD"
    np.testing.assert_array_equal(y.numpy(), np.arange(5, dtype=np.float32))
  finally: dist.shutdown()
