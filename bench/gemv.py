"""Matrix-vector products (LLM decode shapes) on the CPU: tinycore (TinyJit replays) against numpy and torch.

Each framework runs in its own process (their thread pools spin after a call: in one process they stole each other's
cores), and the parent interleaves them round by round so a load spike from another process hits every framework
alike. Reports the median GB/s of weight traffic per shape and layout, and the load average.

  .venv/bin/python bench/gemv.py [--rounds 7] [--only 1x4096x4096] [--layouts xw,wx]

Layouts: `xw` is x @ W with W [K, N] row-major (the reduce walks down W's columns); `wx` is x @ W.T with W [N, K]
(each output reads one contiguous row of W)."""
from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys, time
import numpy as np

SHAPES = [(1, 4096, 4096), (1, 576, 1536), (1, 1536, 576), (1, 4096, 11008), (2, 4096, 4096), (4, 4096, 4096), (8, 4096, 4096),
          (1, 4095, 4097), (1, 4097, 4095)]

def _arrays(M: int, K: int, N: int, lay: str):
  rng = np.random.default_rng(M * 1_000_003 + K * 1009 + N)
  x = rng.standard_normal((M, K)).astype(np.float32)
  w = (rng.standard_normal((K, N) if lay == "xw" else (N, K)) * 0.02).astype(np.float32)
  return x, w

def worker(name: str) -> None:
  """Reads `M K N layout reps` lines, answers with the median seconds of `reps` calls (after checking the result once)."""
  prepared: dict[tuple, object] = {}
  if name == "torch":
    import torch
    torch.set_num_threads(len(os.sched_getaffinity(0)))
  for line in sys.stdin:
    M, K, N, lay, reps = line.split()
    key = (int(M), int(K), int(N), lay)
    if key not in prepared:
      x, w = _arrays(*key)
      if name == "tinycore":
        from tinycore import Tensor, TinyJit, Device
        tx, tw, dev = Tensor(x).realize(), Tensor(w).realize(), Device[Device.DEFAULT]
        jf = TinyJit(lambda a, b, lay=lay: (a @ b if lay == "xw" else a @ b.T).realize())
        for _ in range(3): out = jf(tx, tw).numpy()
        fn = lambda jf=jf, tx=tx, tw=tw, dev=dev: (jf(tx, tw), dev.synchronize())
      elif name == "torch":
        px, pw = torch.from_numpy(x), torch.from_numpy(w)
        fn = lambda px=px, pw=pw, lay=lay: px @ (pw if lay == "xw" else pw.T)
        out = fn().numpy()
      else:
        fn = lambda x=x, w=w, lay=lay: x @ (w if lay == "xw" else w.T)
        out = fn()
      ref = x.astype(np.float64) @ (w if lay == "xw" else w.T).astype(np.float64)
      np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())
      prepared[key] = fn
    fn = prepared[key]
    fn()
    ts = []
    for _ in range(int(reps)):
      st = time.perf_counter(); fn(); ts.append(time.perf_counter() - st)
    print(json.dumps(statistics.median(ts)), flush=True)

def _cpu_ns(pid: int) -> int | None:
  """CPU time of all of a process's threads so far (Linux), or None where /proc can't tell."""
  total = 0
  try:
    for tid in os.listdir(f"/proc/{pid}/task"):
      try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as fh: total += int(fh.read().split()[0])
      except (OSError, ValueError, IndexError): pass   # a thread that just exited
  except OSError: return None
  return total

def wait_idle(pid: int, quiet_ns: int = 500_000, step_s: float = 0.005, limit_s: float = 1.0) -> None:
  """Wait until a worker's threads stop spinning (under `quiet_ns` of CPU in `step_s`) before the next framework runs.
  OpenBLAS's threads spin ~0.1 s after a call and OpenMP's (torch) a while too: a fixed 20 ms pause left them on the
  cores, and torch, run right after numpy, measured 8.4 GB/s instead of ~59 on 1x4096 @ 4096x4096."""
  last, end = _cpu_ns(pid), time.perf_counter() + limit_s
  if last is None: time.sleep(0.2); return   # no /proc: longer than OpenBLAS's spin
  while time.perf_counter() < end:
    time.sleep(step_s)
    now = _cpu_ns(pid)
    if now is None or now - last < quiet_ns: return
    last = now

def main() -> None:
  ap = argparse.ArgumentParser()
  ap.add_argument("--rounds", type=int, default=7)
  ap.add_argument("--reps", type=int, default=10, help="calls per framework per round")
  ap.add_argument("--only", default="", help="comma-separated MxKxN shapes (default: all)")
  ap.add_argument("--layouts", default="xw,wx")
  ap.add_argument("--frameworks", default="tinycore,numpy,torch")
  ap.add_argument("--worker", default="")
  a = ap.parse_args()
  if a.worker: return worker(a.worker)
  shapes = [tuple(int(v) for v in s.split("x")) for s in a.only.split(",")] if a.only else SHAPES
  procs = {f: subprocess.Popen([sys.executable, __file__, "--worker", f], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
           for f in a.frameworks.split(",")}
  def ask(f: str, M, K, N, lay, reps) -> float:
    p = procs[f]
    p.stdin.write(f"{M} {K} {N} {lay} {reps}\n"); p.stdin.flush()   # type: ignore[union-attr]
    line = p.stdout.readline()   # type: ignore[union-attr]
    if not line: raise RuntimeError(f"{f} worker died (shape {M}x{K}x{N} {lay})")
    wait_idle(p.pid)
    return json.loads(line)
  print(f"load average before: {os.getloadavg()}")
  others = ", ".join(f for f in procs if f != "tinycore")
  print(f"{'shape':>20} {'layout':>6}" + "".join(f" {f + ' GB/s':>13}" for f in procs) + f"  tinycore vs {others}")
  try:
    for M, K, N in shapes:
      for lay in a.layouts.split(","):
        times: dict[str, list[float]] = {f: [] for f in procs}
        for _ in range(a.rounds):
          for f in procs: times[f].append(ask(f, M, K, N, lay, a.reps))
        gbs = {f: K * N * 4 / statistics.median(v) / 1e9 for f, v in times.items()}
        rel = ", ".join(f"{gbs['tinycore'] / gbs[f]:.2f}x" for f in procs if f != "tinycore") if "tinycore" in gbs else ""
        print(f"{f'{M}x{K} @ {K}x{N}':>20} {lay:>6}" + "".join(f" {gbs[f]:13.1f}" for f in procs) + f"  {rel}", flush=True)
  finally:
    for p in procs.values(): p.stdin.close(); p.wait()   # type: ignore[union-attr]
  print(f"load average after: {os.getloadavg()}")

if __name__ == "__main__": main()
