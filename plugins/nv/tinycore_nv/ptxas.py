"""PTX -> cubin with ptxas when it is installed; otherwise the PTX itself, which the driver JIT-assembles at load."""
from __future__ import annotations
import functools, os, shutil, subprocess, tempfile
from tinycore.compiler import Compiler, CompileError

@functools.cache
def find_ptxas() -> str | None:
  for root in [os.getenv("CUDA_PATH"), os.getenv("CUDA_HOME"), "/usr/local/cuda"]:
    if root and os.access(p := os.path.join(root, "bin", "ptxas"), os.X_OK): return p
  return shutil.which("ptxas")

def ptxas(src: str, arch: str, exe: str | None = None) -> bytes:
  """Assemble PTX for `arch`; a CompileError carries the PTX and ptxas' messages."""
  return _assemble(src, arch, exe, [])[0]

def ptxas_with_log(src: str, arch: str, exe: str | None = None) -> tuple[bytes, str]:
  """Assemble with `ptxas -v`: the cubin and ptxas' resource report (registers, spills, shared memory; see occupancy.py)."""
  return _assemble(src, arch, exe, ["-v"])

def _assemble(src: str, arch: str, exe: str | None, flags: list[str]) -> tuple[bytes, str]:
  exe = exe or find_ptxas()
  if exe is None: raise FileNotFoundError("ptxas not found (install the CUDA toolkit or set CUDA_PATH)")
  with tempfile.TemporaryDirectory() as d:
    inp, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
    with open(inp, "w") as f: f.write(src)
    p = subprocess.run([exe, *flags, f"-arch={arch}", inp, "-o", out], capture_output=True, text=True)
    if p.returncode != 0: raise CompileError(f"ptxas failed to assemble the kernel for {arch}", src, p.stderr)
    with open(out, "rb") as f: return f.read(), p.stderr

class PTXCompiler(Compiler):
  def __init__(self, arch: str = "sm_80", use_ptxas: bool | None = None):
    self.arch, self.exe = arch, (find_ptxas() if use_ptxas in (None, True) else None)
    if use_ptxas and self.exe is None: raise FileNotFoundError("ptxas not found")
    super().__init__(f"ptx-{arch}-{'ptxas' if self.exe else 'jit'}")
  def compile(self, src: str) -> bytes: return ptxas(src, self.arch, self.exe) if self.exe else src.encode() + b"\0"
