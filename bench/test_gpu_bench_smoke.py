"""bench/gpu.py smoke: without an NVIDIA GPU it says so and exits 0; with one, one small cell runs and the table prints."""
import os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu  # noqa: E402

def _run(*args):
  return subprocess.run([sys.executable, os.path.join(HERE, "gpu.py"), *args], capture_output=True, text=True, timeout=600)

def test_lists_every_workload_of_the_issue():
  p = _run("--list")
  assert p.returncode == 0, p.stderr
  names = p.stdout.split()
  for n in ("mm_fp32_4096", "mm_tf32_4096", "mm_fp16_8192", "mm_bf16_8192", "attention_b8h16s2048d128_causal", "llm_decode_step_7b_layer",
            "mm_fp32_bias_relu_half_4096", "conv_32x256x56x56_k3_fp32"):
    assert n in names
  assert any(n.startswith("conv_") for n in names)

def test_runs_or_says_why_not():
  why = gpu.why_no_gpu("NV")
  if why is not None:
    p = _run()
    assert p.returncode == 0, p.stderr[-2000:]
    assert "no NVIDIA GPU here, nothing measured" in p.stdout and why.split(":")[0] in p.stdout
  else:
    p = _run("--only", "mm_fp16_4096", "--beam", "0", "--reps", "3", "--budget", "1")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "tc/torch" in p.stdout and "mm_fp16_4096" in p.stdout and "error" not in p.stdout, p.stdout
