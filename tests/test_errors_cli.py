"""Errors at the command lines other than tinyctl's (cli/tests has those): the LLM runner and the conformance kit give one
line naming the cause and the fix, with the traceback only on request."""
import os, subprocess, sys
import pytest

def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **env}, check=False)

def _tiny_model(tmp_path) -> str:
  path = str(tmp_path / "tiny.gguf")
  example = os.path.join(os.path.dirname(__file__), "..", "examples", "llm_random_model.py")
  r = _run(example, path, "--dim", "32", "--layers", "1", "--hidden", "64", "--heads", "2", "--kv-heads", "1", "--vocab", "300")
  if r.returncode != 0: pytest.skip(f"examples/llm_random_model.py can't write a model here: {r.stderr.strip()[-200:]}")
  return path

@pytest.mark.needs_device
def test_llm_runner_device_error_is_one_line(tmp_path):
  path = _tiny_model(tmp_path)
  r = _run("-m", "tinycore.llm", "-m", path, "--max-tokens", "2", DEV="NOSUCHDEV", DEBUG="")
  assert r.returncode == 1 and r.stderr.startswith("error: unknown device 'NOSUCHDEV'") and "Traceback" not in r.stderr, r.stderr
  r = _run("-m", "tinycore.llm", "-m", path, "--max-tokens", "2", "--debug", DEV="NOSUCHDEV", DEBUG="")
  assert r.returncode == 1 and "Traceback" in r.stderr and "UnknownDeviceError" in r.stderr

def test_llm_runner_help_explains_options():
  r = _run("-m", "tinycore.llm", "--help")
  assert r.returncode == 0
  text = " ".join(r.stdout.split())
  for s in ("(default: 64)", "(greedy)", "(default: 0.0)", "(default: 512)", "--debug", "Exit status"): assert s in text, s
  assert "(default: None)" not in text and "(default: False)" not in text

@pytest.mark.needs_device
@pytest.mark.parametrize("args,expect", [(["--device=CPU", "--compile-also=NULL+AMD:HIP::gfx1201"], "malformed DEV='NULL+AMD:HIP::gfx1201'"),
                                         (["--device=NOSUCHDEV"], "unknown device 'NOSUCHDEV'")])
def test_kit_bad_device_is_a_usage_error(args, expect):
  """The kit's --device/--compile-also mistakes end as pytest usage errors (exit 4) naming the problem, not INTERNALERROR."""
  r = _run("-m", "pytest", "-q", "--pyargs", "tinycore.testing", "-p", "no:cacheprovider", "-k", "test_tiny and not test_tiny", *args)
  out = r.stdout + r.stderr
  assert r.returncode == 4 and "INTERNALERROR" not in out and f"tinycore conformance kit: {expect}" in out, out[-2000:]

def test_kit_help_example_parses():
  """The DEV strings the kit's own --help shows are valid DEV syntax."""
  import re
  from tinycore.devspec import parse_target
  r = _run("-m", "pytest", "--help", "-p", "no:cacheprovider")
  help_text = " ".join(r.stdout.split())
  examples = re.findall(r"\b(NULL\+[A-Za-z0-9_:+.]+)", help_text)
  assert examples, "the --compile-also help shows no example"
  for ex in examples: parse_target(ex.rstrip(",)"))
