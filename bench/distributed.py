"""tinycore.distributed measured: allreduce bandwidth against raw mpi4py on the same buffers, and the step time of a
data-parallel digits MLP on 1, 2 and 4 ranks (the same global batch split over the ranks: strong scaling).

  .venv/bin/python bench/distributed.py            # launches itself under mpirun; prints two tables
  .venv/bin/python bench/distributed.py --quick    # small sizes, few reps (seconds)

Needs mpirun and mpi4py (scripts/setup.d/mpi.sh). Every rank is a process of this one machine: on a 2-core machine
4 ranks share 2 cores, so scaling past 2 ranks measures oversubscription, not the method."""
from __future__ import annotations
import os, sys, json, time, shutil, argparse, subprocess
import numpy as np

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))

def _median_time(fn, reps: int, budget: float) -> float:
  fn(); fn()   # warm-up (and TinyJit capture)
  ts: list[float] = []
  end = time.perf_counter() + budget
  while len(ts) < reps and (len(ts) < 3 or time.perf_counter() < end):
    t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
  return float(np.median(ts))

def rank_bandwidth(sizes: list[int], reps: int, budget: float) -> None:
  from mpi4py import MPI
  from tinycore import Tensor
  from tinycore import distributed as dist
  dist.init(timeout=120)
  comm, W, r = MPI.COMM_WORLD, dist.world_size(), dist.rank()
  rows = []
  for nbytes in sizes:
    a = np.random.default_rng(r).standard_normal(nbytes // 4).astype(np.float32)
    x = Tensor(a).realize()
    host = np.frombuffer(x._buffer().as_buffer(), dtype=np.float32)   # the tensor's own memory (CPU): the same buffer
    out = np.empty_like(host)
    def raw(): comm.Allreduce(host, out, op=MPI.SUM)
    def raw_nb():   # the nonblocking form a deadline needs, polled as tight as MPI's own blocking wait
      req = comm.Iallreduce(host, out, op=MPI.SUM)
      while not req.Test(): pass
    def tc(): dist.allreduce(x, "sum").realize()
    comm.Barrier()
    t_raw = _median_time(raw, reps, budget / 3)
    comm.Barrier()
    t_nb = _median_time(raw_nb, reps, budget / 3)
    comm.Barrier()
    t_tc = _median_time(tc, reps, budget / 3)
    np.testing.assert_allclose(dist.allreduce(x, "sum").numpy(), out, rtol=1e-5, atol=1e-5)
    busbw = lambda t: 2 * (W - 1) / W * nbytes / max(t, 1e-9) / 1e9   # noqa: E731  (the ring algorithm's bytes per rank)
    rows.append({"bytes": nbytes, "raw_s": t_raw, "raw_nb_s": t_nb, "tinycore_s": t_tc, "raw_GBps": busbw(t_raw), "tinycore_GBps": busbw(t_tc),
                 "ratio": t_raw / max(t_tc, 1e-9)})
  if r == 0: print("RESULT " + json.dumps({"world": W, "rows": rows}), flush=True)

def rank_step(global_batch: int, steps: int, budget: float, overlap: bool = True, bucket_mb: float = 25.0) -> None:
  from sklearn.datasets import load_digits
  from tinycore import Tensor, TinyJit, nn
  from tinycore import distributed as dist
  dist.init(timeout=120)
  W, r = dist.world_size(), dist.rank()
  X, Y = load_digits(return_X_y=True)
  X, Y = (X / 16.0).astype(np.float32), Y.astype(np.int32)
  rng = np.random.default_rng(0)
  w1 = Tensor((rng.standard_normal((64, 256)) * 0.1).astype(np.float32), requires_grad=True)
  w2 = Tensor((rng.standard_normal((256, 256)) * 0.06).astype(np.float32), requires_grad=True)
  w3 = Tensor((rng.standard_normal((256, 10)) * 0.06).astype(np.float32), requires_grad=True)
  opt = dist.DataParallel(nn.optim.SGD([w1, w2, w3], lr=0.1, momentum=0.9), bucket_mb=bucket_mb, overlap=overlap)
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = ((x @ w1).relu() @ w2).relu().matmul(w3).sparse_categorical_crossentropy(y)
      loss.backward()
      opt.step()
      return loss.realize()
  local = global_batch // W
  idx = rng.choice(len(X), global_batch, replace=False)[r * local:(r + 1) * local]
  xb, yb = Tensor(X[idx]).realize(), Tensor(Y[idx]).realize()
  t = _median_time(lambda: step(xb, yb).numpy(), steps, budget)
  if r == 0: print("RESULT " + json.dumps({"world": W, "step_s": t, "local_batch": local}), flush=True)

def launch(n: int, *args: str) -> dict:
  env = {**os.environ, "DEV": "CPU", "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "PYTHONUNBUFFERED": "1"}
  p = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), sys.executable, HERE, "--rank", *args],
                     capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
  for line in p.stdout.splitlines():
    if line.startswith("RESULT "): return json.loads(line[7:])
  raise RuntimeError(f"{n} ranks: no result (exit {p.returncode})\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--quick", action="store_true", help="small sizes and few repetitions")
  ap.add_argument("--ranks", default="1,2,4", help="world sizes for the step-scaling table")
  ap.add_argument("--rank", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)   # internal: what each rank runs
  a = ap.parse_args()
  if a.rank is not None:
    kind, *rest = a.rank
    if kind == "bw": rank_bandwidth([int(s) for s in rest[0].split(",")], int(rest[1]), float(rest[2]))
    else: rank_step(int(rest[0]), int(rest[1]), float(rest[2]), rest[3] == "1", float(rest[4]))
    return
  if shutil.which("mpirun") is None: sys.exit("bench/distributed.py: mpirun is not installed (scripts/setup.d/mpi.sh)")
  sizes = [16, 1024, 65536, 4194304] if a.quick else [16, 256, 4096, 65536, 262144, 4194304, 33554432]
  reps, budget = (5, 3.0) if a.quick else (30, 15.0)
  print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
  bw = launch(2, "bw", ",".join(map(str, sizes)), str(reps), str(budget))
  print(f"\nallreduce(sum) float32, {bw['world']} ranks on this host (bus GB/s = 2(W-1)/W * bytes / time)")
  print("mpi4py: comm.Allreduce (blocking); mpi4py I: comm.Iallreduce + Test loop; tinycore: dist.allreduce(x).realize()")
  print(f"{'bytes':>10} {'mpi4py us':>10} {'mpi4py I us':>12} {'tinycore us':>12} {'mpi4py GB/s':>12} {'tinycore GB/s':>14} {'raw/tc':>7}")
  for row in bw["rows"]:
    print(f"{row['bytes']:>10} {row['raw_s']*1e6:>10.1f} {row['raw_nb_s']*1e6:>12.1f} {row['tinycore_s']*1e6:>12.1f} "
          f"{row['raw_GBps']:>12.3f} {row['tinycore_GBps']:>14.3f} {row['ratio']:>7.2f}")
  gb = 256
  print(f"\ndigits MLP 64-256-256-10, SGD momentum, TinyJit, global batch {gb} split over the ranks")
  print(f"{'ranks':>5} {'local batch':>11} {'step ms':>9} {'speedup':>8}")
  base = None
  for n in [int(s) for s in a.ranks.split(",")]:
    res = launch(n, "step", str(gb), str(reps), str(budget), "1", "25")
    base = base or res["step_s"]
    print(f"{n:>5} {res['local_batch']:>11} {res['step_s']*1e3:>9.2f} {base / res['step_s']:>8.2f}")
  # overlap: a bucket per weight matrix (0.2 MB buckets), so the last layers' allreduce can travel during backward
  print("\n2 ranks, same step, gradient buckets of 0.2 MB (one per weight matrix): allreduce overlapped with backward or after it")
  print(f"{'overlap':>8} {'step ms':>9}")
  for ov in ("0", "1", "0", "1"):   # interleaved, so a change in the machine's load hits both
    res = launch(2, "step", str(gb), str(reps), str(budget), ov, "0.2")
    print(f"{('yes' if ov == '1' else 'no'):>8} {res['step_s']*1e3:>9.2f}")

if __name__ == "__main__": main()
