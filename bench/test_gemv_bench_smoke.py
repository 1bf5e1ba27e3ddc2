"""bench/gemv.py smoke: tiny shapes end to end on tinycore and numpy, both layouts (each worker checks its result
against float64 numpy before timing; no timing is asserted)."""
import os, subprocess, sys
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
try:
  from tinycore import Device
  Device[Device.DEFAULT]
except Exception as e: pytest.skip(f"no tinycore device: {e}", allow_module_level=True)

def test_gemv_bench_runs():
  p = subprocess.run([sys.executable, os.path.join(HERE, "gemv.py"), "--only", "1x96x80,3x65x33", "--rounds", "1", "--reps", "2",
                      "--frameworks", "tinycore,numpy"], capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-3000:]
  rows = [ln for ln in p.stdout.splitlines() if " @ " in ln]
  assert len(rows) == 4 and all(ln.split()[3] in ("xw", "wx") for ln in rows), p.stdout
