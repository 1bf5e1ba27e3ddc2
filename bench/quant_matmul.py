"""The CPU plugin's quantized matmul (tinycore_cpu/quant_matmul.c) against torch float32 on the same shapes: GFLOP/s
(2*M*N*K per call, int8 MACs counted as float ones) per format and token count, the output rows split between threads
as the runtime does. Shapes are a SmolLM2-135M layer's (dim 576, ffn 1536) and a 4096-wide one.

  .venv/bin/python bench/quant_matmul.py                       # every format, M = 1, 16, 64, 128, 512
  .venv/bin/python bench/quant_matmul.py --kinds Q4_0 --m 64 --threads 1   # CPU time of one thread: for a busy machine
  .venv/bin/python bench/quant_matmul.py --lib /tmp/other.so   # another build of quant_matmul.c (an A/B comparison)"""
from __future__ import annotations
import argparse, ctypes, os, threading, time
import numpy as np

SHAPES = [(1536, 576), (576, 1536), (4096, 4096)]   # (N, K)

def build(lib_path: str | None):
  if lib_path: return ctypes.CDLL(lib_path)
  from tinycore import Device
  from tinycore_cpu.quant_matmul import _library
  return _library(Device["CPU"].compiler)

def timeit(fn, clock=time.perf_counter, min_time=0.3) -> float:
  """Best of several calls. clock=time.thread_time (one thread) counts only this thread's CPU time: on a shared, busy
  machine that is the time the work took, not the time it waited for a core."""
  fn()
  best, total, n = float("inf"), 0.0, 0
  while total < min_time or n < 3:
    t0 = clock(); fn(); dt = clock() - t0
    best, total, n = min(best, dt), total + dt, n + 1
  return best

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--kinds", default="Q4_0,Q4_1,Q5_0,Q5_1,Q8_0,Q2_K,Q3_K,Q4_K,Q5_K,Q6_K", help="ggml formats (default: all ten)")
  ap.add_argument("--m", default="1,16,64,128,512", help="token counts (default: 1,16,64,128,512)")
  ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads, rows split between them (default: all cores)")
  ap.add_argument("--shapes", default=",".join(f"{n}x{k}" for n, k in SHAPES), help="NxK weight shapes (default: %(default)s)")
  ap.add_argument("--no-torch", action="store_true", help="skip the torch float32 column")
  ap.add_argument("--lib", help="a prebuilt quant_matmul.c library to measure instead of the plugin's")
  args = ap.parse_args()
  from tinycore.llm.quant_encode import quantize
  lib = build(args.lib)
  try:
    import torch
    torch.set_num_threads(args.threads)
  except ImportError: torch = None
  if args.no_torch: torch = None
  # one thread: CPU time of this thread (the machine may be shared); several: wall time
  clock = time.thread_time if args.threads == 1 else time.perf_counter
  ptr = lambda a: ctypes.c_void_p(a.ctypes.data)
  print(f"{'kind':6s} {'N x K':>11s} {'M':>4s} {'ms':>8s} {'GFLOP/s':>8s} {'torch f32':>9s} {'ratio':>6s}")
  for shape in args.shapes.split(","):
    N, K = map(int, shape.split("x"))
    w = np.random.default_rng(0).standard_normal((N, K)).astype(np.float32) * 0.05
    for kind in args.kinds.split(","):
      if K % (256 if kind.endswith("_K") else 32): continue
      raw = np.frombuffer(quantize(w, kind), np.uint8).copy()
      fn = getattr(lib, f"qmm_{kind.lower()}"); fn.restype = None
      for M in map(int, args.m.split(",")):
        x = np.random.default_rng(1).standard_normal((M, K)).astype(np.float32)
        out = np.empty((M, N), np.float32)
        bounds = [N * i // args.threads for i in range(args.threads + 1)]
        i64 = ctypes.c_int64
        def run():
          ts = [threading.Thread(target=fn, args=(ptr(out), ptr(x), ptr(raw), i64(K), i64(M), i64(N), i64(0), i64(s), i64(e)))
                for s, e in zip(bounds, bounds[1:])]
          for t in ts: t.start()
          for t in ts: t.join()
        one = lambda: fn(ptr(out), ptr(x), ptr(raw), i64(K), i64(M), i64(N), i64(0), i64(0), i64(N))
        dt = timeit(one, clock) if args.threads == 1 else timeit(run)
        gf = 2 * M * N * K / dt / 1e9
        tgf = ratio = float("nan")
        if torch is not None:
          xt, wt = torch.from_numpy(x), torch.from_numpy(w)
          tdt = timeit(lambda: xt @ wt.T, clock)
          tgf, ratio = 2 * M * N * K / tdt / 1e9, tdt / dt
        print(f"{kind:6s} {shape:>11s} {M:4d} {dt * 1e3:8.3f} {gf:8.1f} {tgf:9.1f} {ratio:6.2f}x", flush=True)

if __name__ == "__main__": main()
