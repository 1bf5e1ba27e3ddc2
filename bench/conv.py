"""conv2d forward, input gradient and weight gradient: tinycore against torch (same process, interleaved, so both see
the same load), min over reps of wall time and of process CPU time (less skewed by other processes on a shared box).

  .venv/bin/python bench/conv.py                          # 16x64x56x56, 64 3x3 pad 1 fp32 (bench/run.py's conv2d)
  .venv/bin/python bench/conv.py --shape 8,128,28,28,128 --stride 2 --reps 9
Torch runs at --threads (default: this machine's core count, its best on these 2-core boxes)."""
from __future__ import annotations
import argparse, os, time
import numpy as np

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--shape", default="16,64,56,56,64", help="N,Cin,H,W,Cout")
  ap.add_argument("--kernel", type=int, default=3)
  ap.add_argument("--stride", type=int, default=1)
  ap.add_argument("--padding", type=int, default=1)
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
  a = ap.parse_args()
  import torch
  from tinycore import Tensor, TinyJit, Device
  torch.set_num_threads(a.threads)
  N, C, H, W, K = (int(v) for v in a.shape.split(","))
  kw = {"stride": a.stride, "padding": a.padding}
  rng = np.random.default_rng(0)
  xn = rng.standard_normal((N, C, H, W), dtype=np.float32)
  wn = (rng.standard_normal((K, C, a.kernel, a.kernel)) / np.sqrt(C * a.kernel ** 2)).astype(np.float32)
  tx, tw = torch.from_numpy(xn), torch.from_numpy(wn)
  tg = torch.randn(torch.nn.functional.conv2d(tx, tw, **kw).shape, generator=torch.Generator().manual_seed(1))
  x, w, g = Tensor(xn).realize(), Tensor(wn).realize(), Tensor(tg.numpy()).realize()

  def dx(x, w, g):
    x = x.detach().requires_grad_()
    return x.conv2d(w.detach(), **kw).gradient(x, gradient=g)[0].realize()
  def dw(x, w, g):
    w = w.detach().requires_grad_()
    return x.detach().conv2d(w, **kw).gradient(w, gradient=g)[0].realize()
  jf, jx, jw = TinyJit(lambda x, w: x.conv2d(w, **kw).realize()), TinyJit(dx), TinyJit(dw)
  F = torch.nn.functional
  cases = {"forward": (lambda: jf(x, w), lambda: F.conv2d(tx, tw, **kw)),
           "input grad": (lambda: jx(x, w, g), lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tg, **kw)),
           "weight grad": (lambda: jw(x, w, g), lambda: torch.nn.grad.conv2d_weight(tx, tw.shape, tg, **kw))}
  for name, (ours, theirs) in cases.items():
    got, exp = ours().numpy(), theirs().numpy()
    ours(); ours()
    print(f"{name}: max error {np.abs(got - exp).max() / np.abs(exp).max():.1e} of torch's largest value")
  times: dict[str, list[list[float]]] = {k: [[], [], [], []] for k in cases}
  sync = Device[x.device].synchronize
  for _ in range(a.reps):
    for name, (ours, theirs) in cases.items():
      for i, f in enumerate((lambda: (ours(), sync()), theirs)):
        t, c = time.perf_counter(), time.process_time()
        f()
        times[name][2 * i].append(time.perf_counter() - t); times[name][2 * i + 1].append(time.process_time() - c)
  o = (H + 2 * a.padding - a.kernel) // a.stride + 1, (W + 2 * a.padding - a.kernel) // a.stride + 1
  flop = 2 * N * K * o[0] * o[1] * C * a.kernel ** 2
  print(f"conv {N}x{C}x{H}x{W}, {K} {a.kernel}x{a.kernel} stride {a.stride} pad {a.padding} fp32; torch threads {a.threads}; "
        f"load average {os.getloadavg()[0]:.2f}; min of {a.reps}")
  print(f"{'':12s} {'tinycore ms':>12s} {'GFLOP/s':>8s} {'torch ms':>9s} {'GFLOP/s':>8s} {'ratio':>6s} {'cpu-time ratio':>15s}")
  for name, (tw_, tc_, pw, pc) in times.items():
    print(f"{name:12s} {min(tw_) * 1e3:12.2f} {flop / min(tw_) / 1e9:8.0f} {min(pw) * 1e3:9.2f} {flop / min(pw) / 1e9:8.0f} "
          f"{min(pw) / min(tw_):5.2f}x {min(pc) / min(tc_):14.2f}x")

if __name__ == "__main__": main()
