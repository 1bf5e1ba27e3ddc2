"""bench smoke: `bench/beam_vs_heuristic.py --quick` searches every workload's kernels, checks BEAM's result against the
heuristic's and prints the table (timings are not asserted: tiny kernels on a shared machine)."""
import os, subprocess, sys
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
try:
  from tinycore import Device
  Device[Device.DEFAULT]
except Exception as e: pytest.skip(f"no tinycore device: {e}", allow_module_level=True)

@pytest.mark.needs_device
def test_beam_vs_heuristic_quick(tmp_path):
  # a private cache: the search really runs (nothing cached from another run) and leaves nothing behind
  env = {**os.environ, "CACHEDB": str(tmp_path / "cache"), "PROGRESS": "0"}
  p = subprocess.run([sys.executable, os.path.join(HERE, "beam_vs_heuristic.py"), "--quick", "--budget", "1", "--reps", "1"],
                     capture_output=True, text=True, timeout=600, env=env)
  assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
  for w in ("matmul_64", "matmul_128", "matmul_T_64", "matmul_T_128", "matmul_37", "conv", "attention"):
    assert f"{w}: BEAM=2 result matches the heuristic's" in p.stdout, p.stdout[-2000:]
  table = p.stdout.split("beam/heur", 1)[1]
  assert "r_64_64" in table and "heuristic ms" in table
  assert os.path.isdir(tmp_path / "cache" / "beam"), "BEAM's winners were not cached"
