"""bench smoke: `bench/run.py --quick` runs every workload end to end on tinycore and numpy (no timing is asserted)."""
import json, os, subprocess, sys
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
try:
  from tinycore import Device
  Device[Device.DEFAULT]
except Exception as e: pytest.skip(f"no tinycore device: {e}", allow_module_level=True)

def test_quick_suite(tmp_path):
  out = tmp_path / "bench.json"
  # PROGRESS=1: the bar goes to stderr even though it is a pipe here, delay 1 s (this run takes seconds); stdout keeps the table
  p = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--quick", "--frameworks", "tinycore,numpy", "--reps", "2",
                      "--json", str(out)], capture_output=True, text=True, timeout=300, env={**os.environ, "PROGRESS": "1"})
  assert p.returncode == 0, p.stderr[-3000:]
  assert "tc/numpy" in p.stdout   # the table was printed
  assert "bench " not in p.stdout and "#bench" not in p.stdout
  bars = [ln for ln in p.stderr.splitlines() if ln.startswith("bench ")]
  n = len(json.loads(out.read_text())["results"]) + 3   # every (workload, framework), then 3 first-result runs
  assert bars and bars[-1].startswith(f"bench {n}/{n}") and bars[-1].endswith("done"), p.stderr[-2000:]
  doc = json.loads(out.read_text())
  res = {(r["workload"], r["framework"]): r for r in doc["results"]}
  for (w, fw), r in res.items():
    assert "worker failed" not in r.get("error", ""), r
    if fw == "numpy": assert r.get("ok"), r
  for w in ("matmul_1024", "fused_ew", "softmax", "layernorm", "gemv_decode", "small_ops"):
    assert res[(w, "tinycore")].get("ok"), res[(w, "tinycore")]
  assert doc["first_result"]["tinycore"]["warm"].get("wall_ms", 0) > 0, doc["first_result"]

def test_worker_past_its_timeout_is_reported_not_fatal():
  p = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--quick", "--frameworks", "tinycore", "--only", "softmax",
                      "--timeout", "0.01", "--no-first", "--json", "-"], capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr[-3000:]
  (r,) = json.loads(p.stdout)["results"]
  assert r["error"].endswith("timed out after 0.01 s (--timeout)"), r

def test_mlp_kernels_table():
  # bench/mlp_kernels.py at the tiny sizes: one row per kernel of the captured train step, and the totals line
  p = subprocess.run([sys.executable, os.path.join(HERE, "mlp_kernels.py"), "2", "--quick"], capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-3000:]
  lines = p.stdout.splitlines()
  n = int(lines[-1].split()[0])
  assert lines[0].startswith("kernel") and len(lines) == n + 2 and n >= 10, p.stdout
  assert all(float(ln.split()[1]) > 0 for ln in lines[1:-1]), p.stdout
