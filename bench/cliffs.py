"""Shapes users hit that sit off the tuned paths (ragged N, batched attention-sized products, a @ b.T, 1x1/strided/
depthwise convs, SDPA at odd lengths), tinycore against torch on ONE core each: a cliff shows as a ratio far under 1.

Both run in this process, interleaved, on one thread (CPU_COUNT=1, torch.set_num_threads(1)), so a load spike hits
both; each time is the min process time of `--reps` calls after two warm-ups (tinycore under TinyJit). Every result is
checked against torch first. Needs torch (CPU build).

  CPU_COUNT=1 .venv/bin/python bench/cliffs.py                   # every group
  CPU_COUNT=1 .venv/bin/python bench/cliffs.py --only bmm,conv   # groups: mm, mmT, bmm, conv, dw, attn"""
from __future__ import annotations
import argparse, os, time
os.environ.setdefault("CPU_COUNT", "1")
import numpy as np

def _cases(F):
  mm = lambda a, b: a @ b
  mmT = lambda a, b: a @ b.transpose(-1, -2)
  yield "mm", [(f"{M}x{K} @ {K}x{N}", [(M, K), (K, N)], mm, mm) for M, K, N in
               [(1000, 1000, 50), (1000, 1000, 36), (1000, 1000, 40), (1000, 1000, 100), (512, 512, 33), (255, 255, 255), (1000, 1000, 1000)]]
  yield "mmT", [(f"{M}x{K} @ ({N}x{K}).T", [(M, K), (N, K)], mmT, mmT) for M, K, N in
                [(1000, 1000, 90), (128, 512, 1000), (77, 768, 3072), (197, 768, 2304), (7, 4096, 4095)]]
  yield "bmm", [(f"{B}x{M}x{K} @ {B}x{K}x{N}", [(B, M, K), (B, K, N)], mm, mm) for B, M, K, N in
                [(8, 127, 64, 129), (16, 77, 64, 77), (12, 197, 64, 197), (32, 33, 65, 17)]]
  def conv(s, p, g=1): return (lambda x, w: x.conv2d(w, stride=s, padding=p, groups=g)), (lambda x, w: F.conv2d(x, w, stride=s, padding=p, groups=g))
  yield "conv", [(f"conv {N}x{C}x{H}x{W} -> {O} {k}x{k} s{s}", [(N, C, H, W), (O, C, k, k)], *conv(s, k // 2)) for N, C, H, W, O, k, s in
                 [(8, 3, 224, 224, 64, 7, 2), (8, 64, 56, 56, 64, 3, 1), (8, 128, 28, 28, 256, 1, 1), (8, 256, 14, 14, 256, 3, 2),
                  (4, 96, 27, 27, 96, 5, 1)]]
  yield "dw", [(f"depthwise {N}x{C}x{H}x{W} 3x3", [(N, C, H, W), (C, 1, 3, 3)], *conv(1, 1, C)) for N, C, H, W in
               [(8, 96, 56, 56), (8, 144, 28, 28), (8, 33, 31, 31)]]
  def sdpa(causal): return (lambda q, k, v: q.scaled_dot_product_attention(k, v, is_causal=causal)), \
                           (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
  yield "attn", [(f"sdpa{' causal' if c else ''} {B},{H},{S},{D}", [(B, H, S, D)] * 3, *sdpa(c)) for B, H, S, D in
                 [(1, 12, 197, 64), (2, 8, 77, 64), (1, 16, 513, 128)] for c in (False, True)]

def _min_cpu(f, reps: int) -> float:
  f(); f()
  ts = []
  for _ in range(reps):
    st = time.process_time(); f(); ts.append(time.process_time() - st)
  return min(ts)

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--only", default="", help="comma-separated groups (default: all)")
  ap.add_argument("--reps", type=int, default=5)
  a = ap.parse_args()
  import torch
  import torch.nn.functional as F
  from tinycore import Tensor, TinyJit, Device
  torch.set_num_threads(1)
  dev, only = Device[Device.DEFAULT], set(filter(None, a.only.split(",")))
  print(f"{'case':44s} {'tinycore ms':>12s} {'torch ms':>10s}  torch/tinycore")
  for group, cases in _cases(F):
    if only and group not in only: continue
    for name, shapes, tfn, pfn in cases:
      rng = np.random.default_rng(0)
      arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
      tt, pt = [Tensor(x).realize() for x in arrs], [torch.from_numpy(x) for x in arrs]
      jit = TinyJit(lambda *xs, f=tfn: f(*xs).realize())
      ref = pfn(*pt).numpy()
      np.testing.assert_allclose(jit(*tt).numpy(), ref, rtol=2e-3, atol=2e-3 * max(1.0, float(np.abs(ref).max())))
      tc = _min_cpu(lambda: (jit(*tt), dev.synchronize()), a.reps)
      th = _min_cpu(lambda: pfn(*pt), a.reps)
      print(f"{name:44s} {tc * 1e3:12.3f} {th * 1e3:10.3f}  {th / tc:6.2f}x{'  <- cliff' if th / tc < 0.3 else ''}", flush=True)

if __name__ == "__main__": main()
