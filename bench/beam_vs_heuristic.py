"""BEAM against the hand-written heuristic, kernel by kernel: for each workload, every kernel of its schedule is compiled
with the heuristic's actions (codegen/opt.py, what runs by default) and with BEAM's winner (codegen/search.py, width 2,
a time budget per kernel, winners cached on disk like BEAM=2 does), and both are timed on the same scratch buffers,
interleaved, min of --reps.

  .venv/bin/python bench/beam_vs_heuristic.py                    # bench shapes; the first run searches (minutes)
  .venv/bin/python bench/beam_vs_heuristic.py --only matmul_1024,conv
  .venv/bin/python bench/beam_vs_heuristic.py --quick             # tiny shapes, seconds (the smoke test)
  .venv/bin/python bench/beam_vs_heuristic.py --fresh             # search again, ignoring cached winners

`beam/heur` = heuristic time / BEAM time (above 1: BEAM found something faster). Kernels the scheduler keeps whole
(fused attention: their own program writer, no actions) are listed but not searched."""
from __future__ import annotations
import argparse, math, os, sys
import numpy as np

def workloads(quick: bool) -> dict:
  """name -> (description, input shapes, function of the input Tensors -> the lazy result)."""
  mm = (64, 128) if quick else (1024, 2048)
  cv = (2, 8, 12, 12, 8) if quick else (16, 64, 56, 56, 64)
  at = (1, 2, 32, 16) if quick else (4, 8, 512, 64)
  tok = (37, 64, 96) if quick else (197, 768, 3072)   # rows no 8 or 12 divides (a prompt of 197 tokens x an MLP weight)
  return {
    f"matmul_{mm[0]}": (f"a @ b, {mm[0]}^3", [(mm[0], mm[0])] * 2, lambda x, y: x @ y),
    f"matmul_{mm[1]}": (f"a @ b, {mm[1]}^3", [(mm[1], mm[1])] * 2, lambda x, y: x @ y),
    f"matmul_T_{mm[0]}": (f"a @ b.T, {mm[0]}^3", [(mm[0], mm[0])] * 2, lambda x, y: x @ y.T),
    f"matmul_T_{mm[1]}": (f"a @ b.T, {mm[1]}^3", [(mm[1], mm[1])] * 2, lambda x, y: x @ y.T),
    f"matmul_{tok[0]}": (f"a @ b, {tok[0]}x{tok[1]} @ {tok[1]}x{tok[2]}", [tok[:2], tok[1:]], lambda x, y: x @ y),
    "conv": ("conv2d %dx%dx%dx%d, %d 3x3 pad 1" % cv, [cv[:4], (cv[4], cv[1], 3, 3)],
             lambda x, w: x.conv2d(w * (1 / math.sqrt(9 * cv[1])), padding=1)),
    "attention": ("sdpa B,H,S,D = %d,%d,%d,%d" % at, [at] * 3, lambda q, k, v: q.scaled_dot_product_attention(k, v)),
  }

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true", help="tiny shapes and a short budget: a smoke test")
  ap.add_argument("--only", default="", help="comma-separated workload names")
  ap.add_argument("--budget", type=float, default=None, help="seconds of BEAM search per kernel (default 60, --quick 3)")
  ap.add_argument("--width", type=int, default=2, help="beam width (BEAM=n)")
  ap.add_argument("--reps", type=int, default=None, help="timed runs per variant (default 7, --quick 2)")
  ap.add_argument("--fresh", action="store_true", help="ignore cached BEAM winners and search again")
  a = ap.parse_args()
  budget = a.budget if a.budget is not None else (3.0 if a.quick else 60.0)
  reps = a.reps if a.reps is not None else (2 if a.quick else 7)
  from tinycore import Tensor, Device, Context
  from tinycore.uop import Ops
  from tinycore.codegen import get_program, prepare_kernel, is_fused
  from tinycore.codegen import opt as O
  from tinycore.codegen.search import beam_search
  from tinycore.device import Buffer
  dev = Device[Device.DEFAULT]
  renderer = dev.renderer
  wl = workloads(a.quick)
  names = [n for n in a.only.split(",") if n] or list(wl)
  if unknown := [n for n in names if n not in wl]: sys.exit(f"unknown workload(s) {unknown}; choose from {', '.join(wl)}")

  def timer(ast, opts):
    """A function that runs the kernel compiled with `opts` once on scratch buffers and returns its time in seconds."""
    p = get_program(ast, renderer, opts=opts)
    prg = dev.compiler.load_cached(p.src, lambda lib: dev.runtime(p.name, lib))
    glob = sorted({u.arg: u for u in p.uops if u.op is Ops.DEFINE_GLOBAL}.items())
    bufs = [Buffer(dev.device, max(u.dtype.size, 1), u.dtype.base).allocate() for _, u in glob]
    return lambda: prg(*[b._buf for b in bufs], global_size=p.global_size, local_size=p.local_size, vals=(), wait=True, work=p.ops + p.mem)

  print(f"device {dev.device}, renderer {renderer.name}; BEAM width {a.width}, budget {budget:g} s per kernel"
        f"{', fresh search' if a.fresh else ', cached winners reused'}; min of {reps}; load average {os.getloadavg()[0]:.2f}")
  rows, totals = [], []
  for name in names:
    desc, shapes, fn = wl[name]
    rng = np.random.default_rng(0)
    ins = [Tensor(rng.standard_normal(sh, dtype=np.float32)).realize() for sh in shapes]
    # BEAM's winners must compute what the heuristic's kernels do (a wrong variant that is fast would win the search)
    with Context(BEAM_TIME_LIMIT=budget, IGNORE_BEAM_CACHE=int(a.fresh)):
      with Context(BEAM=0): ref = fn(*ins).numpy()
      with Context(BEAM=a.width): got = fn(*ins).numpy()
    err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    if not err <= 1e-4: sys.exit(f"{name}: BEAM's kernels differ from the heuristic's (max error {err:.1e} of the largest value)")
    items = [si for si in fn(*ins).schedule() if si.ast.op is Ops.SINK]
    tot_h = tot_b = 0.0
    for si in items:
      kname = get_program(si.ast, renderer, opts=()).name
      if is_fused(si.ast):
        rows.append((name, kname, None, None, "fused (own program writer)", "-")); continue
      heur = O.heuristic_opts(prepare_kernel(si.ast, dev.device), renderer)
      with Context(BEAM_TIME_LIMIT=budget):   # the search above cached this kernel's winner
        beam = beam_search(si.ast, dev, a.width)
      # the same actions are the same program: timed once (two timings of one program differ only by the machine's noise)
      runs = [timer(si.ast, heur)] + ([timer(si.ast, beam)] if tuple(beam) != tuple(heur) else [])
      for r in runs: r()   # warm-up: page in the buffers, load the program
      ts: list[list[float]] = [[] for _ in runs]
      for _ in range(reps):
        for i, r in enumerate(runs): ts[i].append(r())
      th, tb = min(ts[0]), min(ts[-1])
      tot_h, tot_b = tot_h + th, tot_b + tb
      rows.append((name, kname, th, tb, heur, beam))
    totals.append((name, desc, tot_h, tot_b))
    print(f"{name}: BEAM={a.width} result matches the heuristic's (max error {err:.1e})", flush=True)
  print(f"\n{'workload':14s} {'kernel':28s} {'heuristic us':>12s} {'BEAM us':>10s} {'beam/heur':>9s}  actions (heuristic | BEAM)")
  for name, kname, th, tb, heur, beam in rows:
    if th is None: print(f"{name:14s} {kname[:28]:28s} {'-':>12s} {'-':>10s} {'-':>9s}  {heur}"); continue
    same = tuple(heur) == tuple(beam)
    print(f"{name:14s} {kname[:28]:28s} {th * 1e6:12.1f} {tb * 1e6:10.1f} {th / tb:8.2f}x  {'same actions' if same else ''}")
    if not same: print(f"{'':14s}   heuristic {list(heur)}\n{'':14s}   BEAM      {list(beam)}")
  print(f"\n{'workload':14s} {'':28s} {'heuristic ms':>12s} {'BEAM ms':>10s} {'beam/heur':>9s}  (searched kernels only)")
  for name, desc, th, tb in totals:
    print(f"{name:14s} {desc[:28]:28s} {th * 1e3:12.3f} {tb * 1e3:10.3f} {th / tb if tb else float('nan'):8.2f}x")

if __name__ == "__main__": main()
