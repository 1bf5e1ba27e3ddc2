"""tinycore benchmark suite: the workloads of bench/workloads.py on tinycore and, when installed, numpy, torch and
tinygrad 0.14.0, each framework in its own subprocess, plus time to first result in a fresh process.

  .venv/bin/python bench/run.py                 # full sizes (a few minutes on 2 cores)
  .venv/bin/python bench/run.py --quick         # tiny sizes, seconds: a smoke test (CI asserts no timing)
  .venv/bin/python bench/run.py --json out.json --only matmul_1024,softmax --frameworks tinycore,numpy

tinygrad must not share a process (or a venv) with tinycore: it runs under its own interpreter, found at
$TINYGRAD_PYTHON or /tmp/venv-tg/bin/python (python -m venv /tmp/venv-tg && /tmp/venv-tg/bin/pip install
tinygrad==0.14.0 numpy; its CPU backend needs clang). numpy's subprocess runs with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE unset (set on some of these machines, they slow a current OpenBLAS)."""
from __future__ import annotations
import argparse, json, os, platform, shutil, signal, subprocess, sys, tempfile, threading, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from workloads import WORKLOADS, BY_NAME
from worker import STARTING
from tinycore import progress   # tinycore.helpers only: no device, no plugin, nothing of tinygrad's concern

FRAMEWORKS = ["tinycore", "numpy", "torch", "tinygrad"]
PEERS = ["numpy", "torch", "tinygrad"]

def tinygrad_python() -> str | None:
  p = os.getenv("TINYGRAD_PYTHON", "/tmp/venv-tg/bin/python")
  return p if os.path.exists(p) else None

def fw_cmd_env(fw: str) -> tuple[list[str], dict] | str:
  """The interpreter and environment for one framework's worker, or why it can't run."""
  env = dict(os.environ)
  if fw == "tinygrad":
    py = tinygrad_python()
    if py is None: return "no tinygrad interpreter (set TINYGRAD_PYTHON or make /tmp/venv-tg)"
    if shutil.which("clang") is None: return "tinygrad's CPU backend needs clang (apt-get install clang)"
    env.setdefault("DEV", "CPU")
    for k in ("PYTHONPATH",): env.pop(k, None)   # nothing of tinycore's may leak into tinygrad's process
    return [py], env
  if fw == "numpy": env.pop("OPENBLAS_CORETYPE", None); env.pop("OPENBLAS_L2_SIZE", None)
  if fw == "torch":
    try: import importlib.util; ok = importlib.util.find_spec("torch") is not None
    except Exception: ok = False
    if not ok: return "torch is not installed in this interpreter (.venv/bin/pip install torch==2.13.0)"
  return [sys.executable], env

def run_worker(fw: str, args, bar: progress.Bar) -> list[dict]:
  """One framework's worker over the selected workloads; `bar` advances as the worker announces each workload."""
  sel, base = _selected(args), bar.done
  ce = fw_cmd_env(fw)
  if isinstance(ce, str):
    bar.update(base + len(sel))
    return [{"workload": w.name, "framework": fw, "skipped": ce} for w in sel]
  cmd, env = ce
  cmd = cmd + [os.path.join(HERE, "worker.py"), fw, "--reps", str(args.reps), "--budget", str(args.budget)]
  if args.quick: cmd.append("--quick")
  if args.only: cmd += ["--only", args.only]
  if fw == "tinycore" and args.debug: env["DEBUG"] = str(args.debug)
  env["PROGRESS"] = "0"   # the worker's stderr is kept for its error message; this process draws the progress
  with tempfile.TemporaryFile("w+") as err:   # a file, not a pipe: a chatty stderr can't block the worker while we read stdout
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    killer = threading.Timer(args.timeout, p.kill)
    killer.start()
    lines, started = [], 0
    try:
      for line in p.stdout:
        if not line.startswith(STARTING): lines.append(line); continue
        bar.update(base + started, detail=f"{fw}: {line[len(STARTING):].strip()}")   # done: the workloads before this one
        started += 1
      p.wait()
    finally: killer.cancel()
    err.seek(0)
    stderr = err.read()
  bar.update(base + len(sel))
  out = "".join(lines)
  if fw == "tinycore" and args.debug: sys.stderr.write(out)
  try: return json.loads(out.strip().splitlines()[-1])
  except Exception:
    why = f"timed out after {args.timeout:g} s (--timeout)" if p.returncode == -signal.SIGKILL else \
          (stderr.strip().splitlines() or ["no output"])[-1][:300]
    return [{"workload": w.name, "framework": fw, "error": f"worker failed (exit {p.returncode}): {why}"} for w in sel]

def _selected(args): return [w for w in WORKLOADS if not args.only or w.name in args.only.split(",")]

# ---- time to first result in a fresh process: import, build a small graph, get a number back
FIRST = {
  "tinycore": "from tinycore import Tensor",
  "tinygrad": "from tinygrad import Tensor",
  "numpy": None, "torch": "import torch; Tensor = lambda a: torch.from_numpy(a)",
}
FIRST_BODY = """
import time, json; _st = time.perf_counter()
{imp}
import numpy as np
a = {mk}(np.arange(4096, dtype=np.float32).reshape(64, 64) / 4096); b = {mk}(np.ones((64, 64), np.float32))
r = float(((a @ b + 1) * 0.5).sum().{get}())
print(json.dumps({{"in_process_ms": (time.perf_counter() - _st) * 1e3, "value": r}}))
"""

def first_result(fw: str, cache: str) -> dict:
  ce = fw_cmd_env(fw)
  if isinstance(ce, str): return {"skipped": ce}
  cmd, env = ce
  imp = FIRST[fw] or "pass"
  src = FIRST_BODY.format(imp=imp, mk="np.asarray" if fw == "numpy" else "Tensor", get="item" if fw != "numpy" else "__float__")
  if fw == "tinycore": env["CACHEDB"] = cache           # a directory: the compiled-kernel cache
  if fw == "tinygrad": env["CACHEDB"] = cache + ".db"   # a sqlite file
  st = time.perf_counter()
  p = subprocess.run(cmd + ["-c", src], env=env, capture_output=True, text=True, timeout=300)
  wall = (time.perf_counter() - st) * 1e3
  if p.returncode != 0: return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
  out = json.loads(p.stdout.strip().splitlines()[-1])
  return {"wall_ms": wall, "in_process_ms": out["in_process_ms"], "value": out["value"]}

def first_results(fws: list[str], bar: progress.Bar) -> dict:
  res: dict[str, dict] = {}
  with tempfile.TemporaryDirectory() as d:
    for fw in fws:
      cache = os.path.join(d, fw)
      for kind in ("cold", "warm") if fw in ("tinycore", "tinygrad") else ("warm",):
        bar.update(bar.done, detail=f"{fw}: fresh process to first result ({kind} cache)")
        res.setdefault(fw, {})[kind] = first_result(fw, cache)
        bar.advance()
  return res

def _first_runs(fws: list[str]) -> int: return sum(2 if fw in ("tinycore", "tinygrad") else 1 for fw in fws)

# ---- report
def _rate(r: dict) -> str:
  if "ms" not in r: return ""
  s = r["ms"] / 1e3
  if r.get("bytes") and not r.get("flops", 0) > 8 * r["bytes"]: return f"{r['bytes'] / s / 1e9:.1f} GB/s"
  if r.get("flops"): return f"{r['flops'] / s / 1e9:.1f} GFLOP/s"
  return ""

def _cell(r: dict | None) -> str:
  if r is None: return "-"
  if "skipped" in r: return "skip"
  if "error" in r: return "ERROR"
  bad = "" if r.get("ok", True) else " WRONG"
  ms = r["ms"]
  t = f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.2f} ms" if ms < 100 else f"{ms:.0f} ms"
  rate = _rate(r)
  return f"{t}" + (f" ({rate})" if rate else "") + bad

def table(results: list[dict], fws: list[str], firsts: dict) -> str:
  by = {(r["workload"], r["framework"]): r for r in results}
  peers = [p for p in PEERS if p in fws]
  hdr = ["workload"] + fws + [f"tc/{p}" for p in peers if "tinycore" in fws]
  rows = []
  for w in WORKLOADS:
    rs = [by.get((w.name, fw)) for fw in fws]
    if all(r is None for r in rs): continue
    desc = next((r["desc"] for r in rs if r and "desc" in r), w.name)
    if any(r and r.get("quick") for r in rs): desc = f"{w.name}: {desc}"   # quick sizes collide (both matmuls are 64^3)
    row = [desc] + [_cell(r) for r in rs]
    tc = by.get((w.name, "tinycore"))
    if "tinycore" in fws:
      for p in peers:
        pr = by.get((w.name, p))
        row.append(f"{pr['ms'] / tc['ms']:.2f}x" if tc and pr and "ms" in tc and "ms" in pr else "-")
    rows.append(row)
  for kind in ("cold", "warm"):
    row = [f"fresh process to first result ({kind} kernel cache)"]
    vals = {}
    for fw in fws:
      f = firsts.get(fw, {}).get(kind)
      if f is None: row.append("-"); continue
      if "wall_ms" in f: vals[fw] = f["wall_ms"]; row.append(f"{f['wall_ms']:.0f} ms (in-process {f['in_process_ms']:.0f})")
      else: row.append("skip" if "skipped" in f else "ERROR")
    if "tinycore" in fws:
      row += [f"{vals[p] / vals['tinycore']:.2f}x" if p in vals and "tinycore" in vals else "-" for p in peers]
    if firsts: rows.append(row)
  widths = [max(len(str(r[i])) for r in [hdr] + rows) for i in range(len(hdr))]
  line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"
  out = [line(hdr), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]
  notes = []
  for r in results:
    if "skipped" in r and r["framework"] == "tinycore": notes.append(f"- {r['workload']} on tinycore skipped: {r['skipped']}")
    if "error" in r: notes.append(f"- {r['workload']} on {r['framework']} failed: {r['error']}")
    if r.get("ok") is False: notes.append(f"- {r['workload']} on {r['framework']}: result differs from numpy (max rel err {r['max_rel_err']:.3g})")
  skipped_fws = {r["framework"]: r["skipped"] for r in results if "skipped" in r and r["framework"] != "tinycore"}
  notes += [f"- {fw} skipped: {why}" for fw, why in skipped_fws.items()]
  return "\n".join(out + ["", "tc/peer = peer time / tinycore time (>1: tinycore is faster). Medians of the timed runs after warm-up;",
                          "tinycore and tinygrad run under TinyJit (times are replays)."] + ([""] + notes if notes else []))

def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test that runs in seconds")
  ap.add_argument("--json", nargs="?", const="-", default=None, help="write results as JSON to a file ('-': stdout, no table)")
  ap.add_argument("--only", default="", help="comma-separated workloads: " + ",".join(BY_NAME))
  ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--budget", type=float, default=4.0, help="seconds of timed repetitions per workload and framework")
  ap.add_argument("--timeout", type=float, default=1800)
  ap.add_argument("--no-first", action="store_true", help="skip the fresh-process time-to-first-result runs")
  ap.add_argument("--debug", type=int, default=0, help="DEBUG level for the tinycore worker (2: per-kernel timings on stderr)")
  args = ap.parse_args(argv)
  for s in [s for s in args.only.split(",") if s]:
    if s not in BY_NAME: ap.error(f"unknown workload {s!r}; known: {', '.join(BY_NAME)}")
  fws = [f for f in args.frameworks.split(",") if f]
  for f in fws:
    if f not in FRAMEWORKS: ap.error(f"unknown framework {f!r}; known: {', '.join(FRAMEWORKS)}")
  load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
  st = time.perf_counter()
  # progress (stderr, on a terminal or with PROGRESS=1): one step per workload and framework, then per first-result run
  with progress.Bar("bench", total=len(fws) * len(_selected(args)) + (0 if args.no_first else _first_runs(fws))) as bar:
    results = [r for fw in fws for r in run_worker(fw, args, bar)]
    firsts = {} if args.no_first else first_results(fws, bar)
  meta = {"quick": args.quick, "machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
          "loadavg_at_start": load0, "loadavg_at_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
          "seconds": time.perf_counter() - st}
  doc = {"meta": meta, "results": results, "first_result": firsts}
  if args.json == "-": print(json.dumps(doc, indent=1)); return doc
  if args.json:
    with open(args.json, "w") as f: json.dump(doc, f, indent=1)
  print(table(results, fws, firsts))
  print(f"\n{meta['cpus']} CPUs, load average {load0:.2f} at start, {meta['loadavg_at_end']:.2f} at end; {meta['seconds']:.0f} s"
        if load0 is not None else "")
  return doc

if __name__ == "__main__": main()
