"""`DEV=NULL+<DEVICE>`: the device's own pipeline and real compiler, and nothing runs.

Every kernel is rendered by the device's renderer and compiled by its compiler (NVRTC, clang, llvmlite, ...), so a whole
test suite's kernels can be checked against the real toolchain on a machine without the hardware. Buffers live in
host memory and keep whatever was copied in; results are not computed."""
from __future__ import annotations
from tinycore.device import Compiled, Allocator

class NullAllocator(Allocator):
  def _alloc(self, size: int, options=None): return memoryview(bytearray(size))
  def _copyin(self, dest, src: memoryview) -> None: dest[:] = src
  def _copyout(self, dest: memoryview, src) -> None: dest[:] = src
  def _as_buffer(self, opaque) -> memoryview: return opaque
  def _offset(self, opaque, size: int, offset: int): return opaque[offset:offset + size]

class NullProgram:
  def __init__(self, name: str, lib: bytes): self.name, self.lib = name, lib
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False, work: int = 0):
    return 0.0 if wait else None

def open_null(device_name: str, spec, renderer_info) -> Compiled:
  """`renderer_info`: the plugin's RendererInfo for spec.renderer; its class is built with the DEV arch when it takes one."""
  from tinycore.device import DeviceUnavailable
  from tinycore.renderer.build import build_renderer
  ren = build_renderer(spec, renderer_info)
  if ren.compiler is None: raise DeviceUnavailable(f"{spec.device}:{renderer_info.name} has no compiler to run in NULL mode")
  return Compiled(device_name, NullAllocator(), ren, NullProgram)
