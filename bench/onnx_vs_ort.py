"""ONNX models on tinycore vs ONNX Runtime: agreement (max abs diff, cosine) and latency side by side.

  .venv/bin/python bench/onnx_vs_ort.py                       # every model in bench/onnx_models.py
  .venv/bin/python bench/onnx_vs_ort.py --quick               # the tiny CNN and the GPT-2 KV-cache step only (smoke, seconds)
  .venv/bin/python bench/onnx_vs_ort.py --models resnet18,minilm --reps 20 --json out.json

tinycore runs each model under TinyJit (two calls to capture, then replays); both runtimes get warm-up calls and return
outputs in host memory. `ratio` = tinycore median / ORT median (below 1: tinycore is faster). A model whose export
needs a missing package (torchvision, transformers) is listed with the reason instead of a row."""
from __future__ import annotations
import argparse, json, os, statistics, sys, tempfile, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

def _load_builders():
  import importlib.util
  spec = importlib.util.spec_from_file_location("onnx_models", os.path.join(HERE, "onnx_models.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod

onnx_models = _load_builders()

QUICK = ["tiny_cnn", "gpt2_kv", "gpt2_kv_dynamic"]

def agreement(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float]:
  g = np.concatenate([x.astype(np.float64).reshape(-1) for x in got])
  w = np.concatenate([x.astype(np.float64).reshape(-1) for x in want])
  cos = float(g @ w / (np.linalg.norm(g) * np.linalg.norm(w))) if np.linalg.norm(g) and np.linalg.norm(w) else float(np.array_equal(g, w))
  return float(np.abs(g - w).max()), cos

def _time(fn, reps: int, budget_s: float) -> list[float]:
  times, t_end = [], time.perf_counter() + budget_s
  for _ in range(reps):
    t0 = time.perf_counter(); fn(); times.append(time.perf_counter() - t0)
    if time.perf_counter() > t_end and len(times) >= 3: break
  return times

def bench_model(name: str, workdir: str, reps: int, budget_s: float) -> dict:
  import onnxruntime as ort
  from tinycore import Tensor, TinyJit
  from tinycore.onnx import OnnxRunner
  try: path, feeds = onnx_models.MODELS[name](workdir)
  except ImportError as e: return {"model": name, "skipped": f"needs {e.name or e}"}
  sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
  want = sess.run(None, feeds)
  t0 = time.perf_counter()
  runner = OnnxRunner(path)
  load_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  got = [v.numpy() for v in runner(feeds).values()]
  first_s = time.perf_counter() - t0
  max_abs, cos = agreement(got, want)
  jit = TinyJit(lambda **kw: [v.realize() for v in runner(kw).values()])
  tfeeds = {k: Tensor(v, device=runner.device) for k, v in feeds.items()}
  tc_run = lambda: [o.numpy() for o in jit(**{k: v.clone().realize() for k, v in tfeeds.items()})]
  for _ in range(3): jit_out = tc_run()
  jit_abs, _ = agreement(jit_out, want)
  for _ in range(2): sess.run(None, feeds)
  tc = _time(tc_run, reps, budget_s)
  ort_t = _time(lambda: sess.run(None, feeds), reps, budget_s)
  tc_ms, ort_ms = statistics.median(tc) * 1e3, statistics.median(ort_t) * 1e3
  return {"model": name, "max_abs": max_abs, "cosine": cos, "jit_max_abs": jit_abs, "tinycore_ms": tc_ms, "ort_ms": ort_ms,
          "ratio": tc_ms / ort_ms, "load_s": load_s, "first_run_s": first_s, "reps": len(tc)}

def bench_gpt2_dynamic(workdir: str, reps: int) -> dict:
  """The GPT-2 KV-cache step with `past` bound as a symbolic Variable (dynamic_axes, jit=True): a decode over growing past
  lengths, each step a replay of one capture. Reports kernels compiled after the first length and the per-step ratio."""
  import onnxruntime as ort
  import tinycore.engine.run as runmod
  from tinycore.onnx import OnnxRunner
  try: path, feeds = onnx_models.gpt2_kv(workdir)
  except ImportError as e: return {"model": "gpt2_kv_dynamic", "skipped": f"needs {e.name or e}"}
  sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
  runner = OnnxRunner(path, dynamic_axes={"past": 128}, jit=True)
  rng = np.random.default_rng(0)
  steps = [{"input_ids": feeds["input_ids"], "past_k": rng.standard_normal((2, 1, 4, p, 16)).astype(np.float32),
            "past_v": rng.standard_normal((2, 1, 4, p, 16)).astype(np.float32)} for p in range(4, 4 + max(reps, 6))]
  t0 = time.perf_counter()
  got = [v.numpy() for v in runner(steps[0]).values()]
  first_s = time.perf_counter() - t0
  max_abs, cos = agreement(got, sess.run(None, steps[0]))
  n0 = len(runmod._runners)
  tc, worst = [], 0.0
  for f in steps[1:]:
    t0 = time.perf_counter(); out = [v.numpy() for v in runner(f).values()]; tc.append(time.perf_counter() - t0)
    worst = max(worst, agreement(out, sess.run(None, f))[0])
  ort_t = _time(lambda: sess.run(None, steps[-1]), reps, 5.0)
  tc_ms, ort_ms = statistics.median(tc) * 1e3, statistics.median(ort_t) * 1e3
  return {"model": "gpt2_kv_dynamic", "max_abs": max(max_abs, worst), "cosine": cos, "tinycore_ms": tc_ms, "ort_ms": ort_ms,
          "ratio": tc_ms / ort_ms, "first_run_s": first_s, "reps": len(tc), "compiled_after_first": len(runmod._runners) - n0}

def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--models", default=",".join([*onnx_models.MODELS, "gpt2_kv_dynamic"]))
  p.add_argument("--quick", action="store_true")
  p.add_argument("--reps", type=int, default=20)
  p.add_argument("--budget", type=float, default=20.0, help="seconds of timed runs per model and runtime")
  p.add_argument("--json", default=None)
  a = p.parse_args(argv)
  names = QUICK if a.quick else [m for m in a.models.split(",") if m]
  unknown = [m for m in names if m not in onnx_models.MODELS and m != "gpt2_kv_dynamic"]
  if unknown: p.error(f"unknown model(s) {unknown}; known: {[*onnx_models.MODELS, 'gpt2_kv_dynamic']}")
  rows = []
  with tempfile.TemporaryDirectory() as d:
    for n in names:
      try:
        if n == "gpt2_kv_dynamic": rows.append(bench_gpt2_dynamic(d, 3 if a.quick else a.reps))
        else: rows.append(bench_model(n, d, 3 if a.quick else a.reps, 2.0 if a.quick else a.budget))
      except Exception as e: rows.append({"model": n, "error": f"{type(e).__name__}: {e}"})   # noqa: BLE001 (reported in the table)
      print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
  print(f"load average {os.getloadavg()[0]:.1f} (a shared machine skews the times)")
  print("| model | max abs diff | cosine | tinycore ms | ORT ms | ratio tc/ORT | first run s |")
  print("|---|---|---|---|---|---|---|")
  for r in rows:
    if "skipped" in r or "error" in r: print(f"| {r['model']} | {r.get('skipped') or 'ERROR ' + r['error']} |||||"); continue
    print(f"| {r['model']} | {r['max_abs']:.2e} | {r['cosine']:.6f} | {r['tinycore_ms']:.2f} | {r['ort_ms']:.2f} | {r['ratio']:.2f} "
          f"| {r['first_run_s']:.1f} |")
  if a.json:
    tmp = a.json + ".tmp"
    with open(tmp, "w") as f: json.dump({"rows": rows}, f, indent=1)
    os.replace(tmp, a.json)
  return 1 if any("error" in r for r in rows) else 0

if __name__ == "__main__": sys.exit(main())
