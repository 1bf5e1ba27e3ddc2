"""Opening CL: one pyopencl context and in-order profiling queue per device, cl.Buffers from an LRU-pooled allocator,
programs built from the compiler's binary, launches with global/local sizes timed by profiling events."""
from __future__ import annotations
import numpy as np
import pyopencl as cl
from tinycore.device import Compiled, LRUAllocator, DeviceUnavailable
from tinycore.helpers import prod
from tinycore_opencl.platforms import cl_devices, describe, missing
from tinycore_opencl.compiler_cl import CLCompiler, quiet_driver
from tinycore_opencl.renderer_cl import CLRenderer

class CLContext:
  """One OpenCL device: its context, its queue (in order, so a launch sees every earlier copy) and its limits."""
  def __init__(self, dev):
    self.dev, self.info = dev, describe(dev)
    self.ctx = cl.Context([dev])
    self.queue = cl.CommandQueue(self.ctx, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
  def label(self) -> str: return f"{self.info['name']} ({self.info['platform']})"

class CLBuffer:
  """A cl.Buffer and the bytes of it a tinycore Buffer covers: views are sub-buffers, which OpenCL allows only at
  offsets aligned to the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN."""
  __slots__ = ("buf", "size")
  def __init__(self, buf, size: int): self.buf, self.size = buf, size

class CLAllocator(LRUAllocator):
  def __init__(self, c: CLContext):
    super().__init__()
    self.c = c
  def _alloc(self, size: int, options=None) -> CLBuffer:
    try: return CLBuffer(cl.Buffer(self.c.ctx, cl.mem_flags.READ_WRITE, max(size, 1)), size)
    except (cl.MemoryError, cl.LogicError) as e:   # the LRU frees its cache and retries on MemoryError
      raise MemoryError(f"CL: out of memory allocating {size} bytes on {self.c.label()}: {e}") from e
  # OpenCL keeps a released buffer alive until the queued commands using it are done: no wait needed
  def _free(self, opaque: CLBuffer, size: int, options=None) -> None: opaque.buf.release()
  def _copyin(self, dest: CLBuffer, src: memoryview) -> None:
    # blocking: the caller may reuse `src` as soon as this returns
    cl.enqueue_copy(self.c.queue, dest.buf, np.frombuffer(src, dtype=np.uint8), is_blocking=True)
  def _copyout(self, dest: memoryview, src: CLBuffer) -> None:
    cl.enqueue_copy(self.c.queue, np.frombuffer(dest, dtype=np.uint8), src.buf, is_blocking=True)
  def _offset(self, opaque: CLBuffer, size: int, offset: int) -> CLBuffer:
    if offset % self.c.info["mem_align"]:
      raise NotImplementedError(f"CL: a view at byte {offset} is not aligned to this device's {self.c.info['mem_align']}-byte sub-buffer alignment")
    return CLBuffer(opaque.buf.get_sub_region(offset, max(size, 1)), size)
  def _transfer(self, dest: CLBuffer, src: CLBuffer, size: int, src_dev, dest_dev) -> None:
    if src_dev.allocator.c is not self.c: raise NotImplementedError("CL: copies between two OpenCL contexts go through the host")
    cl.enqueue_copy(self.c.queue, dest.buf, src.buf, byte_count=size)

class CLProgram:
  """`prg(*bufs, global_size, local_size, vals, wait)`: global_size counts work-groups (OpenCL wants work-items)."""
  def __init__(self, c: CLContext, name: str, lib: bytes):
    self.c, self.name = c, name
    with quiet_driver(): self.prg = cl.Program(c.ctx, [c.dev], [lib]).build()
    self.kernel = cl.Kernel(self.prg, name)
    self.max_threads = self.kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, c.dev)
  def __call__(self, *bufs: CLBuffer, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, **kw):
    gs, ls = tuple(global_size or (1, 1, 1)), tuple(local_size or (1, 1, 1))
    if prod(ls) > self.max_threads:
      raise RuntimeError(f"CL: {self.name}: work-group {ls} exceeds this kernel's {self.max_threads} work-items on {self.c.label()}")
    for i, b in enumerate(bufs): self.kernel.set_arg(i, b.buf)
    for j, v in enumerate(vals): self.kernel.set_arg(len(bufs) + j, np.int32(v))
    ev = cl.enqueue_nd_range_kernel(self.c.queue, self.kernel, tuple(g * l for g, l in zip(gs, ls)), ls)
    if not wait: return None
    ev.wait()
    return (ev.profile.end - ev.profile.start) * 1e-9

class CLDevice(Compiled):
  def __init__(self, device_name: str, c: CLContext, renderer: CLRenderer):
    self.c = c
    super().__init__(device_name, CLAllocator(c), renderer, lambda name, lib: CLProgram(c, name, lib))
  def synchronize(self) -> None: self.c.queue.finish()

def make_renderer(c: CLContext, device_name: str = "CL") -> CLRenderer:
  """The renderer with the opened device's limits and extensions, so codegen shapes kernels for it."""
  i = c.info
  r = CLRenderer(i["name"], i["extensions"], local_max=tuple(min(x, i["max_workgroup"]) for x in i["max_item_sizes"][:3]),
                 shared_max=i["local_mem"], device_name=device_name)
  # a CPU driver (PoCL) runs a work-group's items as vector lanes in a loop: more outputs per item pay off there
  # (512^3 matmul on PoCL: 8x8 ~10-22 ms, the GPU default 4x8 ~30 ms, untiled ~82 ms)
  if i["is_cpu"]: r.register_tile = (8, 8)
  r.compiler = CLCompiler(c.ctx, c.dev)
  return r

_contexts: dict[int, CLContext] = {}
def context(phys: int) -> CLContext:
  if (why := missing()): raise DeviceUnavailable(why)
  devs = cl_devices()
  if not 0 <= phys < len(devs): raise DeviceUnavailable(f"OpenCL device {phys} requested but the ICD loader lists {len(devs)}")
  if phys not in _contexts: _contexts[phys] = CLContext(devs[phys])
  return _contexts[phys]

def default_compiler() -> CLCompiler:
  c = context(0)
  return CLCompiler(c.ctx, c.dev)

def open_device(device_name: str, spec) -> Compiled:
  if (spec.renderer or "CL").upper() != "CL": raise ValueError(f"CL has no renderer {spec.renderer!r}: use CL")
  c = context(spec.physical(int(device_name.partition(":")[2] or 0)))
  return CLDevice(device_name, c, make_renderer(c, device_name.partition(":")[0]))
