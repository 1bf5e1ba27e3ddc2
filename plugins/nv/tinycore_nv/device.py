"""Opening NV/CUDA: a GPU through the driver API (its primary context), the renderer DEV asks for, an LRU-pooled
allocator and the launcher. `EMU+NV` hands the CUDA renderer to the shared emulator instead."""
from __future__ import annotations
import ctypes
from tinycore.device import Compiled, LRUAllocator, DeviceUnavailable
from tinycore_nv import cuda
from tinycore_nv.cuda import libcuda, check

class NVContext:
  """One GPU: its primary context, made current before every driver call that needs it."""
  def __init__(self, ordinal: int):
    lib = libcuda()
    if not 0 <= ordinal < (n := cuda.device_count()): raise DeviceUnavailable(f"GPU {ordinal} requested but the driver sees {n}")
    self.dev, self.ctx = ctypes.c_int(), ctypes.c_void_p()
    check(lib.cuDeviceGet(ctypes.byref(self.dev), ordinal), "cuDeviceGet")
    check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), self.dev), "cuDevicePrimaryCtxRetain")
    self.ordinal, self.arch = ordinal, f"sm_{cuda.attribute(self.dev.value, 'cc_major')}{cuda.attribute(self.dev.value, 'cc_minor')}"
    self.max_grid = (2**31 - 1, cuda.attribute(self.dev.value, "max_grid_dim_y"), cuda.attribute(self.dev.value, "max_grid_dim_z"))
  def use(self): check(libcuda().cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
  def synchronize(self):
    self.use()
    check(libcuda().cuCtxSynchronize(), "cuCtxSynchronize")

class NVAllocator(LRUAllocator):
  def __init__(self, ctx: NVContext):
    super().__init__()
    self.ctx = ctx
  def _alloc(self, size: int, options=None) -> int:
    self.ctx.use()
    p = ctypes.c_uint64()
    rc = libcuda().cuMemAlloc_v2(ctypes.byref(p), size)
    if rc == 2: raise MemoryError(f"NV:{self.ctx.ordinal}: out of memory allocating {size} bytes")   # the LRU frees its cache and retries
    check(rc, "cuMemAlloc")
    return p.value
  def _free(self, opaque: int, size: int, options=None) -> None:
    self.ctx.use()
    libcuda().cuMemFree_v2(opaque)
  def _copyin(self, dest: int, src: memoryview) -> None:
    self.ctx.use()
    host = (ctypes.c_char * src.nbytes).from_buffer_copy(src) if src.readonly else (ctypes.c_char * src.nbytes).from_buffer(src)
    check(libcuda().cuMemcpyHtoD_v2(ctypes.c_void_p(dest), host, src.nbytes), "cuMemcpyHtoD")
  def _copyout(self, dest: memoryview, src: int) -> None:
    self.ctx.use()
    check(libcuda().cuMemcpyDtoH_v2((ctypes.c_char * dest.nbytes).from_buffer(dest), ctypes.c_void_p(src), dest.nbytes), "cuMemcpyDtoH")
  def _offset(self, opaque: int, size: int, offset: int) -> int: return opaque + offset
  def _transfer(self, dest: int, src: int, size: int, src_dev, dest_dev) -> None:
    # same GPU: a device copy; another GPU: a peer copy (the driver stages through the host when P2P is off)
    s, d = src_dev.allocator.ctx, dest_dev.allocator.ctx
    d.use()
    if s is d: check(libcuda().cuMemcpyDtoD_v2(ctypes.c_void_p(dest), ctypes.c_void_p(src), size), "cuMemcpyDtoD")
    else: check(libcuda().cuMemcpyPeer(dest, d.ctx, src, s.ctx, size), "cuMemcpyPeer")

class NVProgram:
  """A loaded kernel; `prg(*bufs, global_size, local_size, vals, wait)` launches it, timed with events when `wait`."""
  def __init__(self, ctx: NVContext, name: str, lib: bytes):
    self.ctx, self.name = ctx, name
    ctx.use()
    self.module, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
    check(libcuda().cuModuleLoadData(ctypes.byref(self.module), lib), f"cuModuleLoadData({name})")
    check(libcuda().cuModuleGetFunction(ctypes.byref(self.fn), self.module, name.encode()), f"cuModuleGetFunction({name})")
    from tinycore_nv.shared_memory import opt_in
    self.dynamic_smem = opt_in(libcuda(), self.module, self.fn, name, check)   # panels past 48 KB (shared_memory.py)
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, **kw):
    lib = libcuda()
    gs, ls = tuple(global_size or (1, 1, 1)), tuple(local_size or (1, 1, 1))
    if any(g > m for g, m in zip(gs, self.ctx.max_grid)): raise RuntimeError(f"{self.name}: grid {gs} exceeds this GPU's limit {self.ctx.max_grid}")
    args = [ctypes.c_uint64(b) for b in bufs] + [ctypes.c_int32(v) for v in vals]
    ptrs = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
    self.ctx.use()
    if wait:
      ev = [ctypes.c_void_p(), ctypes.c_void_p()]
      for e in ev: check(lib.cuEventCreate(ctypes.byref(e), 0), "cuEventCreate")
      check(lib.cuEventRecord(ev[0], None), "cuEventRecord")
    check(lib.cuLaunchKernel(self.fn, *gs, *ls, self.dynamic_smem, None, ptrs, None), f"cuLaunchKernel({self.name}, grid={gs}, block={ls})")
    if wait:
      check(lib.cuEventRecord(ev[1], None), "cuEventRecord")
      check(lib.cuEventSynchronize(ev[1]), "cuEventSynchronize")
      ms = ctypes.c_float()
      check(lib.event_elapsed(ctypes.byref(ms), ev[0], ev[1]), "cuEventElapsedTime")
      for e in ev: lib.cuEventDestroy_v2(e)
      return ms.value / 1e3
  def __del__(self):
    try: libcuda().cuModuleUnload(self.module)
    except Exception: pass

class NVDevice(Compiled):
  def __init__(self, device_name: str, ctx: NVContext, renderer):
    self.ctx = ctx
    super().__init__(device_name, NVAllocator(ctx), renderer, lambda name, lib: NVProgram(ctx, name, lib))
  def synchronize(self) -> None: self.ctx.synchronize()

_contexts: dict[int, NVContext] = {}
def open_device(device_name: str, spec) -> Compiled:
  if spec.iface == "PCI":
    raise DeviceUnavailable("PCI+NV only probes (sysfs); compute over a userspace PCI driver is not implemented yet: use DEV=NV")
  idx = int(device_name.partition(":")[2] or 0)
  phys = spec.physical(idx)
  if phys not in _contexts: _contexts[phys] = NVContext(phys)
  ctx = _contexts[phys]
  from tinycore.renderer.build import build_renderer
  return NVDevice(device_name, ctx, build_renderer(spec, arch=spec.arch or ctx.arch))
