"""C compiler for CPU kernels: clang when present, else gcc, producing a shared object in memory."""
from __future__ import annotations
import shutil, subprocess, tempfile, os, functools, platform
from tinycore.compiler import Compiler, CompileError
from tinycore_cpu import sanitize

# -O2 for the host ISA; -fno-math-errno only drops errno writes, IEEE NaN/inf semantics stay intact (no -ffast-math)
FLAGS = ["-O2", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-fno-strict-aliasing", "-ffp-contract=fast",
         "-std=gnu11", "-w"]
# clang tunes Sapphire Rapids (and other AVX-512 parts) for 256-bit vectors and then splits the kernels' explicit
# 512-bit types into ymm pairs: the 8x32 matmul tile's 16 accumulators became 32 and spilled (1024^3 at 35-48 instead
# of ~143 GFLOP/s on one core). gcc spells the option the same; it is an x86 one, so only there
if platform.machine().lower() in ("x86_64", "amd64", "i686", "i386"): FLAGS.append("-mprefer-vector-width=512")

@functools.cache
def find_cc() -> str | None:
  for cc in (os.getenv("CC"), "clang", "gcc", "cc"):
    if cc and shutil.which(cc): return shutil.which(cc)
  return None

class CCompiler(Compiler):
  def __init__(self, cc: str | None = None):
    self.cc = cc or find_cc()
    if self.cc is None:
      raise FileNotFoundError("no C compiler found on PATH (tried clang, gcc, cc): install one (`apt-get install clang`) or use DEV=CPU:LLVM")
    # TINYCORE_SANITIZE=address,undefined: instrumented kernels (the sanitizer lane); the flags are in the cache key
    self.sanitizers = sanitize.requested()
    if self.sanitizers: sanitize.check_loaded(self.cc, self.sanitizers)
    self.flags = FLAGS + sanitize.compile_flags(self.cc, self.sanitizers)
    super().__init__(f"c-{os.path.basename(self.cc)}-{' '.join(self.flags)}")
  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
      out = os.path.join(d, "k.so")
      p = subprocess.run([self.cc, *self.flags, "-x", "c", "-", "-o", out, "-lm"], input=src.encode(), capture_output=True)
      if p.returncode != 0: raise CompileError(f"{os.path.basename(self.cc)} failed to compile the kernel", src, p.stderr.decode(errors="replace"))
      with open(out, "rb") as f: return f.read()
