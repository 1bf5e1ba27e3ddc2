"""Peak memory of one MLP train step (bench/workloads.py's mlp_train, full size): tinycore vs torch, same step.

What is counted: the most bytes of tensor memory alive at once during the step, everything included (parameters,
inputs, gradients, activations, what a JIT or the previous step holds), in MB.
- tinycore: GlobalCounters.mem_peak (every device buffer goes through Buffer.allocate), eager and TinyJit replays.
- torch: its memory profiler's timeline (profile_memory=True): the tensors alive before the step (PREEXISTING) plus
  allocations minus frees in time order, peak of the running sum. torch allocates through c10's CPU allocator, which
  tracemalloc doesn't see, and RSS keeps freed pages.
Also printed, as a rough cross-check for both: the growth of the process's peak RSS (ru_maxrss) over the steps.

Run: python bench/mlp_memory.py [tinycore|torch] (each in its own process; no argument runs both)."""
from __future__ import annotations
import os, resource, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from workloads import _mlp_inputs, mlp_tensor_step, mlp_torch_step

def _maxrss_mb() -> float: return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def tinycore_peak() -> dict:
  import tinycore as T
  from tinycore.helpers import GlobalCounters
  x, oh, *ps = [T.Tensor(a) for a in _mlp_inputs(np.random.default_rng(0), False)]
  T.Tensor.realize(x, oh, *ps)
  out: dict = {}
  rss0 = _maxrss_mb()
  for name, step in (("eager", mlp_tensor_step(T, ps)), ("jit", T.TinyJit(mlp_tensor_step(T, ps)))):
    peaks = []
    for _ in range(4):
      GlobalCounters.reset()
      step(x, oh).numpy()
      peaks.append(GlobalCounters.mem_peak / 1e6)
    out[name] = peaks
    del step   # the JIT's buffers go with it
  out["maxrss_growth_mb"] = _maxrss_mb() - rss0
  return out

def torch_peak() -> dict:
  import torch
  from torch.profiler import profile, ProfilerActivity
  x, oh, *ps = [torch.from_numpy(a.copy()) for a in _mlp_inputs(np.random.default_rng(0), False)]
  for p in ps: p.requires_grad_(True)
  step = mlp_torch_step(torch, ps)
  rss0 = _maxrss_mb()
  peaks = []
  for _ in range(4):
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof: step(x, oh)
    # torch's memory profiler: every allocation (CREATE) and free (DESTROY) of the step, in time order
    # tensors that existed before the step (parameters, inputs, the last step's .grad) start the running sum
    live = peak = 0
    for _, action, _, size in prof._memory_profile().timeline:
      if action.name in ("PREEXISTING", "CREATE"): live += size
      elif action.name == "DESTROY": live -= size
      peak = max(peak, live)
    peaks.append(peak / 1e6)
  return {"eager": peaks, "maxrss_growth_mb": _maxrss_mb() - rss0}

if __name__ == "__main__":
  which = sys.argv[1:] or ["tinycore", "torch"]
  if len(which) > 1:
    for w in which: subprocess.run([sys.executable, __file__, w], check=True)
    sys.exit(0)
  r = tinycore_peak() if which[0] == "tinycore" else torch_peak()
  print(which[0], {k: [round(v, 2) for v in vs] if isinstance(vs, list) else round(vs, 1) for k, vs in r.items()}, "(MB)")
