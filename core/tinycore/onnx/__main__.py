"""`python -m tinycore.onnx model.onnx [--benchmark]`: run a model on random inputs drawn from its declared shapes and
print its outputs' shapes, or with --benchmark the latency percentiles over repeated runs (like onnxruntime_perf_test)."""
from __future__ import annotations
import argparse, sys, time
from typing import Any
import numpy as np

def random_inputs(runner, dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
  from tinycore.onnx.runner import declared_shape
  from tinycore.onnx.context import onnx_dtype
  rng = np.random.default_rng(seed)
  feeds = {}
  for name, vi in runner.inputs.items():
    shape = []
    for d in declared_shape(vi):
      if isinstance(d, int) and d > 0: shape.append(d)
      elif isinstance(d, str) and d in dims: shape.append(dims[d])
      else: shape.append(dims.get("*", 1))   # an unnamed or unbound dynamic axis
    dt = onnx_dtype(vi.type.tensor_type.elem_type, f"input {name!r}")
    npdt = np.dtype(dt.fmt) if dt.fmt else np.dtype(np.float32)
    if npdt.kind == "f": feeds[name] = rng.standard_normal(shape).astype(npdt)
    elif npdt.kind == "b": feeds[name] = rng.integers(0, 2, shape).astype(bool)
    else: feeds[name] = rng.integers(0, dims.get("int_high", 10), shape).astype(npdt)
  return feeds

def _dims(items: list[str]) -> dict[str, int]:
  out = {}
  for it in items:
    k, _, v = it.partition("=")
    if not v.isdigit(): raise SystemExit(f"--dim takes NAME=INT, got {it!r}")
    out[k] = int(v)
  return out

def percentiles(times_s: list[float]) -> dict[str, float]:
  ms = np.array(times_s) * 1e3
  return {"p50": float(np.percentile(ms, 50)), "p90": float(np.percentile(ms, 90)), "p99": float(np.percentile(ms, 99)),
          "mean": float(ms.mean()), "min": float(ms.min())}

def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m tinycore.onnx", description=__doc__)
  p.add_argument("model")
  p.add_argument("--benchmark", action="store_true", help="time repeated runs and print latency percentiles")
  p.add_argument("-n", "--runs", type=int, default=20)
  p.add_argument("--warmup", type=int, default=3)
  p.add_argument("--device", default=None)
  p.add_argument("--dim", action="append", default=[], help="bind a dynamic axis: NAME=INT (`*=INT` for unnamed ones)")
  p.add_argument("--jit", action="store_true", help="capture the run with TinyJit and replay it")
  a = p.parse_args(argv)
  from tinycore.onnx.runner import OnnxRunner
  from tinycore.tensor import Tensor
  runner = OnnxRunner(a.model, device=a.device)
  feeds = {k: Tensor(v, device=runner.device) for k, v in random_inputs(runner, _dims(a.dim)).items()}
  step: Any = lambda **kw: runner(kw)
  if a.jit:
    from tinycore.engine.jit import TinyJit
    step = TinyJit(lambda **kw: {k: v.realize() for k, v in runner(kw).items()})
  run = lambda: [v.realize() for v in step(**feeds).values()]
  if not a.benchmark:
    for name, v in step(**feeds).items(): print(f"{name}: shape {tuple(v.shape)} {v.dtype.name}")
    return 0
  for _ in range(a.warmup): _sync(run())
  times = []
  for _ in range(a.runs):
    t0 = time.perf_counter(); _sync(run()); times.append(time.perf_counter() - t0)
  pc = percentiles(times)
  print(f"{a.model}: {a.runs} runs on {runner.device}: " + " ".join(f"{k} {v:.3f} ms" for k, v in pc.items()))
  return 0

def _sync(outs):
  # the outputs in host memory, as onnxruntime returns them: the copy waits for the device
  for o in outs: o.numpy()

if __name__ == "__main__": sys.exit(main())
