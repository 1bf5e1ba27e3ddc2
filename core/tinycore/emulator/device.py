"""EMU plumbing: a renderer that keeps a base renderer's capabilities but emits the linearized program, its compiler,
a host-memory allocator, the runtime, and `open_emulated` which plugins call for `DEV=EMU+<DEVICE>`."""
from __future__ import annotations
import time
from tinycore.compiler import Compiler
from tinycore.device import Compiled, LRUAllocator
from tinycore.renderer import Renderer
from tinycore.emulator.model import ExecModel, as_model
from tinycore.emulator import serialize

VERSION = 2   # bump when the interpreter's semantics change: it is part of the compile-cache key

class EmulatedRenderer(Renderer):
  """Same capabilities (device, arch, locals, shared memory, tensor cores, dtypes) as `base`, so codegen makes the
  same choices it makes for the real device; render() emits the linearized program instead of source."""
  _caps = ("device", "arch", "has_local", "has_shared", "global_max", "local_max", "shared_max", "tensor_cores",
           "supports_float4", "claimed_dtypes", "vector_types", "register_tile", "shared_staging", "async_copy", "matrix_load",
           "copy_bytes", "simt_staging", "prepad_windows", "attention_tensor_cores", "staged_epilogue")
  def __init__(self, base: Renderer, model: ExecModel | None = None):
    self.base, self.model = base, as_model(model)
    for a in self._caps:
      if hasattr(base, a): setattr(self, a, getattr(base, a))
    self.name = f"EMU+{base.name or type(base).__name__}"
    self.compiler = EmulatorCompiler(f"emu{VERSION}-{type(base).__name__}-{base.name}-{base.arch}-{self.model.name}")
  def render(self, name: str, uops: list) -> str:
    # the interpreter computes any dtype, but the device it stands for may not: refuse what the base renderer doesn't claim
    if self.claimed_dtypes is not None:
      from tinycore.dtype import dtypes, PtrDType
      for u in uops:
        dt = (u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype).scalar()
        if dt not in (dtypes.void, dtypes.index) and dt not in self.claimed_dtypes:
          raise NotImplementedError(f"{self.device} has no {dt.name} ({dt!r}): its {type(self.base).__name__} doesn't support it")
    if self.model.check is not None: self.model.check(self.base, name, uops)
    return serialize.encode(name, uops)

class EmulatorCompiler(Compiler):
  def compile(self, src: str) -> bytes: return serialize.decode_bytes(src)
  def disassemble(self, lib: bytes) -> str:
    name, nodes = serialize.decode(lib)
    return "\n".join(f"{i:4d} {n.op.name:<14} {str(n.dtype):<20} {n.arg!r}" for i, n in enumerate(nodes))

class EmuAllocator(LRUAllocator):
  """Host memory: bytearray-backed memoryviews; the emulator reads and writes them in place."""
  def _alloc(self, size: int, options=None): return memoryview(bytearray(size))
  def _copyin(self, dest, src: memoryview): dest[:] = src
  def _copyout(self, dest: memoryview, src): dest[:] = src
  def _as_buffer(self, opaque) -> memoryview: return opaque
  def _offset(self, opaque, size: int, offset: int): return opaque[offset:offset + size]

class EmulatorProgram:
  """`prg(*bufs, global_size, local_size, vals, wait)`: global_size counts workgroups, like a GPU launch."""
  def __init__(self, name: str, lib: bytes, model: ExecModel | None = None):
    from tinycore.emulator.interp import Interpreter
    self.name, self.model = name, as_model(model)
    _, nodes = serialize.decode(lib)
    self.interp = Interpreter(nodes, self.model, name)
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, **kw):
    st = time.perf_counter()
    self.interp.run(bufs, tuple(global_size or (1, 1, 1)), tuple(local_size or (1, 1, 1)), tuple(vals))
    if wait: return time.perf_counter() - st

def open_emulated(device_name: str, base_renderer: Renderer, model=None) -> Compiled:
  """The `Compiled` for `DEV=EMU+<DEVICE>`: `base_renderer`'s pipeline, executed by the shared interpreter.
  `model`: what the plugin's `tinycore_emulator(device)` hook returns (an ExecModel or a dict of its fields);
  None asks the installed plugins' hooks for `device_name`, falling back to the generic model."""
  model = as_model(model) if model is not None else emulator_model(device_name)
  ren = EmulatedRenderer(base_renderer, model)
  return Compiled(device_name, EmuAllocator(), ren, lambda name, lib: EmulatorProgram(name, lib, model))

def emulator_model(device: str, arch: str | None = None) -> ExecModel:
  """The execution model installed plugins give for `device` and `arch` (their `tinycore_emulator` hook), else the
  generic one."""
  from tinycore.plugins import registry
  for _, m in registry.call("tinycore_emulator", device=device.split(":")[0].upper(), arch=arch):
    if m is not None: return as_model(m)
  return ExecModel()
