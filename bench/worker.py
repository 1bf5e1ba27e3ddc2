"""One framework's side of the benchmark, in its own process: `python worker.py FRAMEWORK [--quick] [--only a,b]`.
Prints one JSON list of results as its last stdout line. Imports only the framework it is asked for (and numpy):
tinygrad runs here under its own interpreter, never in a process with tinycore."""
from __future__ import annotations
import argparse, itertools, json, os, statistics, sys, time, traceback
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from workloads import WORKLOADS, BY_NAME, Workload, mlp_tensor_step, mlp_np_step, mlp_torch_step

STARTING = "#bench: starting "   # a stdout line before each workload; results stay the last line

# untimed calls go on for at least this long, for every framework alike: after compiling (or any stretch without memory
# traffic) the first memory-bound calls on this VM ran 2-2.5x slow and took ~10 ms of streaming to reach steady speed
# (a plain C loop over a 64 MB matvec after 50 ms of spinning: 6.2, 5.7, 3.6, 2.8, 2.6 -> 2.4 ms), so a 5-call median
# right after tinycore's compile measured that ramp (decode matvec: 2.13, 1.84, 1.6, 1.41 against a steady 1.2 ms)
WARMUP_S = 0.1

def _time(call, sync, warmup: int, reps: int, budget_s: float) -> list[float]:
  t_warm = time.perf_counter() + WARMUP_S
  for i in itertools.count():
    if i >= warmup and time.perf_counter() >= t_warm: break
    call(); sync()
  times: list[float] = []
  t_end = time.perf_counter() + budget_s
  while len(times) < reps and (not times or time.perf_counter() < t_end):
    st = time.perf_counter(); call(); sync()
    times.append(time.perf_counter() - st)
  return times

class Tensorish:
  """tinycore and tinygrad: same API, jitted with TinyJit (the first two calls run and capture; timing starts after)
  unless the workload is an eager one."""
  warmup = 3
  def __init__(self, name: str):
    self.name = name
    self.T = __import__(name)
    self.dev = self.T.Device[self.T.Device.DEFAULT]
  def sync(self): self.dev.synchronize()
  def missing(self, w: Workload) -> str | None:
    miss = [m for m in w.needs if not hasattr(self.T.Tensor, m)]
    return f"Tensor.{', Tensor.'.join(miss)} not available in {self.name} yet" if miss else None
  def prepare(self, w: Workload, arrs: list):
    T = self.T
    if w.stateful:
      x, oh, *ps = [T.Tensor(a) for a in arrs]
      T.Tensor.realize(x, oh, *ps)
      jf = T.TinyJit(mlp_tensor_step(T, ps))
      return lambda: jf(x, oh), ps
    ins = [T.Tensor(a).realize() for a in arrs]
    jf = T.TinyJit(lambda *xs: w.tensor(T, *xs)) if w.jit else (lambda *xs: w.tensor(T, *xs).realize())
    return lambda: jf(*ins), None
  def to_np(self, out) -> np.ndarray: return out.numpy()

class Numpy:
  warmup = 1
  name = "numpy"
  def sync(self): pass
  def missing(self, w): return None
  def prepare(self, w, arrs):
    if w.stateful:
      x, oh, *ps = [a.copy() for a in arrs]
      f = mlp_np_step(ps)
      return lambda: f(x, oh), ps
    return lambda: w.np_fn(*arrs), None
  def to_np(self, out): return np.asarray(out)

class Torch:
  warmup = 2
  name = "torch"
  def __init__(self):
    import torch
    self.torch = torch
  def sync(self): pass   # CPU ops are synchronous
  def missing(self, w): return None
  def prepare(self, w, arrs):
    torch = self.torch
    if w.stateful:
      x, oh, *ps = [torch.from_numpy(a.copy()) for a in arrs]
      for p in ps: p.requires_grad_(True)
      f = mlp_torch_step(torch, ps)
      return lambda: f(x, oh), ps
    ins = [torch.from_numpy(a) for a in arrs]
    def call():
      with torch.no_grad(): return w.torch_fn(torch, *ins)
    return call, None
  def to_np(self, out): return out.detach().numpy()

def run(fw_name: str, quick: bool, only: list[str] | None, reps: int, budget_s: float) -> list[dict]:
  fw = Tensorish(fw_name) if fw_name in ("tinycore", "tinygrad") else Numpy() if fw_name == "numpy" else Torch()
  results = []
  for w in WORKLOADS:
    if only and w.name not in only: continue
    print(f"{STARTING}{w.name}", flush=True)   # run.py's progress bar: which workload is running
    r = {"workload": w.name, "framework": fw_name, "desc": w.desc(quick), "quick": quick, "flops": w.flops(quick), "bytes": w.nbytes(quick)}
    results.append(r)
    if (why := fw.missing(w)) is not None: r["skipped"] = why; continue
    try:
      arrs = w.inputs(np.random.default_rng(0), quick)
      first = {}
      call, _ = fw.prepare(w, arrs)
      def call_keep():
        out = call()
        if "out" not in first: first["out"] = fw.to_np(out)   # the first result: a train step's loss before any update
        return out
      st = time.perf_counter(); call_keep(); fw.sync(); r["first_call_ms"] = (time.perf_counter() - st) * 1e3
      times = _time(call, fw.sync, fw.warmup - 1, reps, budget_s)
      r["times_ms"] = [t * 1e3 for t in times]
      r["ms"] = statistics.median(times) * 1e3
      ref = w.ref(arrs)
      got = first["out"].reshape(np.shape(ref)) if np.size(first["out"]) == np.size(ref) else first["out"]
      err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) + 1e-12)) if np.shape(got) == np.shape(ref) else float("inf")
      r["max_rel_err"], r["ok"] = err, bool(err <= w.rtol)
    except Exception as e:
      r["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
      if os.getenv("BENCH_TRACEBACK"): traceback.print_exc()
  return results

if __name__ == "__main__":
  ap = argparse.ArgumentParser()
  ap.add_argument("framework", choices=["tinycore", "tinygrad", "numpy", "torch"])
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--only", default="")
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--budget", type=float, default=4.0, help="seconds of timed repetitions per workload (at least one runs)")
  a = ap.parse_args()
  only = [s for s in a.only.split(",") if s]
  for s in only:
    if s not in BY_NAME: sys.exit(f"unknown workload {s!r}; known: {', '.join(BY_NAME)}")
  res = run(a.framework, a.quick, only, a.reps, a.budget)
  print("\n" + json.dumps(res))
