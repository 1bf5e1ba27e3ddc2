"""DEBUG_BUFFERS=1: guard pages and canaries around host buffers (tinycore_cpu/guarded.py). Each planted overrun runs
in a subprocess, since a guard-page hit ends the process (after naming the kernel and the buffer)."""
import importlib.util, mmap, os
import pytest
from tinycore_cpu.compiler_c import find_cc
from _cpu_memcheck import hand_kernel, kernel_name, planted_kernel, run_program

pytestmark = pytest.mark.skipif(find_cc() is None, reason="the hand-written kernels need a C compiler")

def _run(code: str):
  env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TINYCORE_SANITIZE")}
  return run_program(code, {**env, "DEBUG_BUFFERS": "1"}, faulthandler=True)

def _kernel(body: str, ctype="float", n=10) -> str: return hand_kernel("k", body, ctype, n)   # 40 bytes each for 10 floats

def test_write_past_the_end_hits_the_guard_page():
  p = _run(_kernel("out[i + 1] = in[i];"))
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "DEBUG_BUFFERS: kernel k wrote outside buffer argument 0 (40 bytes): at byte offset 40 (guard page)" in p.stderr, p.stderr
  assert "Segmentation fault" in p.stderr and "in __call__" in p.stderr   # then faulthandler's Python stack

def test_read_past_the_end_hits_the_guard_page():
  p = _run(_kernel("out[i] = in[i + 3];"))
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "DEBUG_BUFFERS: kernel k read outside buffer argument 1 (40 bytes): at byte offset 40 (guard page)" in p.stderr, p.stderr

def test_far_underrun_hits_the_front_guard_page():
  """Past the 64 canary bytes and the rest of the buffer's page: the guard page in front of it."""
  back = mmap.PAGESIZE + 304   # bytes; the 40-byte buffer ends its page, so this is inside the page before
  p = _run(_kernel(f"out[i - {back // 4}] = in[i];"))
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert f"DEBUG_BUFFERS: kernel k wrote outside buffer argument 0 (40 bytes): at byte offset -{back} (guard page)" in p.stderr, p.stderr

def test_write_just_before_the_start_is_caught_by_the_canary():
  p = _run(_kernel("out[i - 1] = in[i];"))
  assert p.returncode == 1 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  want = "BufferOverrun: DEBUG_BUFFERS: kernel k wrote outside buffer argument 0 (40 bytes): at byte offset -4 (canary overwritten)"
  assert want in p.stderr, p.stderr

def test_write_into_the_alignment_slack_is_caught_by_the_canary():
  """5 half-precision elements = 10 bytes: the buffer starts 8-aligned, so 6 bytes of slack lie before the guard page."""
  p = _run(_kernel("out[i + 1] = in[i];", "unsigned short", n=5))
  assert p.returncode == 1 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "kernel k wrote outside buffer argument 0 (10 bytes): at byte offset 10 (canary overwritten)" in p.stderr, p.stderr

@pytest.mark.parametrize("renderer", ["C", "LLVM"])
def test_planted_index_in_a_generated_kernel(renderer):
  """A kernel from the real pipeline (either CPU renderer), its store index moved 1024 elements on: it lands in the
  guard page behind the 4000-byte output."""
  if renderer == "LLVM" and importlib.util.find_spec("llvmlite") is None: pytest.skip("llvmlite is not installed")
  p = _run(planted_kernel(f"CPU:{renderer}", 1024))
  name = kernel_name(p)
  assert p.returncode != 0 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert f"DEBUG_BUFFERS: kernel {name} wrote outside buffer argument 0 (4000 bytes): at byte offset 4096 (guard page)" in p.stderr, p.stderr

def test_correct_programs_run_unchanged():
  """No false alarms: ordinary work (views, reductions, matmul, half, many buffers freed and reused) gives numpy's answers."""
  code = """
  import numpy as np
  from tinycore import Tensor
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((33, 17)).astype(np.float32), rng.standard_normal((17, 9)).astype(np.float32)
  ta, tb = Tensor(a, device="CPU"), Tensor(b, device="CPU")
  np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta[3:20:2, 1:].sum(0).numpy(), a[3:20:2, 1:].sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta.cast("float16").exp().float().numpy(), np.exp(a.astype(np.float16)).astype(np.float32), rtol=2e-3)
  for i in range(50): np.testing.assert_allclose((Tensor(a, device="CPU") * i).max(1).numpy(), (a * i).max(1), rtol=1e-6)
  print("OK")
  """
  p = _run(code)
  assert p.returncode == 0 and "OK" in p.stdout, p.stdout + p.stderr
