"""scaled_dot_product_attention forward and backward: tinycore against torch (same process, interleaved, so both see
the same load), min over reps of wall time; GFLOP/s counts the visible (causal: lower-triangle) scores only.

  .venv/bin/python bench/attention.py                                   # 4,8,512,64 (bench/run.py's attention row)
  .venv/bin/python bench/attention.py --shapes 1,8,2048,64 --causal both --backward --reps 7
  .venv/bin/python bench/attention.py --sweep                           # S = 128/512/2048/4096 x D = 64/128, causal and not
Torch runs at --threads (default: this machine's core count); with --threads 1 (and CPU_COUNT=1 for tinycore) the
last column is the ratio of the calling thread's CPU time, which another process on the core doesn't inflate."""
from __future__ import annotations
import argparse, os, time
import numpy as np

SWEEP = [f"{max(1, 16384 // s)},4,{s},{d}" for s in (128, 512, 2048, 4096) for d in (64, 128)]

def _flop(B: int, H: int, S: int, D: int, causal: bool) -> float:
  visible = S * (S + 1) / 2 if causal else S * S
  return 2 * 2 * B * H * visible * D

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--shapes", default="4,8,512,64", help="B,H,S,D[;B,H,S,D...]")
  ap.add_argument("--sweep", action="store_true", help="the S x D sweep (B chosen so B*S = 16384, H = 4)")
  ap.add_argument("--causal", default="no", choices=["no", "yes", "both"])
  ap.add_argument("--backward", action="store_true", help="also time the gradients of q, k, v (sum(out * g))")
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
  a = ap.parse_args()
  import torch
  from tinycore import Tensor, TinyJit, Device
  torch.set_num_threads(a.threads)
  F = torch.nn.functional
  shapes = SWEEP if a.sweep else a.shapes.split(";")
  causals = {"no": [False], "yes": [True], "both": [False, True]}[a.causal]
  print(f"torch threads {a.threads}; load average {os.getloadavg()[0]:.2f}; min of {a.reps}")
  head = f"{'shape':22s} {'pass':8s} {'tinycore ms':>12s} {'GFLOP/s':>8s} {'torch ms':>9s} {'GFLOP/s':>8s} {'ratio':>6s} {'max err':>8s}"
  print(head + (f" {'cpu ratio':>9s}" if a.threads == 1 else ""))
  for shape in shapes:
    B, H, S, D = (int(v) for v in shape.split(","))
    rng = np.random.default_rng(0)
    qn, kn, vn, gn = (rng.standard_normal((B, H, S, D), dtype=np.float32) for _ in range(4))
    tq, tk, tv, tg = (torch.from_numpy(x) for x in (qn, kn, vn, gn))
    q, k, v, g = (Tensor(x).realize() for x in (qn, kn, vn, gn))
    sync = Device[q.device].synchronize
    for causal in causals:
      fwd = TinyJit(lambda q, k, v, c=causal: q.scaled_dot_product_attention(k, v, is_causal=c).realize())
      def bwd(q, k, v, g, c=causal):
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        grads = (q.scaled_dot_product_attention(k, v, is_causal=c) * g).sum().gradient(q, k, v)
        grads[0].realize(*grads[1:])   # together: one realize each would rerun the shared forward and backward
        return list(grads)
      jbwd = TinyJit(bwd)
      def tbwd(c=causal):
        rq, rk, rv = (x.detach().requires_grad_() for x in (tq, tk, tv))
        return torch.autograd.grad((F.scaled_dot_product_attention(rq, rk, rv, is_causal=c) * tg).sum(), (rq, rk, rv))
      cases = {"forward": (lambda: fwd(q, k, v), lambda c=causal: F.scaled_dot_product_attention(tq, tk, tv, is_causal=c), 1.0)}
      if a.backward: cases["backward"] = (lambda: jbwd(q, k, v, g), tbwd, 2.5)   # dq, dk, dv, and the recomputed p: 5 matmuls vs 2
      for name, (ours, theirs, mult) in cases.items():
        got, exp = ours(), theirs()
        got, exp = ([x.numpy() for x in got], [x.numpy() for x in exp]) if isinstance(got, list) else ([got.numpy()], [exp.numpy()])
        err = max(float(np.abs(x - y).max() / np.abs(y).max()) for x, y in zip(got, exp))
        ours(); ours()
        tt, pt, tc, pc = [], [], [], []
        for _ in range(a.reps):
          t, c = time.perf_counter(), time.thread_time(); ours(); sync(); tt.append(time.perf_counter() - t); tc.append(time.thread_time() - c)
          t, c = time.perf_counter(), time.thread_time(); theirs(); pt.append(time.perf_counter() - t); pc.append(time.thread_time() - c)
        fl = _flop(B, H, S, D, causal) * mult
        print(f"{shape + (' causal' if causal else ''):22s} {name:8s} {min(tt) * 1e3:12.2f} {fl / min(tt) / 1e9:8.0f} "
              f"{min(pt) * 1e3:9.2f} {fl / min(pt) / 1e9:8.0f} {min(pt) / min(tt):5.2f}x {err:8.1e}"
              + (f" {min(pc) / min(tc):8.2f}x" if a.threads == 1 else ""), flush=True)

if __name__ == "__main__": main()
