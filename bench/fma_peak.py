"""The machine's fp32 FMA peak, the yardstick for matmul GFLOP/s: bench/fma_peak.c built with the CPU plugin's own
compiler and flags, run on 1 thread and on every usable core at once.

  .venv/bin/python bench/fma_peak.py               # ~2 s per thread count
  .venv/bin/python bench/fma_peak.py --seconds 0.2 # quicker, noisier

Each thread's GFLOP/s is counted against its own CPU time (time.thread_time) as well as wall time: on a shared machine
other processes take cores away, and the CPU-time figure is what a core delivers while it runs, the one to compare
against a kernel's GFLOP/s per CPU-second. Best of several rounds (interference only makes a round slower)."""
from __future__ import annotations
import argparse, ctypes, os, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))

def build() -> ctypes.CDLL:
  from tinycore_cpu.compiler_c import CCompiler
  cc = CCompiler()
  with open(os.path.join(HERE, "fma_peak.c")) as f: src = f.read()
  with tempfile.TemporaryDirectory() as d:
    so = os.path.join(d, "fma_peak.so")
    p = subprocess.run([cc.cc, *cc.flags, "-x", "c", "-", "-o", so], input=src.encode(), capture_output=True)
    if p.returncode != 0: sys.exit(f"fma_peak.c failed to build:\n{p.stderr.decode(errors='replace')}")
    lib = ctypes.CDLL(so)   # loaded before the directory goes; the mapping survives the unlink
  lib.fma_chains.argtypes, lib.fma_chains.restype = [ctypes.c_long, ctypes.c_float], ctypes.c_float
  return lib

def run(lib: ctypes.CDLL, threads: int, iters: int) -> tuple[float, float]:
  """(GFLOP/s per thread by CPU time, aggregate GFLOP/s by wall time) for `threads` threads of `iters` rounds each.
  ctypes drops the GIL during the call, so the threads run in parallel."""
  flops = iters * lib.fma_chain_count() * lib.fma_lanes() * 2
  cpu: list[float] = [0.0] * threads
  def work(i: int) -> None:
    t0 = time.thread_time(); lib.fma_chains(iters, 1.0 + i); cpu[i] = time.thread_time() - t0
  ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
  w0 = time.perf_counter()
  for t in ts: t.start()
  for t in ts: t.join()
  wall = time.perf_counter() - w0
  return flops / max(cpu) / 1e9, flops * threads / wall / 1e9

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--seconds", type=float, default=0.5, help="target length of one round")
  ap.add_argument("--rounds", type=int, default=4)
  ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
  args = ap.parse_args()
  lib = build()
  # size a round from a short calibration run on one thread
  cal = 200_000
  t0 = time.thread_time(); lib.fma_chains(cal, 1.0); dt = max(time.thread_time() - t0, 1e-4)
  iters = max(1000, int(cal * args.seconds / dt))
  print(f"{lib.fma_lanes()}-float vectors, {lib.fma_chain_count()} independent FMA chains, {iters} rounds per thread; load {os.getloadavg()[0]:.1f}")
  for n in sorted({1, args.threads}):
    best_cpu, best_wall = 0.0, 0.0
    for _ in range(args.rounds):
      c, w = run(lib, n, iters)
      best_cpu, best_wall = max(best_cpu, c), max(best_wall, w)
    many = "s" if n > 1 else ""
    print(f"{n} thread{many or ' '}: {best_cpu:7.1f} GFLOP/s per core (CPU time)   {n * best_cpu:7.1f} for {n} core{many}   "
          f"wall: {best_wall:7.1f} GFLOP/s")

if __name__ == "__main__": main()
