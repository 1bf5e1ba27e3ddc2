"""Opening the CPU device: the renderer DEV asks for (C by default, LLVM), its compiler, allocator and runtime."""
from __future__ import annotations
import warnings
from tinycore.device import Compiled
from tinycore_cpu.runtime import CPUBufferView, CPUProgram

def _renderer(name: str | None, arch: str | None):
  name = (name or "C").upper()
  if name in ("C", "CLANG"):
    from tinycore_cpu.compiler_c import find_cc
    if find_cc() is None:
      try:
        from tinycore_cpu.renderer_llvm import LLVMRenderer
        warnings.warn("CPU: no C compiler on PATH (clang/gcc); falling back to DEV=CPU:LLVM (llvmlite)")
        return LLVMRenderer()
      except ImportError:
        raise RuntimeError("CPU: no C compiler on PATH and llvmlite is not installed: `apt-get install clang` or `pip install llvmlite`") from None
    from tinycore_cpu.renderer_c import CRenderer
    return CRenderer()
  if name == "LLVM":
    from tinycore_cpu.renderer_llvm import LLVMRenderer
    return LLVMRenderer()
  raise ValueError(f"CPU has no renderer {name!r}: use C (alias CLANG) or LLVM")

_allocator = None
def open_device(device_name: str, spec) -> Compiled:
  global _allocator
  # every CPU:n shares host memory, so they share one allocator too
  if _allocator is None:
    from tinycore_cpu import guarded
    # DEBUG_BUFFERS=1: every buffer fenced by guard pages and canaries, checked around each kernel (guarded.py)
    _allocator = guarded.GuardedAllocator() if guarded.enabled() else CPUBufferView()
  r = _renderer(getattr(spec, "renderer", None), getattr(spec, "arch", None))
  from tinycore_cpu.graph import CPUGraph   # TinyJit replays batches of kernels through one C call (graph.py)
  return Compiled(device_name, _allocator, r, getattr(r, "runtime", CPUProgram), graph=CPUGraph)   # LLVM loads objects with its own JIT
