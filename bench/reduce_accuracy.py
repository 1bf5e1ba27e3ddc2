"""Float reductions: speed and error. `python bench/reduce_accuracy.py [--sizes 1e6,1e7,1e8] [--reps 15]`

For each size: median and best time of jitted sum() and mean() over a float32 vector (numpy and torch alongside),
and the relative error of tinycore, numpy and torch against a float64 sum, for N(0,1) data, for N(1,0.1) data (all
terms one sign: the case where a long float32 accumulation drifts) and for ones (exact answer n)."""
from __future__ import annotations
import argparse, statistics, time
import numpy as np

def _timeit(fn, reps: int) -> tuple[float, float]:
  for _ in range(3): fn()
  ts = []
  for _ in range(reps):
    t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
  return statistics.median(ts), min(ts)

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--sizes", default="1e6,1e7,1e8")
  ap.add_argument("--reps", type=int, default=15)
  a = ap.parse_args()
  from tinycore import Tensor, TinyJit, Device
  try: import torch
  except ImportError: torch = None
  dev = Device[Device.DEFAULT]
  rng = np.random.default_rng(0)
  print(f"device {Device.DEFAULT}")
  for n in (int(float(s)) for s in a.sizes.split(",")):
    print(f"--- n = {n:.0e}")
    datas = {"N(0,1)": rng.standard_normal(n, dtype=np.float32), "N(1,.1)": (1 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32),
             "ones": np.ones(n, np.float32)}
    for kind, x in datas.items():
      ref = x.astype(np.float64).sum()
      t = Tensor(x).realize()
      errs = {"tinycore": abs(float(t.sum().item()) - ref) / abs(ref), "numpy": abs(float(x.sum()) - ref) / abs(ref)}
      if torch is not None: errs["torch"] = abs(float(torch.from_numpy(x).sum()) - ref) / abs(ref)
      print(f"  sum rel err {kind:8s} " + "  ".join(f"{k} {v:.2e}" for k, v in errs.items()))
    x = datas["N(0,1)"]
    t = Tensor(x).realize()
    for op in ("sum", "mean"):
      jf = TinyJit(lambda v, op=op: getattr(v, op)().realize())
      fns = {"tinycore": lambda: (jf(t), dev.synchronize()), "numpy": lambda: getattr(x, op)()}
      if torch is not None:
        tx = torch.from_numpy(x)
        fns["torch"] = lambda: getattr(tx, op)()
      res = {k: _timeit(f, a.reps) for k, f in fns.items()}
      print(f"  {op:4s} " + "  ".join(f"{k} {m * 1e3:.2f} ms (best {b * 1e3:.2f}, {n * 4 / b / 1e9:.1f} GB/s)" for k, (m, b) in res.items()))

if __name__ == "__main__": main()
