"""tinycore.distributed under torchrun, without MPI: the gloo engine (torch.distributed's) bootstraps from RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT. The same per-rank scenarios as test_distributed_mpi.py (that file is the
script each rank runs), launched with `python -m torch.distributed.run --standalone` (torchrun). Skips when torch is
not installed."""
from __future__ import annotations
import os, sys, time, tempfile, subprocess
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "test_distributed_mpi.py")
ROOT = os.path.dirname(HERE)

def _torch_missing() -> str | None:
  try: import torch.distributed as td
  except ImportError: return "torch is not installed"
  return None if td.is_available() and td.is_gloo_available() else "this torch has no gloo backend"

pytestmark = [pytest.mark.needs_device, pytest.mark.skipif(_torch_missing() is not None, reason=str(_torch_missing()))]

def torchrun(n: int, *args: str, timeout: float = 150) -> tuple[int, str, float]:
  # no MPI launcher variables: a test run under mpirun must not make these ranks look like MPI's
  env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMI_", "PMIX_", "SLURM_"))}
  env.update({"DEV": "CPU", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "TINYCORE_COLLECTIVE": ""})
  env.pop("TINYCORE_COLLECTIVE")
  cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), SCRIPT, *args]
  t0 = time.monotonic()
  p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
  return p.returncode, p.stdout + p.stderr, time.monotonic() - t0

def test_collectives_against_numpy_over_gloo():
  rc, out, _ = torchrun(2, "collectives")
  assert rc == 0, out
  for r in range(2): assert f"collectives OK on rank {r} of 2 (gloo)" in out, out
  # the script never calls shutdown(): the engine must still destroy its groups before the interpreter finalizes, or
  # a rank can die with SIGABRT after its work is done (under load, now and then)
  assert out.count("torch groups alive at exit: 0") == 2, out

@pytest.mark.slow   # about 30 s
def test_two_ranks_train_like_one_process_over_gloo():
  # the one-process reference runs without any launcher (the local engine); the 2 ranks under torchrun (gloo)
  with tempfile.TemporaryDirectory() as d:
    one, two = os.path.join(d, "one.npz"), os.path.join(d, "two.npz")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "TINYCORE_COLLECTIVE") and not k.startswith(("OMPI_", "PMI"))}
    p = subprocess.run([sys.executable, SCRIPT, "train", one, "30", "1"], capture_output=True, text=True, timeout=150,
                       env={**env, "DEV": "CPU", "TINYCORE_COLLECTIVE": "local"}, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    rc, out, _ = torchrun(2, "train", two, "30", "1")
    assert rc == 0, out
    a, b = np.load(one), np.load(two)
    for k in a.files: np.testing.assert_allclose(b[k], a[k], rtol=2e-4, atol=2e-5)

@pytest.mark.slow   # about 65 s: rank 0 fails after its 3 s deadline, then torchrun gives the stopped rank 30 s to end on SIGTERM
def test_hung_rank_fails_fast_over_gloo():
  rc, out, secs = torchrun(2, "die", "hang", timeout=180)
  assert rc != 0, out
  assert "CollectiveTimeout" in out and "timed out after 3 s" in out, out
  assert "rank 0 was not stopped" not in out
  assert secs < 150, f"took {secs:.1f} s"

def test_dead_rank_ends_the_job_over_gloo():
  rc, out, secs = torchrun(2, "die", "exit", timeout=120)
  assert rc != 0, out
  assert "rank 0 was not stopped" not in out
  assert secs < 90, f"took {secs:.1f} s"
