"""A/B of TinyJit replay with and without the device graph (engine/jit_graph.py), interleaved in one process so both
sides see the same machine load: the tiny op of bench/run.py's small_ops row, the MLP train step of its mlp_train row,
and a decode step of the SmolLM2-135M-shaped model of bench/llm.py.

  .venv/bin/python bench/jit_graph_ab.py                       # all three
  .venv/bin/python bench/jit_graph_ab.py --only decode --kind Q8_0 --rounds 9

Each round times a block of calls per side (graph on, then off, the order alternating per round); the table gives the
median over rounds of the per-call time, and checks that both sides computed the same thing."""
from __future__ import annotations
import argparse, os, statistics, sys, tempfile, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

def _toggle(jits: list):
  """A function switching every jit's graph on or off: the built graph kept aside, False meaning 'none'."""
  built = []
  for j in jits:
    c = j.captured
    if (g := c._graphed()) is None: raise SystemExit(f"no device graph was built for {getattr(j, '__qualname__', j)} (JIT=2? DEBUG>=2?)")
    built.append((c, g))
  def use(on: bool):
    for c, g in built: c.__dict__["_graph"] = g if on else False
  return use

def _ab(name: str, call, use, calls: int, rounds: int, check) -> dict:
  times: dict[bool, list[float]] = {True: [], False: []}
  outs = {}
  for r in range(rounds):
    for on in ((True, False) if r % 2 == 0 else (False, True)):
      use(on)
      st = time.perf_counter()
      for _ in range(calls): out = call()
      times[on].append((time.perf_counter() - st) / calls)
      outs[on] = out
  use(True)
  check(outs[True], outs[False])
  on, off = statistics.median(times[True]), statistics.median(times[False])
  return {"workload": name, "graph_us": on * 1e6, "per_kernel_us": off * 1e6, "speedup": off / on}

def small_ops(T, rounds: int) -> dict:
  a = T.Tensor(np.arange(16, dtype=np.float32)).realize()
  f = T.TinyJit(lambda x: ((x + 1) * 2).sum())
  for _ in range(3): f(a)
  return _ab("small_ops (JIT replay)", lambda: f(a), _toggle([f]), 2000, rounds, lambda x, y: np.testing.assert_equal(x.numpy(), y.numpy()))

def mlp(T, rounds: int) -> dict:
  sys.path.insert(0, HERE)
  from workloads import _mlp_inputs, mlp_tensor_step
  x, oh, *ps = [T.Tensor(a) for a in _mlp_inputs(np.random.default_rng(0), False)]
  T.Tensor.realize(x, oh, *ps)
  f = T.TinyJit(mlp_tensor_step(T, ps))
  for _ in range(3): f(x, oh)
  # the step updates its weights, so the two sides' losses differ by the steps between them: compare finiteness only
  return _ab("mlp_train step", lambda: f(x, oh).numpy(), _toggle([f]), 10, rounds, lambda x, y: np.isfinite(x).all() and np.isfinite(y).all())

def decode(T, rounds: int, kind: str) -> dict:
  sys.path.insert(0, HERE)
  from llm import SHAPES
  from tinycore.llm.testmodel import tiny_llama
  from tinycore.llm.generate import LLM
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, f"{kind}.gguf")
    tiny_llama(path, qtype=kind, seed=0, ctx=4096, **SHAPES["smollm2-135m"])
    llm = LLM(path, max_context=512, chunk=32)
  for p in range(4): llm.decode(1, p)
  use = _toggle([llm._decode])
  kernels = len(llm._decode.jit_cache)
  pos = [8]
  def step():
    pos[0] = 8 + (pos[0] - 7) % 400   # a fresh position each call, inside the context
    return llm.decode(5, pos[0])
  use(True); ref_on = llm.decode(7, 300)
  use(False); ref_off = llm.decode(7, 300)
  np.testing.assert_array_equal(ref_on, ref_off)
  r = _ab(f"decode {kind} ({kernels} kernels/step)", step, use, 8, rounds, lambda x, y: None)
  r["tok_s_graph"], r["tok_s_per_kernel"] = 1e6 / r["graph_us"], 1e6 / r["per_kernel_us"]
  return r

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--only", default="small_ops,mlp,decode")
  ap.add_argument("--kind", default="Q4_0", help="decode weight format (default Q4_0)")
  ap.add_argument("--rounds", type=int, default=7)
  a = ap.parse_args(argv)
  import tinycore as T
  print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", file=sys.stderr)
  rows = []
  for w in a.only.split(","):
    rows.append(small_ops(T, a.rounds) if w == "small_ops" else mlp(T, a.rounds) if w == "mlp" else decode(T, a.rounds, a.kind))
    r = rows[-1]
    extra = f"  ({r['tok_s_graph']:.1f} vs {r['tok_s_per_kernel']:.1f} tok/s)" if "tok_s_graph" in r else ""
    print(f"{r['workload']:36s} graph {r['graph_us']:10.1f} us   per-kernel {r['per_kernel_us']:10.1f} us   x{r['speedup']:.2f}{extra}", flush=True)
  print(f"load average {os.getloadavg()[0]:.1f} after", file=sys.stderr)
  return 0

if __name__ == "__main__": sys.exit(main())
