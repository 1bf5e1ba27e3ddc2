"""Rewrite-engine micro-benchmark: input nodes per second of graph_rewrite(expr, symbolic) on large index expressions,
in tinycore and (when a python with tinygrad 0.14.0 is found) in tinygrad, on the same expressions built through each
one's UOp API. Usage: python bench/bench_rewrite.py [--quick] [--tg-python /tmp/venv-tg/bin/python]"""
from __future__ import annotations
import sys, os, time, json, argparse, subprocess, statistics, functools, operator

# ---- the workloads, written once against a tiny API shim (var, sink, lt, maximum) so both engines build the same graphs
def strides(shape):
  out, acc = [], 1
  for s in reversed(shape): out.append(acc); acc *= s
  return out[::-1]
def unflatten(flat, shape): return [(flat // st) % s if i else flat // st for i, (st, s) in enumerate(zip(strides(shape), shape))]
def flatten(idx, shape): return functools.reduce(operator.add, [i * st for i, st in zip(idx, strides(shape))])

def chain6d(api, tag, n_out=4):
  """Index math of a 6-D buffer seen through permute -> shrink -> reshape (merging dim pairs), read by a kernel whose
  output dims are flattened into one global index: nested // and % that must fold back to one term per dim."""
  outs = []
  for o in range(n_out):
    base = (2, 3, 4, 5, 6, 7)
    perm = [(5, 3, 1, 0, 2, 4), (1, 0, 3, 2, 5, 4), (2, 4, 0, 5, 1, 3), (4, 5, 2, 3, 0, 1)][o % 4]
    pshape = [base[p] for p in perm]
    off = [1 if s > 2 else 0 for s in pshape]
    sshape = [s - 2 * f for s, f in zip(pshape, off)]
    fshape = (sshape[0] * sshape[1], sshape[2] * sshape[3], sshape[4] * sshape[5])
    g = api.var(f"g{o}_{tag}", 0, fshape[0] * fshape[1] * fshape[2] - 1)
    idx_f = unflatten(g, fshape)
    idx_s = [x for f, i in zip(idx_f, range(3)) for x in (f // sshape[2 * i + 1], f % sshape[2 * i + 1])]
    idx_b = [None] * 6
    for d in range(6): idx_b[perm[d]] = idx_s[d] + off[d]
    outs.append(flatten(idx_b, base))
  return api.sink(*outs)

def mixed_radix(api, tag, n_out=2):
  """A 6-D permute -> shrink -> reshape to an unaligned shape -> permute -> reshape chain: mixed radix that can't fully fold."""
  outs = []
  for o in range(n_out):
    shape = (2, 3, 4, 5, 6, 7)
    perm = [(5, 3, 1, 0, 2, 4), (1, 0, 3, 2, 5, 4)][o % 2]
    pshape = [shape[p] for p in perm]
    r = [api.var(f"r{d}_{o}_{tag}", 0, pshape[d] - 2) for d in range(6)]
    orig = [None] * 6
    for d in range(6): orig[perm[d]] = r[d] + 1
    s2, p2 = (7, 6, 5, 4, 3, 2), (3, 1, 5, 0, 4, 2)
    idx2 = unflatten(flatten(orig, shape), s2)
    flat2 = flatten([idx2[p] for p in p2], [s2[p] for p in p2])
    outs += unflatten(flat2, (30, 168))
  return api.sink(*outs)

def long_sum(api, tag, n=400):
  """A long sum with repeated variables and constants (div/mod of long sums is left out: tinygrad takes minutes on it)."""
  vs = [api.var(f"v{i}_{tag}", 0, 9) for i in range(12)]
  s = vs[0]
  for i in range(1, n): s = s + vs[i % 12] * ((i % 5) + 1) + (i % 3)
  return api.sink(s, api.lt(s, 10), api.maximum(s, 3))

def conv_index(api, tag):
  """Input index of a padded strided 3x3 convolution unflattened back to (y, x), for every kernel tap."""
  oy, ox, c = api.var(f"oy_{tag}", 0, 15), api.var(f"ox_{tag}", 0, 15), api.var(f"c_{tag}", 0, 7)
  outs = []
  for ky in range(3):
    for kx in range(3):
      flat = (c * 34 + (oy * 2 + ky)) * 34 + (ox * 2 + kx)
      outs += [flat // 34 % 34, flat % 34, flat // (34 * 34), (flat + 35) // 34, api.lt(flat % 34, 33)]
  return api.sink(*outs)

WORKLOADS = {"chain6d": chain6d, "mixed_radix": mixed_radix, "long_sum": long_sum, "conv_index": conv_index}

# ---- engines
class TinycoreAPI:
  def __init__(self):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core"))
    from tinycore.uop import UOp, Ops
    from tinycore.dtype import dtypes
    from tinycore.rewrite import graph_rewrite
    from tinycore.symbolic import symbolic
    self.UOp, self.Ops, self.dtypes, self.rw, self.pm = UOp, Ops, dtypes, graph_rewrite, symbolic
  def var(self, n, lo, hi): return self.UOp.variable(n, lo, hi)
  def sink(self, *xs): return self.UOp(self.Ops.SINK, self.dtypes.void, xs)
  def lt(self, a, b): return a.lt(b)
  def maximum(self, a, b): return a.maximum(b)
  def rewrite(self, x): return self.rw(x, self.pm)
  def count(self, x): return len(x.toposort())

class TinygradAPI:
  def __init__(self):
    from tinygrad.uop.ops import UOp, graph_rewrite
    from tinygrad.uop.symbolic import symbolic
    self.UOp, self.rw, self.pm = UOp, graph_rewrite, symbolic
  def var(self, n, lo, hi): return self.UOp.variable(n, lo, hi)
  def sink(self, *xs): return self.UOp.sink(*xs)
  def lt(self, a, b): return a < b
  def maximum(self, a, b): return a.maximum(b)
  def rewrite(self, x): return self.rw(x, self.pm)
  def count(self, x): return len(x.toposort())

def measure(api, reps: int) -> dict:
  out = {}
  for name, fn in WORKLOADS.items():
    api.rewrite(fn(api, "warm"))
    times, nodes, result = [], 0, 0
    for r in range(reps):
      x = fn(api, f"t{r}")  # fresh variable names: no cached ranges or rewrites carry over between reps
      nodes = api.count(x)
      t0 = time.perf_counter(); y = api.rewrite(x); times.append(time.perf_counter() - t0)
      result = api.count(y)
    out[name] = {"nodes": nodes, "out_nodes": result, "s": statistics.median(times)}
  return out

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--quick", action="store_true", help="smoke mode: one rep of each workload")
  ap.add_argument("--reps", type=int, default=7)
  ap.add_argument("--engine", choices=["tinycore", "tinygrad"], default=None, help="(internal) measure one engine, print JSON")
  ap.add_argument("--tg-python", default=os.getenv("TINYGRAD_PYTHON", "/tmp/venv-tg/bin/python"), help="a python with tinygrad==0.14.0")
  a = ap.parse_args()
  reps = 1 if a.quick else a.reps
  if a.engine:
    print(json.dumps(measure(TinycoreAPI() if a.engine == "tinycore" else TinygradAPI(), reps))); return
  tc = measure(TinycoreAPI(), reps)
  tg, why = None, ""
  try:
    import tinygrad  # noqa: F401
    tg_cmd = [sys.executable]
  except ImportError: tg_cmd = [a.tg_python] if os.path.exists(a.tg_python) else None
  if tg_cmd:
    p = subprocess.run(tg_cmd + [os.path.abspath(__file__), "--engine", "tinygrad", "--reps", str(reps)], capture_output=True, text=True)
    if p.returncode == 0: tg = json.loads(p.stdout.strip().splitlines()[-1])
    else: why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
  else: why = "no tinygrad (pip install tinygrad==0.14.0 into a venv, pass --tg-python)"
  print(f"{'workload':<12} {'nodes':>7} {'tinycore nodes/s':>17} {'out':>5} {'tinygrad nodes/s':>17} {'out':>5} {'ratio tc/tg':>11}")
  for name, r in tc.items():
    line = f"{name:<12} {r['nodes']:>7} {r['nodes'] / r['s']:>17,.0f} {r['out_nodes']:>5}"
    if tg: g = tg[name]; line += f" {g['nodes'] / g['s']:>17,.0f} {g['out_nodes']:>5} {(r['nodes'] / r['s']) / (g['nodes'] / g['s']):>10.2f}x"
    print(line)
  if tg:
    tot_tc = sum(r["nodes"] for r in tc.values()) / sum(r["s"] for r in tc.values())
    tot_tg = sum(r["nodes"] for r in tg.values()) / sum(r["s"] for r in tg.values())
    print(f"{'total':<12} {'':>7} {tot_tc:>17,.0f} {'':>5} {tot_tg:>17,.0f} {'':>5} {tot_tc / tot_tg:>10.2f}x")
  else: print(f"tinygrad: skipped ({why})")

if __name__ == "__main__": main()
