"""The sanitizer lane (TINYCORE_SANITIZE): instrumented kernels really report. Each run is a subprocess started with the
sanitizer runtime preloaded, because ASan must be in the process before anything else."""
import os, subprocess, sys, textwrap
import pytest
from tinycore_cpu import sanitize
from tinycore_cpu.compiler_c import find_cc, CCompiler

CC = find_cc()

def _lane_env(names=("address", "undefined")) -> dict:
  if CC is None: pytest.skip("no C compiler on PATH")
  try: extra = sanitize.runtime_env(CC, names)
  except FileNotFoundError as e: pytest.skip(f"the sanitizer runtime is not installed: {e}")
  return {**os.environ, **extra}

def _run(code: str, env: dict) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=300)

# a hand-written kernel that reads one element past the end of `in` in its last iteration
OOB_C = """
from tinycore import Device
from tinycore_cpu.runtime import CPUProgram
d = Device["CPU"]
src = '''void oob_read(float* restrict out, const float* restrict in, const long long core_start, const long long core_end) {
  for (int i = core_start; i < core_end; i++) out[i] = in[i + 1]; }'''
prg = CPUProgram("oob_read", d.compiler.compile(src))
out, inp = d.allocator.alloc(40), d.allocator.alloc(40)   # 10 floats each
prg(out, inp, global_size=(10, 1, 1))
print("NO REPORT")
"""

def test_out_of_bounds_read_in_a_c_kernel_is_reported():
  p = _run(OOB_C, _lane_env())
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "ERROR: AddressSanitizer: heap-buffer-overflow" in p.stderr, p.stderr
  assert "READ of size 4" in p.stderr and " in oob_read " in p.stderr          # the access and the kernel it is in
  assert "0 bytes to the right of 40-byte region" in p.stderr or "0 bytes after 40-byte region" in p.stderr, p.stderr

def test_without_the_lane_the_same_overrun_goes_unnoticed():
  """Why the lane exists: the ordinary allocator pads blocks to 64 bytes, so this read lands in padding silently."""
  env = {k: v for k, v in os.environ.items() if k not in ("TINYCORE_SANITIZE", "LD_PRELOAD")}
  p = _run(OOB_C, env)
  assert p.returncode == 0 and "NO REPORT" in p.stdout, p.stdout + p.stderr

def test_planted_index_in_a_generated_kernel_is_reported():
  """A real kernel from the CPU pipeline (C renderer), its store index moved one element past the end."""
  code = """
  from tinycore import Device
  from tinycore.testing.planted import pipeline_program, plant_index
  d = Device["CPU"]
  n = 1000
  p = pipeline_program("CPU", n)
  prg = d.runtime(p.name, d.compiler.compile(d.renderer.render(p.name, plant_index(p.uops, 0, 1))))
  out, inp = d.allocator.alloc(4 * n), d.allocator.alloc(4 * n)
  print("kernel", p.name, flush=True)
  prg(out, inp, global_size=p.global_size, local_size=p.local_size)
  print("NO REPORT")
  """
  p = _run(code, _lane_env())
  name = p.stdout.split("kernel ", 1)[-1].split()[0] if "kernel " in p.stdout else "?"
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "ERROR: AddressSanitizer: heap-buffer-overflow" in p.stderr and "WRITE of size" in p.stderr, p.stderr
  assert f" in {name} " in p.stderr and "4000-byte region" in p.stderr, p.stderr

def test_undefined_behaviour_is_reported():
  """UBSan half of the lane: a signed overflow in a kernel stops the process with its report."""
  code = """
  import ctypes
  from tinycore import Device
  from tinycore_cpu.runtime import CPUProgram
  d = Device["CPU"]
  src = '''void twice(int* restrict out, const int* restrict in, const long long core_start, const long long core_end) {
    for (int i = core_start; i < core_end; i++) out[i] = in[i] * 2; }'''
  prg = CPUProgram("twice", d.compiler.compile(src))
  out, inp = d.allocator.alloc(4), d.allocator.alloc(4)
  ctypes.c_int.from_address(inp).value = 2**31 - 1
  prg(out, inp, global_size=(1, 1, 1))
  print("NO REPORT")
  """
  p = _run(code, _lane_env())
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
