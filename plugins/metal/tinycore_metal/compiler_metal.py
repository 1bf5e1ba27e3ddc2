"""MSL -> what MetalProgram loads. UNTESTED ON APPLE HARDWARE.

With Xcode's command-line tools (`xcrun -sdk macosx metal`), compile() returns a metallib (MTLB magic), built once
and cached on disk like any compiler output. Without them, compile() returns the MSL source itself and the
program compiles it at load time with newLibraryWithSource:options:error: (the framework's own compiler, always
present on macOS). Fast math is off either way: NaN checks (MAX, isnan) and IEEE division must survive."""
from __future__ import annotations
import os, shutil, subprocess, sys, tempfile
from tinycore.compiler import Compiler, CompileError

METALLIB_MAGIC = b"MTLB"

def find_xcrun_metal() -> list[str] | None:
  if sys.platform != "darwin" or shutil.which("xcrun") is None: return None
  try: ok = subprocess.run(["xcrun", "-sdk", "macosx", "-f", "metal"], capture_output=True, timeout=30).returncode == 0
  except (OSError, subprocess.TimeoutExpired): ok = False
  return ["xcrun", "-sdk", "macosx"] if ok else None

class MetalCompiler(Compiler):
  def __init__(self, std: str | None = None):
    self.std, self.xcrun = std, find_xcrun_metal()
    super().__init__(f"metal-{'metallib' if self.xcrun else 'source'}-{std or 'default'}")
  def compile(self, src: str) -> bytes:
    if self.xcrun is None: return src.encode()   # the framework compiles it when the program loads
    with tempfile.TemporaryDirectory(prefix="tc-metal-") as d:
      air, out = os.path.join(d, "k.air"), os.path.join(d, "k.metallib")
      std = [f"-std=metal{self.std}"] if self.std else []
      p = subprocess.run([*self.xcrun, "metal", "-x", "metal", *std, "-fno-fast-math", "-c", "-", "-o", air], input=src.encode(), capture_output=True)
      if p.returncode: raise CompileError("xcrun metal failed", src, p.stderr.decode(errors="replace"))
      p = subprocess.run([*self.xcrun, "metallib", air, "-o", out], capture_output=True)
      if p.returncode: raise CompileError("xcrun metallib failed", src, p.stderr.decode(errors="replace"))
      with open(out, "rb") as f: return f.read()
  def disassemble(self, lib: bytes) -> str:
    return lib.decode(errors="replace") if not lib.startswith(METALLIB_MAGIC) else f"<metallib, {len(lib)} bytes>"
