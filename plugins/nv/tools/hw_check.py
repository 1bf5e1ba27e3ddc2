"""On a machine with an NVIDIA GPU: numeric checks of DEV=NV with both renderers against numpy, then fp32/half
matmul (4096^3, 8192^3) timed with CUDA events against torch (cuBLAS) in the same process.

  PYTHONPATH=core:plugins/nv python3 plugins/nv/tools/hw_check.py [--quick]
Works installed or straight from the tree (it registers tinycore_nv by hand when no entry point is found)."""
import sys
import numpy as np

def setup():
  from tinycore import plugins
  if plugins.registry.find_device("NV") is None:
    import tinycore_nv.plugin
    plugins.register(tinycore_nv.plugin, name="nv")

def checks(dev: str) -> int:
  from tinycore import Tensor, dtypes
  rng, bad = np.random.default_rng(0), 0
  a, b = rng.standard_normal((257, 130)).astype(np.float32), rng.standard_normal((130, 67)).astype(np.float32)
  ta, tb = Tensor(a, device=dev), Tensor(b, device=dev)
  i = np.arange(-50, 50, dtype=np.int32)
  cases = {
    "matmul": (lambda: (ta @ tb).numpy(), a @ b, 1e-4),
    # half accumulation
    "hmatmul": (lambda: (ta.cast(dtypes.float16) @ tb.cast(dtypes.float16)).float().numpy(),
                (a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32)), 0.3),
    "bf16": (lambda: (ta.cast(dtypes.bfloat16) * 2).float().numpy(), a * 2, 1e-2),
    "sum": (lambda: ta.sum(1).numpy(), a.sum(1), 1e-4),
    "max": (lambda: ta.max(0).numpy(), a.max(0), 0),
    "pad_permute": (lambda: ta.pad(((1, 1), (0, 2))).permute(1, 0).contiguous().numpy(), np.pad(a, ((1, 1), (0, 2))).T, 0),
    "exp2_sin_sqrt": (lambda: (ta.exp2() + ta.sin() + ta.abs().sqrt()).numpy(), np.exp2(a) + np.sin(a) + np.sqrt(np.abs(a)), 1e-4),
    "int_floordiv": (lambda: ((Tensor(i, device=dev) * 3) // 7).numpy(), (i * 3) // 7, 0),
    "where": (lambda: (ta > 0).where(ta, 0).numpy(), np.where(a > 0, a, 0), 0),
    "big_1d": (lambda: (Tensor(np.ones(3_000_001, np.float32), device=dev) * 2).numpy(), np.full(3_000_001, 2, np.float32), 0),
  }
  for name, (fn, ref, tol) in cases.items():
    try:
      got = fn()
      ok = np.allclose(got, ref, rtol=tol, atol=tol) if tol else np.array_equal(got, ref)
      print(f"  {dev:8s} {name:14s} {'PASS' if ok else 'FAIL max err %g' % np.abs(got - ref).max()}", flush=True)
    except Exception as e: ok = False; print(f"  {dev:8s} {name:14s} ERROR {type(e).__name__}: {str(e)[:1500]}", flush=True)
    bad += not ok
  return bad

def bench(dev: str, n: int, dt: str) -> float:
  from tinycore import Tensor, dtypes
  from tinycore.engine.run import run_schedule, lower_item
  tdt = {"float32": dtypes.float32, "float16": dtypes.float16}[dt]
  a = Tensor(np.random.rand(n, n).astype(np.float32), device=dev).cast(tdt).realize()
  b = Tensor(np.random.rand(n, n).astype(np.float32), device=dev).cast(tdt).realize()
  sched = (a @ b).schedule()
  run_schedule(sched[:-1])
  ei = lower_item(sched[-1])
  ei.run(wait=True)
  t = min(ei.run(wait=True) for _ in range(3))
  return 2 * n**3 / t / 1e12

def torch_bench(n: int, dt: str) -> float:
  import torch
  a, b = (torch.rand(n, n, device="cuda", dtype=getattr(torch, dt)) for _ in range(2))
  for _ in range(3): a @ b
  s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
  ts = []
  for _ in range(5):
    s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
  return 2 * n**3 / min(ts) / 1e12

if __name__ == "__main__":
  setup()
  from tinycore.device import Device
  d = Device["NV"]
  print(f"NV opened: arch {d.renderer.arch}, renderer {d.renderer.name}", flush=True)
  bad = sum(checks(dev) for dev in ("NV", "NV:PTX"))
  print(f"numeric checks: {bad} failed", flush=True)
  sizes = [4096] if "--quick" in sys.argv else [4096, 8192]
  for n in sizes:
    for dt in ("float32", "float16"):
      try: ours = bench("NV", n, dt)
      except Exception as e: print(f"bench {n} {dt}: ERROR {type(e).__name__}: {str(e)[:500]}"); continue
      try: ref = torch_bench(n, dt)
      except Exception as e: ref = float("nan"); print(f"torch: {e}")
      print(f"matmul {n}^3 {dt}: tinycore {ours:.2f} TFLOP/s, torch/cuBLAS {ref:.2f} TFLOP/s, ratio {ref / ours:.1f}x", flush=True)
  sys.exit(1 if bad else 0)
