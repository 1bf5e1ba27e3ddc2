"""Per-kernel profile of the MLP train step (bench/workloads.py's mlp_train) under TinyJit: each captured kernel timed
on its own with its FLOPs, bytes, GFLOP/s and outer-loop size n (the threads split that loop).

Each kernel runs as a batch of R copies of itself through the CPU graph driver (the way a replay runs it: the worker
team stays awake between kernels), once on the caller alone (1T, its CPU time) and once split as the replay splits it (2T, or
CPU_COUNT threads, wall time); each time is the batch's min over repeats divided by R. The last line also times the whole step.

Run: python bench/mlp_kernels.py [repeats] [--src] [--quick]  (--src prints each kernel's C source; --quick: the
bench's tiny sizes, seconds, for bench/test_bench_smoke.py)."""
from __future__ import annotations
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from workloads import _mlp_inputs, mlp_tensor_step

R = 8   # copies of a kernel per timed batch

def main(reps: int = 50, src: bool = False, quick: bool = False):
  import tinycore as T
  from tinycore.engine.jit_graph import describe
  from tinycore_cpu.graph import CPUGraph
  x, oh, *ps = [T.Tensor(a) for a in _mlp_inputs(np.random.default_rng(0), quick)]
  T.Tensor.realize(x, oh, *ps)
  step = T.TinyJit(mlp_tensor_step(T, ps))
  for _ in range(4): step(x, oh)
  cj = step.captured
  items = cj.jit_cache
  def once(f):
    t0 = time.perf_counter(); f(); return time.perf_counter() - t0
  def cpu(f):   # the calling thread's CPU time: a single-thread figure other processes on the machine hardly move
    t0 = time.thread_time(); f(); return time.thread_time() - t0
  whole = min(once(lambda: step(x, oh)) for _ in range(reps))
  ins = [x.uop.base.arg, oh.uop.base.arg]   # the replay drops its inputs from the items: put them back to run items alone
  for (j, i), k in cj.input_replace.items(): items[j].bufs[i] = ins[k]
  rows = []
  for ei in items:
    p = ei.runner.p
    g = CPUGraph([describe(ei, frozenset(), set())] * R, {})
    threads = g.threads
    t1 = min(cpu(lambda: g.run(g.table_at, R, 1)) for _ in range(reps)) / R
    tn = min(once(lambda: g.run(g.table_at, R, threads)) for _ in range(reps)) / R
    rows.append((p.name, t1, tn, p.ops, p.mem, p.global_size[0], g.table[0].chunks))
    if src: print(p.src)
  tot1, totn, flops = sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows)
  print(f"{'kernel':24s} {'1T us':>8s} {f'{threads}T us':>8s} {'MFLOP':>8s} {'GF/s 1T':>8s} {f'GF/s {threads}T':>8s} "
        f"{'MB':>6s} {'n':>4s} {'pcs':>4s} {'%1T':>5s}")
  for name, t1, tn, ops, mem, n, chunks in rows:
    print(f"{name[:24]:24s} {t1*1e6:8.1f} {tn*1e6:8.1f} {ops/1e6:8.2f} {ops/t1*1e-9:8.1f} {ops/tn*1e-9:8.1f} "
          f"{mem/1e6:6.2f} {n:4d} {chunks:4d} {100*t1/tot1:5.1f}")
  print(f"{len(rows)} kernels, {flops/1e6:.1f} MFLOP; sum 1T {tot1*1e6:.0f} us ({flops/tot1*1e-9:.1f} GFLOP/s), "
        f"sum {threads}T {totn*1e6:.0f} us ({flops/totn*1e-9:.1f} GFLOP/s); whole step (replay, min of {reps}) {whole*1e6:.0f} us; "
        f"load {os.getloadavg()[0]:.1f}")

if __name__ == "__main__":
  args = [a for a in sys.argv[1:] if not a.startswith("--")]
  main(int(args[0]) if args else 50, "--src" in sys.argv, "--quick" in sys.argv)
