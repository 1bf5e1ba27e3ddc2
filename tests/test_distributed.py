"""tinycore.distributed in one process: the launcher's environment, engine choice through the plugin hook, the
one-process engine against numpy (eager and under TinyJit), data-parallel on one rank equal to plain training, the
deadline of the MPI engine's wait, and errors in the user's terms. Multi-process runs: test_distributed_mpi.py."""
from __future__ import annotations
import time
import numpy as np
import pytest
from tinycore import Tensor, TinyJit, nn
from tinycore import distributed as dist
from tinycore.distributed.launcher import from_environment
from tinycore.distributed.engine import CollectiveEngine

# ***** the launcher's environment (no device) *****

@pytest.mark.parametrize("env,expect", [
  ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, (3, 4, 1, "openmpi")),
  ({"PMI_RANK": "1", "PMI_SIZE": "2"}, (1, 2, 0, "pmi")),
  ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1"}, (5, 8, 1, "slurm")),
  ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}, (0, 2, 0, "torchrun")),
  # mpirun inside a Slurm allocation: MPI's numbering wins
  ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3"}, (2, 3, 0, "openmpi")),
  ({}, (0, 1, 0, "none")),
])
def test_launcher_environment(env, expect):
  li = from_environment(env)
  assert (li.rank, li.world_size, li.local_rank, li.launcher) == expect
  if li.launcher == "torchrun": assert (li.master_addr, li.master_port) == ("10.0.0.1", 29500)

@pytest.mark.parametrize("env,msg", [
  ({"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_RANK='x' is not an integer"),
  ({"SLURM_PROCID": "4", "SLURM_NTASKS": "4"}, "rank 4 (SLURM_PROCID) is not below the world size 4"),
  ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK=-1 must be >= 0"),
  ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be >= 1"),
  ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
])
def test_launcher_environment_errors(env, msg):
  with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")): from_environment(env)

def test_timeout_must_be_positive(monkeypatch):
  for bad in ("0", "-3", "soon", "inf"):
    monkeypatch.setenv("TINYCORE_DIST_TIMEOUT", bad)
    with pytest.raises(ValueError, match="timeout"): dist.init()

# ***** the MPI engine's deadline, with a request that never completes (no MPI needed) *****

class _NeverDone:
  def Test(self): return False

def test_wait_raises_at_the_deadline():
  from tinycore.distributed.mpi_engine import MPIEngine
  eng = MPIEngine.__new__(MPIEngine)
  eng.timeout, eng.broken = 0.3, None
  eng.comm = type("C", (), {"Get_rank": lambda self: 1, "Get_size": lambda self: 4})()
  t0 = time.monotonic()
  with pytest.raises(dist.CollectiveTimeout, match=r"allreduce\(sum\) of 64 bytes on rank 1 of 4 timed out after 0.3 s"):
    eng._wait(_NeverDone(), "allreduce(sum) of 64 bytes")
  assert 0.3 <= time.monotonic() - t0 < 2.0
  with pytest.raises(dist.CollectiveError, match="unusable: an earlier allreduce"): eng._start("allgather")

# ***** one process: collectives are identities; results against numpy *****

@pytest.fixture
def one_rank(monkeypatch):
  for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK", "TINYCORE_DIST_TIMEOUT"): monkeypatch.delenv(k, raising=False)
  monkeypatch.setenv("TINYCORE_COLLECTIVE", "local")   # no MPI singleton init inside the test process
  dist.init(abort_on_error=False)
  yield
  dist.shutdown()

@pytest.mark.needs_device
def test_one_rank_collectives(one_rank):
  assert (dist.rank(), dist.world_size(), dist.get_engine("CPU").name) == (0, 1, "local")
  a = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
  x = Tensor(a)
  for op in ("sum", "mean", "max", "min"): np.testing.assert_array_equal(dist.allreduce(x * 2, op).numpy(), a * 2)
  np.testing.assert_array_equal(dist.allgather(x).numpy(), a)
  np.testing.assert_array_equal(dist.reduce_scatter(x).numpy(), a)
  np.testing.assert_array_equal(dist.broadcast(x[1:3]).numpy(), a[1:3])
  np.testing.assert_array_equal(dist.allgather(Tensor(3.5)).numpy(), np.array([3.5], np.float32))
  dist.barrier()

@pytest.mark.needs_device
def test_one_rank_collective_under_jit(one_rank):
  @TinyJit
  def f(a: Tensor) -> Tensor: return (dist.allreduce(a * 3, "sum") + 1).realize()
  for i in range(5):
    v = np.full((8,), i, np.float32)
    np.testing.assert_array_equal(f(Tensor(v)).numpy(), v * 3 + 1)
  assert f.captured is not None and any(type(ei.runner).__name__ == "CollectiveRunner" for ei in f.captured.jit_cache)

@pytest.mark.needs_device
def test_one_rank_errors(one_rank):
  with pytest.raises(dist.CollectiveError, match="op 'mean' needs a float tensor, got dtypes.int"): dist.allreduce(Tensor([1, 2]), "mean")
  with pytest.raises(ValueError, match="unknown reduce op 'prod'"): dist.allreduce(Tensor([1.0]), "prod")
  with pytest.raises(ValueError, match=r"broadcast root must be a rank in 0..0, got 1"): dist.broadcast(Tensor([1.0]), 1)
  with pytest.raises(TypeError, match="allreduce takes a Tensor, got ndarray"): dist.allreduce(np.ones(3))   # type: ignore[arg-type]
  with pytest.raises(ValueError, match="can't send to itself"): dist.send(Tensor([1.0]), 0)

def test_needs_init():
  dist.shutdown()
  with pytest.raises(dist.CollectiveError, match=r"call distributed.init\(\) first"): dist.rank()

@pytest.mark.needs_device
def test_unknown_engine_name(monkeypatch):
  monkeypatch.setenv("TINYCORE_COLLECTIVE", "carrier-pigeon")
  with pytest.raises(dist.CollectiveError, match="no collective engine named 'carrier-pigeon' for device CPU; there are: .*mpi, gloo, local"):
    dist.init(abort_on_error=False)
  dist.shutdown()

# ***** a plugin contributes an engine through the hook *****

class _RecordingEngine(CollectiveEngine):
  name = "recording"
  calls: list = []
  @property
  def rank(self) -> int: return 0
  @property
  def world_size(self) -> int: return 1
  def allreduce(self, out, inp, op):
    _RecordingEngine.calls.append(("allreduce", op, inp.nbytes))
    out.copyin(inp.as_buffer())

class _EnginePlugin:
  TINYCORE_PLUGIN_API = (1, 1)
  @staticmethod
  def tinycore_collectives(device): return [_RecordingEngine] if device == "CPU" else None

@pytest.mark.needs_device
def test_plugin_hook_contributes_the_engine(monkeypatch):
  from tinycore import plugins
  monkeypatch.delenv("TINYCORE_COLLECTIVE", raising=False)
  for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"): monkeypatch.delenv(k, raising=False)
  plugins.register(_EnginePlugin, name="test-engine-plugin")
  try:
    dist.init(abort_on_error=False)
    assert dist.get_engine("CPU").name == "recording"   # the plugin's engine ranks before core's host engines
    _RecordingEngine.calls.clear()
    np.testing.assert_array_equal(dist.allreduce(Tensor(np.ones(5, np.float32)), "max").numpy(), np.ones(5))
    assert _RecordingEngine.calls == [("allreduce", "max", 20)]
  finally:
    dist.shutdown()
    plugins.unregister("test-engine-plugin")

# ***** data-parallel on one rank: identical to plain training *****

def _mlp_run(wrap: bool, jit: bool) -> list[np.ndarray]:
  rng = np.random.default_rng(3)
  w1 = Tensor(rng.standard_normal((16, 8)).astype(np.float32) * 0.3, requires_grad=True)
  w2 = Tensor(rng.standard_normal((8, 4)).astype(np.float32) * 0.3, requires_grad=True)
  opt = nn.optim.Adam([w1, w2], lr=0.01)
  if wrap: opt = dist.DataParallel(opt, bucket_mb=0.0001)   # one bucket per parameter
  def step(x, y):
    with Tensor.train():
      opt.zero_grad()
      loss = ((x @ w1).tanh() @ w2).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
      return loss.realize()
  run = TinyJit(step) if jit else step
  for i in range(6):
    x = np.random.default_rng(i).standard_normal((10, 16)).astype(np.float32)
    run(Tensor(x), Tensor(np.arange(10, dtype=np.int32) % 4))
  return [w1.numpy(), w2.numpy()]

@pytest.mark.needs_device
@pytest.mark.parametrize("jit", [False, True])
def test_data_parallel_one_rank_matches_plain(one_rank, jit):
  for a, b in zip(_mlp_run(False, jit), _mlp_run(True, jit)): np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)

# ***** host path: no extra copies *****

@pytest.mark.needs_device
def test_realized_input_runs_only_the_collective(one_rank):
  from tinycore.helpers import GlobalCounters
  x = Tensor(np.arange(16, dtype=np.float32)).realize()
  before = GlobalCounters.kernel_count
  out = dist.allreduce(x, "sum")
  assert GlobalCounters.kernel_count - before == 1   # the collective itself: no copy kernel of the input first
  np.testing.assert_array_equal(out.numpy(), np.arange(16, dtype=np.float32))

@pytest.mark.needs_device
def test_host_view_is_the_cpu_buffer_itself():
  from tinycore.distributed.engine import host_view
  x = Tensor(np.zeros(8, np.float32), device="CPU").realize()
  arr, is_view = host_view(x._buffer())
  assert is_view and arr.nbytes == 32
  arr.view(np.float32)[3] = 7.0   # MPI writes here: the tensor sees it with no copy back
  assert x.numpy()[3] == 7.0

# ***** gradient buckets overlapped with backward *****

@pytest.mark.needs_device
@pytest.mark.parametrize("overlap", [True, False])
def test_overlapped_buckets_start_inside_backward(one_rank, overlap):
  rng = np.random.default_rng(5)
  ws = [Tensor(rng.standard_normal(s).astype(np.float32) * 0.2, requires_grad=True) for s in [(16, 32), (32, 32), (32, 4)]]
  plain = [Tensor(w.numpy(), requires_grad=True) for w in ws]
  opt = dist.DataParallel(nn.optim.SGD(ws, lr=0.1, momentum=0.9), bucket_mb=0.001, overlap=overlap)   # a bucket per weight
  ref = nn.optim.SGD(plain, lr=0.1, momentum=0.9)
  def make_step(o, w):
    def step(x, y):
      with Tensor.train():
        o.zero_grad()
        ((x @ w[0]).relu() @ w[1]).relu().matmul(w[2]).sparse_categorical_crossentropy(y).backward()
        o.step()
        return w[0].realize()
    return TinyJit(step)
  f, g = make_step(opt, ws), make_step(ref, plain)
  for i in range(5):
    x, y = Tensor(np.random.default_rng(i).standard_normal((8, 16)).astype(np.float32)), Tensor(np.arange(8, dtype=np.int32) % 4)
    f(x, y); g(x, y)
  for a, b in zip(ws, plain): np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
  names = [getattr(ei.runner, "name", None) or ei.runner.p.name for ei in f.captured.jit_cache]
  starts = [i for i, n in enumerate(names) if n.startswith("allreduce_start")]
  kernels = [i for i, n in enumerate(names) if not n.startswith("allreduce")]
  waits = [i for i, n in enumerate(names) if n.startswith("allreduce_wait")]
  assert len(starts) == len(waits) == 3
  # overlapped: the first bucket starts while backward still has kernels to run; otherwise after the last of them
  # (before the optimizer's kernels, which come after the waits)
  backward_end = max(k for k in kernels if k < waits[0])
  assert (starts[0] < backward_end) == overlap, names
  assert max(starts) < min(waits)

# ***** tensors split over ranks, on one rank (the multi-rank runs: test_distributed_mpi.py) *****

def test_split_sizes_follow_array_split():
  from tinycore.distributed.sharded import split_sizes
  for n in range(0, 12):
    for parts in range(1, 5): assert split_sizes(n, parts) == [len(p) for p in np.array_split(np.arange(n), parts)]

@pytest.mark.needs_device
def test_sharded_on_one_rank(one_rank):
  rng = np.random.default_rng(1)
  A, B = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)
  a = dist.shard(Tensor(A), 1)
  assert a.shape == (4, 6) and a.sizes == (6,) and a.local.shape == (4, 6)
  np.testing.assert_allclose(dist.matmul(a, dist.shard(Tensor(B), 0)).numpy(), A @ B, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose((a * 3).full().numpy(), A * 3, rtol=1e-6)
  with pytest.raises(ValueError, match="axis 2 is out of range for a tensor of 2 dimensions"): dist.shard(Tensor(A), 2)
  with pytest.raises(ValueError, match="same shape and split"): a + dist.shard(Tensor(A), 0)
  with pytest.raises(TypeError, match="shard the Tensor the same way first"): a + Tensor(A)
  with pytest.raises(ValueError, match=r"matmul shape mismatch: \(4, 6\) @ \(4, 6\)"): a @ Tensor(A)
