"""The sanitizer lane (TINYCORE_SANITIZE): instrumented kernels really report. Each run is a subprocess started with the
sanitizer runtime preloaded, because ASan must be in the process before anything else."""
import os
import pytest
from tinycore_cpu import sanitize
from tinycore_cpu.compiler_c import find_cc, CCompiler
from _cpu_memcheck import hand_kernel, kernel_name, planted_kernel, run_program

CC = find_cc()

def _lane_env(names=("address", "undefined")) -> dict:
  if CC is None: pytest.skip("no C compiler on PATH")
  try: extra = sanitize.runtime_env(CC, names)
  except FileNotFoundError as e: pytest.skip(f"the sanitizer runtime is not installed: {e}")
  return {**os.environ, **extra}

# a hand-written kernel that reads one element past the end of `in` (10 floats, 40 bytes) in its last iteration
OOB_C = hand_kernel("oob_read", "out[i] = in[i + 1];")

def test_out_of_bounds_read_in_a_c_kernel_is_reported():
  p = run_program(OOB_C, _lane_env())
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "ERROR: AddressSanitizer: heap-buffer-overflow" in p.stderr, p.stderr
  assert "READ of size 4" in p.stderr and " in oob_read " in p.stderr          # the access and the kernel it is in
  assert "0 bytes to the right of 40-byte region" in p.stderr or "0 bytes after 40-byte region" in p.stderr, p.stderr

def test_without_the_lane_the_same_overrun_goes_unnoticed():
  """Why the lane exists: the ordinary allocator pads blocks to 64 bytes, so this read lands in padding silently."""
  env = {k: v for k, v in os.environ.items() if k not in ("TINYCORE_SANITIZE", "LD_PRELOAD")}
  p = run_program(OOB_C, env)
  assert p.returncode == 0 and "NO REPORT" in p.stdout, p.stdout + p.stderr

def test_planted_index_in_a_generated_kernel_is_reported():
  """A real kernel from the CPU pipeline (C renderer), its store index moved one element past the end."""
  p = run_program(planted_kernel("CPU", 1), _lane_env())
  name = kernel_name(p)
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "ERROR: AddressSanitizer: heap-buffer-overflow" in p.stderr and "WRITE of size" in p.stderr, p.stderr
  assert f" in {name} " in p.stderr and "4000-byte region" in p.stderr, p.stderr

def test_undefined_behaviour_is_reported():
  """UBSan half of the lane: a signed overflow in a kernel stops the process with its report."""
  code = hand_kernel("twice", "out[i] = in[i] * 2;", "int", n=1, setup="ctypes.c_int.from_address(inp).value = 2**31 - 1")
  p = run_program(code, _lane_env())
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "runtime error: signed integer overflow" in p.stderr, p.stderr

def test_sanitizer_flags_are_in_the_cache_key(monkeypatch):
  if CC is None: pytest.skip("no C compiler on PATH")
  monkeypatch.delenv("TINYCORE_SANITIZE", raising=False)
  plain = CCompiler(CC)
  monkeypatch.setenv("TINYCORE_SANITIZE", "undefined")   # UBSan alone needs no preloaded runtime
  ub = CCompiler(CC)
  assert "-fsanitize=undefined" in ub.cachekey and "-fsanitize" not in plain.cachekey and ub.cachekey != plain.cachekey

def test_bad_settings_say_what_to_do(monkeypatch):
  if CC is None: pytest.skip("no C compiler on PATH")
  monkeypatch.setenv("TINYCORE_SANITIZE", "address,thread")
  with pytest.raises(ValueError, match=r"unknown sanitizer thread \(supported: address, undefined\)"): CCompiler(CC)
  if not sanitize.asan_loaded():   # this test process has no ASan runtime: refusing beats a dlopen failure later
    monkeypatch.setenv("TINYCORE_SANITIZE", "address")
    with pytest.raises(RuntimeError, match=r"(?s)no ASan runtime.*LD_PRELOAD=.*asan"): CCompiler(CC)
