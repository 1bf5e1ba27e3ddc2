"""Multi-process tests of tinycore.distributed: 2-4 ranks on this machine under OpenMPI's mpirun, over loopback.

pytest runs mpirun on this same file as a script (`python tests/test_distributed_mpi.py SCENARIO ...`); each rank
checks its own results against numpy and exits non-zero on a mismatch, which makes mpirun fail. Skips with the reason
when mpirun or mpi4py is missing (scripts/setup.d/mpi.sh installs both)."""
from __future__ import annotations
import os, sys, time, shutil, signal, subprocess, tempfile
import numpy as np
import pytest

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))

def _mpi_missing() -> str | None:
  if shutil.which("mpirun") is None: return "mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev; scripts/setup.d/mpi.sh)"
  try: import mpi4py  # noqa: F401
  except ImportError: return "mpi4py is not installed (scripts/setup.d/mpi.sh)"
  return None

def mpirun(n: int, *args: str, timeout: float = 120, env: dict | None = None) -> tuple[int, str, float]:
  """Run this file as a script on `n` ranks; returns (exit status, stdout+stderr, seconds)."""
  e = {**os.environ, "DEV": "CPU", "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1",
       "PYTHONUNBUFFERED": "1", **(env or {})}
  cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), sys.executable, HERE, *args]
  t0 = time.monotonic()
  p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e, cwd=ROOT)
  return p.returncode, p.stdout + p.stderr, time.monotonic() - t0

# ***** what each rank runs *****

def rank_data(r: int, shape, dtype=np.float32) -> np.ndarray:
  rng = np.random.default_rng(1000 + r)
  return (rng.standard_normal(shape) * 10).astype(dtype) if np.dtype(dtype).kind == "f" else rng.integers(-1000, 1000, shape).astype(dtype)

def _report_torch_groups_at_exit() -> None:
  """Registered before dist.init, so it runs after the engines' own exit handlers (atexit is last in, first out): any
  torch.distributed group still alive now would be torn down in the interpreter's finalization, which can abort a
  rank that finished (gloo_engine.py's docstring)."""
  td = sys.modules.get("torch.distributed")
  if td is not None and td.is_available(): print(f"torch groups alive at exit: {int(td.is_initialized())}")

def scenario_collectives() -> None:
  import atexit
  from tinycore import Tensor, TinyJit
  from tinycore import distributed as dist
  atexit.register(_report_torch_groups_at_exit)
  dist.init(timeout=60)
  r, W = dist.rank(), dist.world_size()
  close = np.testing.assert_allclose
  for dt in (np.float32, np.int32, np.float64):
    xs = [rank_data(i, (5, 7), dt) for i in range(W)]
    x = Tensor(xs[r])
    np.testing.assert_array_equal(dist.allreduce(x, "max").numpy(), np.max(xs, axis=0))
    np.testing.assert_array_equal(dist.allreduce(x, "min").numpy(), np.min(xs, axis=0))
    close(dist.allreduce(x, "sum").numpy(), np.sum(xs, axis=0, dtype=dt), rtol=1e-5)
    if np.dtype(dt).kind == "f": close(dist.allreduce(x * 1, "mean").numpy(), np.mean(xs, axis=0, dtype=dt), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(dist.allgather(x).numpy(), np.concatenate(xs))
  # half precision: moved as bytes; MPI can't reduce it (a clear error on every rank before any message is sent), gloo can
  hs = [rank_data(i, (6,)).astype(np.float16) for i in range(W)]
  np.testing.assert_array_equal(dist.allgather(Tensor(hs[r])).numpy(), np.concatenate(hs))
  if dist.get_engine("CPU").name == "mpi":
    try:
      dist.allreduce(Tensor(hs[r]), "sum")
      raise AssertionError("float16 allreduce on the MPI engine did not raise")
    except dist.CollectiveError as e:
      if "cast to float32" not in str(e): raise
  else: close(dist.allreduce(Tensor(hs[r]), "sum").numpy(), np.sum(hs, axis=0, dtype=np.float16), rtol=2e-3, atol=2e-2)
  # reduce_scatter: axis 0 split in world_size parts, this rank gets part r of the sum
  ys = [rank_data(10 + i, (W * 3, 4)) for i in range(W)]
  close(dist.reduce_scatter(Tensor(ys[r]), "sum").numpy(), np.sum(ys, axis=0)[3 * r:3 * r + 3], rtol=1e-5, atol=1e-5)
  # broadcast from the last rank; a lazy input (x + 1) is realized first
  root = W - 1
  np.testing.assert_array_equal(dist.broadcast(Tensor(rank_data(r, (33,))) + 1, root).numpy(), rank_data(root, (33,)) + 1)
  # send/recv around a ring
  nxt, prv = (r + 1) % W, (r - 1) % W
  if W > 1:
    if r % 2 == 0:
      dist.send(Tensor(rank_data(r, (4, 4))), nxt, tag=7); got = dist.recv((4, 4), prv, tag=7)
    else:
      got = dist.recv((4, 4), prv, tag=7); dist.send(Tensor(rank_data(r, (4, 4))), nxt, tag=7)
    np.testing.assert_array_equal(got.numpy(), rank_data(prv, (4, 4)))
  # under TinyJit: the collective is captured and replayed on new inputs
  @TinyJit
  def f(a: Tensor) -> Tensor: return dist.allreduce(a * 2 + 1, "sum").realize()
  for step in range(4):
    zs = [rank_data(100 * step + i, (64,)) for i in range(W)]
    close(f(Tensor(zs[r])).numpy(), np.sum([z * 2 + 1 for z in zs], axis=0), rtol=1e-5, atol=1e-4)
  if f.captured is None: raise AssertionError("TinyJit did not capture the step")
  dist.barrier()
  print(f"collectives OK on rank {r} of {W} ({dist.get_engine('CPU').name})")

def scenario_sharded() -> None:
  """Tensors split over the ranks (distributed.shard): gather, elementwise, sums and matmuls against numpy, with
  lengths that don't divide by the world size (and a part that is empty on 4 ranks)."""
  from tinycore import Tensor
  from tinycore import distributed as dist
  dist.init(timeout=60)
  r, W = dist.rank(), dist.world_size()
  close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)   # noqa: E731
  rng = np.random.default_rng(7)   # the same whole arrays on every rank
  A, B, C = [rng.standard_normal(s).astype(np.float32) for s in [(7, 10), (10, 5), (7, 10)]]
  for axis in (0, 1):
    a = dist.shard(Tensor(A), axis)
    want = np.array_split(A, W, axis=axis)[r]
    assert a.shape == A.shape and a.local.shape == want.shape, (a, want.shape)
    np.testing.assert_array_equal(a.local.numpy(), want)
    np.testing.assert_array_equal(a.full().numpy(), A)                         # allgather of uneven parts
    close((a * 2 + dist.shard(Tensor(C), axis)).full().numpy(), A * 2 + C)     # elementwise: local, no communication
    close(a.sum(axis).numpy(), A.sum(axis))                                     # over the split axis: allreduce
    close(a.sum(1 - axis).full().numpy(), A.sum(1 - axis))                      # over the other: still split
    close(a.sum().numpy(), A.sum())
  # fewer rows than ranks: the last ranks hold empty parts
  D = rng.standard_normal((3, 4)).astype(np.float32)
  d = dist.shard(Tensor(D), 0)
  np.testing.assert_array_equal(d.full().numpy(), D)
  close(d.sum(0).numpy(), D.sum(0))
  # a split contraction axis: local block products allreduced
  close((dist.shard(Tensor(A), 1) @ dist.shard(Tensor(B), 0)).numpy(), A @ B)
  close((dist.shard(Tensor(A), 1) @ Tensor(B)).numpy(), A @ B)
  # split rows (or columns) stay split through the matmul
  rows = dist.shard(Tensor(A), 0) @ Tensor(B)
  assert isinstance(rows, dist.RankSharded) and rows.axis == 0
  close(rows.full().numpy(), A @ B)
  cols = dist.matmul(Tensor(A), dist.shard(Tensor(B), 1))
  assert isinstance(cols, dist.RankSharded) and cols.axis == 1
  close(cols.full().numpy(), A @ B)
  # parts each rank made itself: 3 rows on rank 0, 1 on the others
  part = np.full((3 if r == 0 else 1, 4), r, np.float32)
  joined = dist.from_local(Tensor(part), 0)
  expect = np.concatenate([np.full((3 if i == 0 else 1, 4), i, np.float32) for i in range(W)])
  assert joined.shape == (W + 2, 4) and joined.sizes == (3,) + (1,) * (W - 1)
  np.testing.assert_array_equal(joined.full().numpy(), expect)
  # a mismatched split is an error in the user's terms
  try:
    dist.shard(Tensor(A), 0) @ dist.shard(Tensor(B), 1)
    raise AssertionError("matmul of rows-split by columns-split did not raise")
  except ValueError as e:
    if "gather one with .full() first" not in str(e): raise
  dist.barrier()
  print(f"sharded OK on rank {r} of {W}")

def digits_batches(steps: int, batch: int):
  from sklearn.datasets import load_digits
  X, Y = load_digits(return_X_y=True)
  X = (X / 16.0).astype(np.float32)
  rng = np.random.default_rng(0)
  for _ in range(steps):
    idx = rng.choice(len(X), batch, replace=False)
    yield X[idx], Y[idx].astype(np.int32)

def scenario_train(out_path: str, steps: str = "30", jit: str = "1") -> None:
  """An MLP on sklearn's digits: each of W ranks takes 1/W of the same global batch; gradients averaged across ranks
  must give the same weights as one process on the whole batch."""
  from tinycore import Tensor, TinyJit, nn
  from tinycore import distributed as dist
  dist.init(timeout=60)
  r, W = dist.rank(), dist.world_size()
  rng = np.random.default_rng(42 + r)   # different init per rank: DataParallel's broadcast must make them equal
  w1 = Tensor((rng.standard_normal((64, 32)) * 0.1).astype(np.float32), requires_grad=True)
  b1 = Tensor(np.zeros(32, np.float32), requires_grad=True)
  w2 = Tensor((rng.standard_normal((32, 10)) * 0.1).astype(np.float32), requires_grad=True)
  params = [w1, b1, w2]
  opt = dist.DataParallel(nn.optim.SGD(params, lr=0.5, momentum=0.9), bucket_mb=0.004)   # a tiny bucket: > 1 bucket
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = ((x @ w1 + b1).relu() @ w2).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
      return loss.realize()
  run = TinyJit(step) if jit == "1" else step
  B = 48
  for xb, yb in digits_batches(int(steps), B):
    part = slice(r * B // W, (r + 1) * B // W)
    run(Tensor(xb[part]), Tensor(yb[part]))
  if r == 0: np.savez(out_path, *[p.numpy() for p in params])
  print(f"train OK on rank {r} of {W}")

def scenario_die(how: str) -> None:
  """Rank 1 stops taking part after one allreduce; rank 0's next allreduce must fail within the timeout."""
  from tinycore import Tensor
  from tinycore import distributed as dist
  dist.init(timeout=3)
  r = dist.rank()
  dist.allreduce(Tensor(np.ones(8, np.float32))).numpy()
  if r == 1:
    print("rank 1 stops", flush=True)
    if how == "hang": os.kill(os.getpid(), signal.SIGSTOP)   # a wedged process: alive, never answers
    os._exit(7)
  time.sleep(0.5)
  dist.allreduce(Tensor(np.ones(8, np.float32))).numpy()
  print("rank 0 was not stopped", flush=True)

# ***** pytest *****

pytestmark = [pytest.mark.needs_device, pytest.mark.skipif(_mpi_missing() is not None, reason=str(_mpi_missing()))]

@pytest.mark.parametrize("n", [2, pytest.param(3, marks=pytest.mark.slow), 4])
def test_collectives_against_numpy(n):
  rc, out, _ = mpirun(n, "collectives")
  assert rc == 0, out
  for r in range(n): assert f"collectives OK on rank {r} of {n} (mpi)" in out, out

@pytest.mark.parametrize("n", [pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow), 4])   # 4: uneven and empty parts
def test_sharded_tensors_against_numpy(n):
  rc, out, _ = mpirun(n, "sharded")
  assert rc == 0, out
  for r in range(n): assert f"sharded OK on rank {r} of {n}" in out, out

@pytest.mark.parametrize("jit", ["1", pytest.param("0", marks=pytest.mark.slow)])
def test_two_ranks_train_like_one_process(jit):
  with tempfile.TemporaryDirectory() as d:
    one, two = os.path.join(d, "one.npz"), os.path.join(d, "two.npz")
    rc, out, _ = mpirun(1, "train", one, "30", jit)
    assert rc == 0, out
    rc, out, _ = mpirun(2, "train", two, "30", jit)
    assert rc == 0, out
    a, b = np.load(one), np.load(two)
    for k in a.files:
      np.testing.assert_allclose(b[k], a[k], rtol=2e-4, atol=2e-5)
    # and training did something: the weights moved away from rank 0's initialisation
    w1_init = (np.random.default_rng(42).standard_normal((64, 32)) * 0.1).astype(np.float32)
    assert np.abs(a["arr_0"] - w1_init).max() > 1e-2

def test_hung_rank_makes_others_fail_fast():
  rc, out, secs = mpirun(2, "die", "hang", timeout=90)
  assert rc != 0, out
  assert "CollectiveTimeout" in out and "timed out after 3 s" in out, out
  assert "rank 0 was not stopped" not in out
  assert secs < 60, f"took {secs:.1f} s"

def test_dead_rank_ends_the_job():
  rc, out, secs = mpirun(2, "die", "exit", timeout=90)
  assert rc != 0, out
  assert "rank 0 was not stopped" not in out
  assert secs < 60, f"took {secs:.1f} s"

if __name__ == "__main__":
  sys.path.insert(0, ROOT)
  {"collectives": scenario_collectives, "sharded": scenario_sharded, "train": scenario_train, "die": scenario_die}[sys.argv[1]](*sys.argv[2:])
