"""The CPU plugin's hand-written C kernels (tinycore_cpu/*.c) built here as shared libraries, one per instruction set,
with warnings as errors, so that every code path the source has is tested on this machine, not just the one
-march=native picks."""
import ctypes, os, platform, shutil, subprocess
import pytest

CC = shutil.which(os.environ.get("CC", "") or "gcc") or shutil.which("clang") or shutil.which("cc")
# what -march=native has (VNNI, AVX-512 where present), AVX2 without VNNI, then plain C
MARCHES = ["-march=native", "-march=x86-64-v3", "-march=x86-64"]

def build(source: str, march: str, out_dir) -> ctypes.CDLL:
  """tinycore_cpu/`source` compiled for `march` into `out_dir`; skips where the machine or compiler can't."""
  if CC is None: pytest.skip("no C compiler")
  if march != "-march=native" and platform.machine() not in ("x86_64", "AMD64"): pytest.skip("x86 flags")
  src = os.path.join(os.path.dirname(__file__), "..", "tinycore_cpu", source)
  out = os.path.join(str(out_dir), os.path.splitext(source)[0] + ".so")
  cmd = [CC, "-O2", march, "-fPIC", "-shared", "-std=gnu11", "-Wall", "-Werror", src, "-o", out, "-lm"]
  p = subprocess.run(cmd, capture_output=True, text=True)
  if p.returncode != 0 and march != "-march=native" and "unrecognized" in p.stderr + p.stdout: pytest.skip(f"{CC} lacks {march}")
  if p.returncode != 0: pytest.fail(f"{' '.join(cmd)} failed:\n{p.stderr}")
  return ctypes.CDLL(out)

def library_fixture(source: str):
  """A module-scoped fixture: tinycore_cpu/`source` built once for each of MARCHES (each test runs on every build)."""
  @pytest.fixture(scope="module", params=MARCHES)
  def lib(request, tmp_path_factory): return build(source, request.param, tmp_path_factory.mktemp(os.path.splitext(source)[0]))
  return lib
