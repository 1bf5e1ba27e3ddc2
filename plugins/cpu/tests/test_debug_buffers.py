"""DEBUG_BUFFERS=1: guard pages and canaries around host buffers (tinycore_cpu/guarded.py). Each planted overrun runs
in a subprocess, since a guard-page hit ends the process (after naming the kernel and the buffer)."""
import importlib.util, mmap, os, subprocess, sys, textwrap
import pytest
from tinycore_cpu.compiler_c import find_cc

pytestmark = pytest.mark.skipif(find_cc() is None, reason="the hand-written kernels need a C compiler")

def _run(code: str) -> subprocess.CompletedProcess:
  env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TINYCORE_SANITIZE")}
  env["DEBUG_BUFFERS"] = "1"
  return subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=300)

def _kernel(body: str, ctype="float") -> str:
  """A program calling a hand-written C kernel `k(out, in)` over 10 elements of `ctype` (40 bytes for float)."""
  return f"""
  import ctypes
  from tinycore import Device
  from tinycore_cpu.runtime import CPUProgram
  d = Device["CPU"]
  src = '''void k({ctype}* restrict out, const {ctype}* restrict in, const long long core_start, const long long core_end) {{
    for (int i = core_start; i < core_end; i++) {{ {body} }} }}'''
  prg = CPUProgram("k", d.compiler.compile(src))
  n = 10 * ctypes.sizeof(ctypes.c_{ctype if ctype != 'unsigned short' else 'ushort'})
  out, inp = d.allocator.alloc(n), d.allocator.alloc(n)
  prg(out, inp, global_size=(10, 1, 1))
  print("NO REPORT")
  """

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
  code = _kernel("out[i + 1] = in[i];", "unsigned short").replace("n = 10 *", "n = 5 *").replace("global_size=(10,", "global_size=(5,")
  p = _run(code)
  assert p.returncode == 1 and "NO REPORT" not in p.stdout, p.stdout + p.stderr
  assert "kernel k wrote outside buffer argument 0 (10 bytes): at byte offset 10 (canary overwritten)" in p.stderr, p.stderr

@pytest.mark.parametrize("renderer", ["C", "LLVM"])
def test_planted_index_in_a_generated_kernel(renderer):
  """A kernel from the real pipeline (either CPU renderer), its store index moved 1024 elements on: it lands in the
  guard page behind the 4000-byte output."""
  if renderer == "LLVM" and importlib.util.find_spec("llvmlite") is None: pytest.skip("llvmlite is not installed")
  code = f"""
  from tinycore import Device
  from tinycore.testing.planted import pipeline_program, plant_index
  d = Device["CPU:{renderer}"]
  n = 1000
  p = pipeline_program("CPU:{renderer}", n)
  prg = d.runtime(p.name, d.compiler.compile(d.renderer.render(p.name, plant_index(p.uops, 0, 1024))))
  out, inp = d.allocator.alloc(4 * n), d.allocator.alloc(4 * n)
  print("kernel", p.name, flush=True)
  prg(out, inp, global_size=p.global_size, local_size=p.local_size)
  print("NO REPORT")
  """
  p = _run(code)
  name = p.stdout.split("kernel ", 1)[-1].split()[0] if "kernel " in p.stdout else "?"
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
