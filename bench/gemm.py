"""Matmul GFLOP/s against the machine's FMA peak (bench/fma_peak.py) and against torch: a @ b, a @ b.T and a.T @ b at
square sizes or M x K x N shapes, tinycore and torch interleaved in one process so both see the same load.

  .venv/bin/python bench/gemm.py                          # 1024, 2048, 4096; a @ b and a @ b.T
  .venv/bin/python bench/gemm.py --sizes 1024 --reps 9
  .venv/bin/python bench/gemm.py --sizes 512x4096x4096,128x2048x8192 --cases ab,abT,aTb   # M x K x N (LLM shapes)
  CPU_COUNT=1 .venv/bin/python bench/gemm.py --threads 1  # one core each: the cleanest per-core figure on a busy box

Columns: min wall time; GFLOP/s by wall time and per CPU-second (process CPU time: what the cores delivered while they
ran, less skewed by other processes on a shared machine); `%peak` = GFLOP/s per CPU-second / one core's FMA peak."""
from __future__ import annotations
import argparse, os, sys, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

def per_core_peak() -> float:
  sys.path.insert(0, HERE)
  import fma_peak
  lib = fma_peak.build()
  return max(fma_peak.run(lib, 1, 20_000_000)[0] for _ in range(3))

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--sizes", default="1024,2048,4096", help="n (n^3) or MxKxN, comma-separated")
  ap.add_argument("--cases", default="ab,abT", help="ab: a @ b, abT: a @ b.T, aTb: a.T @ b (comma-separated)")
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch's threads (tinycore's: CPU_COUNT)")
  ap.add_argument("--no-torch", action="store_true")
  a = ap.parse_args()
  from tinycore import Tensor, TinyJit, Device
  torch = None
  if not a.no_torch:
    try:
      import torch
      torch.set_num_threads(a.threads)
    except ImportError: pass
  peak = per_core_peak()
  print(f"one core's fp32 FMA peak {peak:.0f} GFLOP/s; load average {os.getloadavg()[0]:.2f}; min of {a.reps}")
  print(f"{'case':24s} {'tinycore ms':>11s} {'GFLOP/s':>8s} {'/cpu-s':>7s} {'%peak':>6s}"
        f"   {'torch ms':>9s} {'GFLOP/s':>8s} {'/cpu-s':>7s} {'%peak':>6s}"
        f" {'ratio':>6s} {'cpu-ratio':>9s}")
  rng = np.random.default_rng(0)
  # each case: the operands' stored shapes from (M, K, N), the tinycore product and the numpy/torch one
  cases = {"ab": (lambda m, k, n: ((m, k), (k, n)), lambda p, q: p @ q, lambda p, q: p @ q),
           "abT": (lambda m, k, n: ((m, k), (n, k)), lambda p, q: p @ q.T, lambda p, q: p @ q.T),
           "aTb": (lambda m, k, n: ((k, m), (k, n)), lambda p, q: p.T @ q, lambda p, q: p.T @ q)}
  for size in a.sizes.split(","):
    m, k, n = (int(d) for d in size.split("x")) if "x" in size else (int(size),) * 3
    for case in a.cases.split(","):
      shape, fn, ref = cases[case]
      (sa, sb), tag = shape(m, k, n), f"{m}^3" if m == k == n else f"{m}x{k}x{n}"
      an, bn = rng.standard_normal(sa, dtype=np.float32), rng.standard_normal(sb, dtype=np.float32)
      x, y = Tensor(an).realize(), Tensor(bn).realize()
      sync = Device[x.device].synchronize
      name, ours = f"{tag} {dict(ab='a@b', abT='a@b.T', aTb='a.T@b')[case]}", TinyJit(lambda p, q, fn=fn: fn(p, q).realize())
      got = ours(x, y).numpy()
      exp = ref(an.astype(np.float64), bn.astype(np.float64))
      err = np.abs(got - exp).max() / np.abs(exp).max()
      if err > 1e-4: sys.exit(f"{name}: wrong result (max error {err:.1e} of the largest value)")
      ours(x, y); ours(x, y)
      ta, tb = (torch.from_numpy(an), torch.from_numpy(bn)) if torch else (None, None)
      fns = [lambda: (ours(x, y), sync())] + ([lambda: ref(ta, tb)] if torch else [])
      times = [[[], []] for _ in fns]
      for _ in range(a.reps):
        for i, f in enumerate(fns):
          t, c = time.perf_counter(), time.process_time()
          f()
          times[i][0].append(time.perf_counter() - t); times[i][1].append(time.process_time() - c)
      flop = 2 * m * k * n
      cols = []
      for w, c in times:
        gw, gc = flop / min(w) / 1e9, flop / min(c) / 1e9
        cols.append(f"{min(w) * 1e3:9.2f} {gw:8.1f} {gc:7.1f} {100 * gc / peak:5.0f}%")
      line = f"{name:24s} {cols[0]:>11s}"
      if torch:
        line += f"   {cols[1]} {min(times[1][0]) / min(times[0][0]):5.2f}x {min(times[1][1]) / min(times[0][1]):8.2f}x"
      print(line)

if __name__ == "__main__": main()
