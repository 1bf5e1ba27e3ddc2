"""`DEV=NULL+<DEVICE>`: the device's own pipeline and real compiler, and nothing runs.

Every kernel is rendered by the device's renderer and compiled by its compiler (NVRTC, clang, llvmlite, ...), so a whole
test suite's kernels can be checked against the real toolchain on a machine without the hardware. Buffers live in
host memory and keep whatever was copied in; results are not computed, and reading one back raises ResultUnavailableError."""
from __future__ import annotations
from tinycore.device import Compiled, Allocator

class _NullMemory(bytearray):
  """A NULL buffer's host bytes. `computed` turns False once a kernel is handed it: the kernel never ran, so what the
  bytes hold is not its result (a full copy-in makes them real data again)."""
  computed = True

class NullAllocator(Allocator):
  def __init__(self, spec=None): self.spec = spec
  def _alloc(self, size: int, options=None): return memoryview(_NullMemory(size))
  def _copyin(self, dest, src: memoryview) -> None:
    dest[:] = src
    if dest.nbytes == len(dest.obj): dest.obj.computed = True
  def _copyout(self, dest: memoryview, src) -> None: dest[:] = self._readable(src)
  def _as_buffer(self, opaque) -> memoryview: return self._readable(opaque)
  def _offset(self, opaque, size: int, offset: int): return opaque[offset:offset + size]
  def _readable(self, mem: memoryview) -> memoryview:
    """`mem`, unless a kernel was to write it: plausible-looking zeros from a kernel that never ran are worse than an error."""
    if getattr(mem.obj, "computed", True): return mem
    from tinycore.errors import ResultUnavailableError
    spec = self.spec
    real, emu = (str(spec.replace(iface=None)), str(spec.replace(iface="EMU"))) if spec is not None else ("DEVICE", "EMU+DEVICE")
    raise ResultUnavailableError(f"DEV={spec or 'NULL+...'} is compile-only: its kernels were compiled but never run, so there is no result "
                                 f"to read. Run on the hardware with DEV={real}, or in the emulator with DEV={emu}.")

class NullProgram:
  def __init__(self, name: str, lib: bytes): self.name, self.lib = name, lib
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False, work: int = 0):
    for b in bufs:   # which arguments a kernel writes isn't known here: every one it was handed stops being readable
      if isinstance(getattr(b, "obj", None), _NullMemory): b.obj.computed = False
    return 0.0 if wait else None

def open_null(device_name: str, spec, renderer_info) -> Compiled:
  """`renderer_info`: the plugin's RendererInfo for spec.renderer; its class is built with the DEV arch when it takes one."""
  from tinycore.device import DeviceUnavailable
  from tinycore.renderer.build import build_renderer
  ren = build_renderer(spec, renderer_info)
  if ren.compiler is None: raise DeviceUnavailable(f"{spec.device}:{renderer_info.name} has no compiler to run in NULL mode")
  return Compiled(device_name, NullAllocator(spec), ren, NullProgram)
