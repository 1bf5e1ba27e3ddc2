"""ONNX bench smoke: `bench/onnx_vs_ort.py --quick` exports the tiny CNN and the GPT-2 KV-cache step, checks them against ONNX
Runtime and times both (no timing asserted; agreement is)."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
for mod in ("onnx", "onnxruntime", "torch", "transformers"):
  pytest.importorskip(mod, reason=f"bench/onnx_vs_ort.py needs {mod}")

@pytest.mark.needs_device
def test_onnx_bench_quick(tmp_path):
  out = tmp_path / "onnx.json"
  p = subprocess.run([sys.executable, os.path.join(HERE, "onnx_vs_ort.py"), "--quick", "--json", str(out)],
                     capture_output=True, text=True, timeout=900, check=False)
  assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
  rows = {r["model"]: r for r in json.loads(out.read_text())["rows"]}
  for name in ("tiny_cnn", "gpt2_kv"):
    r = rows[name]
    assert "error" not in r and "skipped" not in r, r
    assert r["max_abs"] < 1e-4 and r["jit_max_abs"] < 1e-4 and r["cosine"] > 0.99999, r
    assert r["tinycore_ms"] > 0 and r["ort_ms"] > 0, r
  d = rows["gpt2_kv_dynamic"]   # the symbolic-past decode: agreement, and no kernel compiled after the first length
  assert "error" not in d and "skipped" not in d and d["max_abs"] < 1e-4 and d["compiled_after_first"] == 0, d
  assert "| tiny_cnn |" in p.stdout
