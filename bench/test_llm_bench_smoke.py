"""LLM bench smoke: `bench/llm.py --quick` builds the tiny model in three formats and runs it end to end (no timing asserted)."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
try:
  from tinycore import Device
  Device[Device.DEFAULT]
except Exception as e: pytest.skip(f"no tinycore device: {e}", allow_module_level=True)   # noqa: BLE001 (any failure to open one means: skip)

def test_llm_quick(tmp_path):
  out = tmp_path / "llm.json"
  p = subprocess.run([sys.executable, os.path.join(HERE, "llm.py"), "--quick", "--kinds", "Q8_0,Q4_K", "--no-torch", "--json", str(out)],
                     capture_output=True, text=True, timeout=900, check=False)
  assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
  doc = json.loads(out.read_text())
  for kind in ("Q8_0", "Q4_K"):
    r = doc["rows"][kind]
    assert not r.get("error"), r
    assert r["decode_tok_s"] > 0 and r["prefill_tok_s"] > 0 and r["ttft_cold_s"] > 0 and r["ttft_warm_s"] > 0 and r["rss_mib"] > 0, r
    assert 0 < r["bytes_per_token"] <= r["weight_bytes"], r
    # a 2-layer model's step: 4 matmuls and the attention per layer, and the head (none left over from outside the jit)
    assert 2 * 4 < r["kernels_per_step"] <= 2 * 12 + 8, r
    assert 0 < r["baseline_rss_mib"] < r["rss_mib"] and r["kv_cache_mib"] > 0, r
  assert "| Q4_K |" in p.stdout   # the table was printed
