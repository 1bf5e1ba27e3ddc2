"""`import tinycore` stays cheap: no numpy, no plugin, no pluggy; measured with -X importtime."""
import os, subprocess, sys

def test_import_is_light():
  code = ("import sys, tinycore; "
          "print(sorted(m for m in ('numpy', 'pluggy', 'tinycore.plugins', 'tinycore_cpu.plugin', 'importlib.metadata') if m in sys.modules))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
  assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr

def test_import_time_under_budget():
  out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import tinycore"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "0"})
  # lines: "import time: self [us] | cumulative | imported package"; the tinycore line's cumulative covers all it pulled in
  cum = [int(l.split("|")[1]) for l in out.stderr.splitlines() if l.rstrip().endswith("| tinycore")]
  assert cum and cum[-1] < 150_000, out.stderr[-2000:]

def test_lazy_names_resolve():
  import tinycore
  assert tinycore.Device.__class__.__name__ == "_Device" and tinycore.getenv("TINYCORE_NO_SUCH_VAR", 3) == 3
  assert tinycore.Context and tinycore.GlobalCounters and tinycore.dtypes.float32.itemsize == 4
