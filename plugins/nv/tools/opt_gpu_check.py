"""On an NVIDIA GPU: the GPU optimizations (codegen/opt_gpu.py register tiles + 16x16 workgroups, opt_tc.py mma.sync)
checked against numpy, then matmul TFLOP/s per setting, each in a fresh process (kernels are cached per process).

  PYTHONPATH=core:plugins/nv python3 plugins/nv/tools/opt_gpu_check.py [N]"""
import os, subprocess, sys
import numpy as np
sys.path.insert(0, os.path.dirname(__file__))

def numeric() -> int:
  from hw_check import setup, checks
  setup()
  from tinycore import Tensor
  bad, rng = checks("NV") + checks("NV:PTX"), np.random.default_rng(0)
  for sa, sb, dt in [((512, 384), (384, 256), np.float32), ((200, 96), (96, 72), np.float32), ((512, 384), (384, 256), np.float16),
                     ((96, 64), (64, 40), np.float16), ((2, 64, 32), (2, 32, 48), np.float16), ((37, 50), (50, 29), np.float16)]:
    a, b = rng.standard_normal(sa).astype(dt), rng.standard_normal(sb).astype(dt)
    got = (Tensor(a, device="NV") @ Tensor(b, device="NV")).numpy().astype(np.float32)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    err = float(np.abs(got - ref).max() / (np.abs(ref).max() + 1e-9))
    ok = err < (5e-3 if dt == np.float16 else 1e-4)
    print(f"  matmul {sa}@{sb} {np.dtype(dt).name}: rel err {err:.2e} {'PASS' if ok else 'FAIL'}", flush=True)
    bad += not ok
  return bad

if __name__ == "__main__":
  if sys.argv[1:2] == ["--one"]:   # child: one setting, one dtype
    from hw_check import setup, bench
    setup()
    print(f"{bench('NV', int(sys.argv[2]), sys.argv[3]):.2f}")
    sys.exit(0)
  n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
  bad = numeric()
  print(f"numeric: {bad} failed", flush=True)
  settings = [("baseline (NOGPUOPT=1)", {"NOGPUOPT": "1"}, ("float32", "float16")), ("default", {}, ("float32", "float16")),
              ("tile 8x4", {"GPU_TILE": "8,4"}, ("float32",)), ("tile 4x8", {"GPU_TILE": "4,8"}, ("float32",)),
              ("tile 8x8", {"GPU_TILE": "8,8"}, ("float32",)), ("tile 2x2", {"GPU_TILE": "2,2"}, ("float32",)),
              ("no tensor cores (TC=0)", {"TC": "0"}, ("float16",))]
  for name, env, dts in settings:
    for dt in dts:
      try:
        out = subprocess.run([sys.executable, __file__, "--one", str(n), dt], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
        res = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else "ERROR " + out.stderr[-600:]
      except Exception as e: res = f"ERROR {e}"
      print(f"matmul {n}^3 {dt:8s} {name:24s}: {res} TFLOP/s", flush=True)
  try:
    from hw_check import torch_bench
    for dt in ("float32", "float16"): print(f"matmul {n}^3 {dt:8s} torch/cuBLAS            : {torch_bench(n, dt):.2f} TFLOP/s", flush=True)
  except Exception as e: print(f"torch: {e}")
  sys.exit(1 if bad else 0)
