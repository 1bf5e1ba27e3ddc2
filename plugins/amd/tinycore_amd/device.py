"""Opening AMD: the renderer DEV asks for, then the runtime. `EMU+AMD` hands the renderer to the shared emulator.

`DEV=AMD` (the HIP interface) dispatches through ROCm's HIP runtime (hip.py): an LRU-pooled allocator over hipMalloc,
code objects loaded with hipModuleLoadData, kernels launched with their kernarg buffer packed from the code object's
metadata. Written against the HIP API and tested against a fake libamdhip64; NOT yet run on AMD hardware.
`DEV=KFD+AMD` is the KFD runtime (kfd/: /dev/kfd ioctls, AQL queues, no ROCm); it is also what a bare `DEV=AMD` opens
when MOCKGPU=1 (the mock driver, mockgpu/) or when /dev/kfd exists and ROCm's HIP does not. PCI+AMD and USB+AMD only probe."""
from __future__ import annotations
import ctypes
from tinycore.device import Compiled, LRUAllocator, DeviceUnavailable
from tinycore_amd import hip
from tinycore_amd.hip import libhip, check

def _kfd_arch(ordinal: int) -> str | None:
  from tinycore_amd.topology import kfd_nodes
  gpus = [n["gfx"] for n in kfd_nodes() if n.get("gfx")]
  return gpus[ordinal] if ordinal < len(gpus) else None

class HIPContext:
  """One GPU by its HIP ordinal, made current (hipSetDevice) before every call that needs it."""
  def __init__(self, ordinal: int):
    libhip()
    if not 0 <= ordinal < (n := hip.device_count()):
      raise DeviceUnavailable(f"GPU {ordinal} requested but ROCm's HIP runtime sees {n}" if n else "ROCm's HIP runtime sees no AMD GPU")
    self.ordinal, self.name = ordinal, hip.device_name(ordinal)
    self.arch = hip.gcn_arch(ordinal) or _kfd_arch(ordinal)
  def use(self): check(libhip().hipSetDevice(self.ordinal), "hipSetDevice")
  def synchronize(self):
    self.use()
    check(libhip().hipDeviceSynchronize(), "hipDeviceSynchronize")

class HIPAllocator(LRUAllocator):
  def __init__(self, ctx: HIPContext):
    super().__init__()
    self.ctx = ctx
  def _alloc(self, size: int, options=None) -> int:
    self.ctx.use()
    p = ctypes.c_void_p()
    rc = libhip().hipMalloc(ctypes.byref(p), size)
    if rc == hip.OUT_OF_MEMORY:
      raise MemoryError(f"AMD:{self.ctx.ordinal}: out of memory allocating {size} bytes")   # the LRU frees its cache and retries
    check(rc, f"hipMalloc({size})")
    return p.value
  def _free(self, opaque: int, size: int, options=None) -> None:
    self.ctx.use()
    libhip().hipFree(opaque)
  def _copyin(self, dest: int, src: memoryview) -> None:
    self.ctx.use()
    host = (ctypes.c_char * src.nbytes).from_buffer_copy(src) if src.readonly else (ctypes.c_char * src.nbytes).from_buffer(src)
    check(libhip().hipMemcpy(dest, host, src.nbytes, hip.HTOD), "hipMemcpy(HtoD)")
  def _copyout(self, dest: memoryview, src: int) -> None:
    self.ctx.use()
    check(libhip().hipMemcpy((ctypes.c_char * dest.nbytes).from_buffer(dest), src, dest.nbytes, hip.DTOH), "hipMemcpy(DtoH)")
  def _offset(self, opaque: int, size: int, offset: int) -> int: return opaque + offset
  def _transfer(self, dest: int, src: int, size: int, src_dev, dest_dev) -> None:
    s, d = src_dev.allocator.ctx, dest_dev.allocator.ctx
    d.use()
    if s is d: check(libhip().hipMemcpy(dest, src, size, hip.DTOD), "hipMemcpy(DtoD)")
    else: check(libhip().hipMemcpyPeer(dest, d.ordinal, src, s.ordinal, size), "hipMemcpyPeer")

class HIPProgram:
  """A loaded code object; `prg(*bufs, global_size (blocks), local_size, vals, wait)` launches it, timed with events when
  `wait`. The explicit kernel arguments (buffer pointers, then int32 vals) are packed at the offsets the code object's
  metadata gives; HIP appends the hidden ones (dispatch sizes, queue pointers) itself."""
  def __init__(self, ctx: HIPContext, name: str, lib: bytes):
    from tinycore_amd.codeobject import read
    self.ctx, self.name, self.lib = ctx, name, lib   # keep the image alive while the module is loaded
    co = read(lib)
    if not co.linked: raise RuntimeError(f"{name}: the code object is not linked (no ld.lld on PATH: apt-get install lld), so HIP cannot load it")
    if (k := co.kernels.get(name)) is None:
      raise RuntimeError(f"{name}: the code object has no kernel of that name (it has {', '.join(co.kernels) or 'none'})")
    self.args = [(a[".offset"], a[".size"]) for a in k.args if not a.get(".value_kind", "").startswith("hidden_")]
    self.kernarg_size = max((o + s for o, s in self.args), default=0)
    ctx.use()
    self.module, self.fn, self.hip = ctypes.c_void_p(), ctypes.c_void_p(), libhip()
    where = f" (code object for {co.arch}, GPU is {ctx.arch})" if ctx.arch and co.arch != ctx.arch else ""
    check(self.hip.hipModuleLoadData(ctypes.byref(self.module), lib), f"hipModuleLoadData({name}){where}")
    check(self.hip.hipModuleGetFunction(ctypes.byref(self.fn), self.module, name.encode()), f"hipModuleGetFunction({name})")
  def kernargs(self, bufs, vals) -> bytes:
    if len(self.args) != len(bufs) + len(vals):
      raise RuntimeError(f"{self.name} takes {len(self.args)} explicit arguments but was given {len(bufs)} buffers and {len(vals)} values")
    out = bytearray(self.kernarg_size)
    for (off, size), v in zip(self.args, [*bufs, *vals]): out[off:off + size] = (int(v) & ((1 << 8 * size) - 1)).to_bytes(size, "little")
    return bytes(out)
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, **kw):
    lib = libhip()
    gs, ls = (*(global_size or ()), 1, 1, 1)[:3], (*(local_size or ()), 1, 1, 1)[:3]   # grid in blocks, as in CUDA
    args = ctypes.create_string_buffer(self.kernargs(bufs, vals), max(self.kernarg_size, 1))
    size = ctypes.c_size_t(self.kernarg_size)
    extra = (ctypes.c_void_p * 5)(hip.BUFFER_POINTER, ctypes.addressof(args), hip.BUFFER_SIZE, ctypes.addressof(size), hip.END)
    self.ctx.use()
    if wait:
      ev = [ctypes.c_void_p(), ctypes.c_void_p()]
      for e in ev: check(lib.hipEventCreate(ctypes.byref(e)), "hipEventCreate")
      check(lib.hipEventRecord(ev[0], None), "hipEventRecord")
    check(lib.hipModuleLaunchKernel(self.fn, *gs, *ls, 0, None, None, extra), f"hipModuleLaunchKernel({self.name}, grid={gs}, block={ls})")
    if wait:
      check(lib.hipEventRecord(ev[1], None), "hipEventRecord")
      check(lib.hipEventSynchronize(ev[1]), "hipEventSynchronize")
      ms = ctypes.c_float()
      check(lib.hipEventElapsedTime(ctypes.byref(ms), ev[0], ev[1]), "hipEventElapsedTime")
      for e in ev: lib.hipEventDestroy(e)
      return ms.value / 1e3
  def __del__(self):
    try:
      if self.module: self.hip.hipModuleUnload(self.module)
    except Exception: pass

class HIPDevice(Compiled):
  def __init__(self, device_name: str, ctx: HIPContext, renderer):
    self.ctx = ctx
    super().__init__(device_name, HIPAllocator(ctx), renderer, lambda name, lib: HIPProgram(ctx, name, lib))
  def synchronize(self) -> None: self.ctx.synchronize()

_contexts: dict[int, HIPContext] = {}
def open_device(device_name: str, spec):
  from tinycore.pci import pci_devices
  if spec.iface == "USB": raise DeviceUnavailable("no USB-attached AMD GPU found (the USB bridge interface is not implemented)")
  if spec.iface == "PCI": raise DeviceUnavailable("PCI+AMD only probes (sysfs); a userspace PCI driver is not implemented: use DEV=AMD (HIP)")
  if spec.iface == "KFD":
    from tinycore_amd.kfd.device import open_kfd
    return open_kfd(device_name, spec)
  phys = spec.physical(int(device_name.partition(":")[2] or 0))
  if phys not in _contexts:
    try: _contexts[phys] = HIPContext(phys)
    except DeviceUnavailable as e:
      if not pci_devices(0x1002): raise DeviceUnavailable(f"no AMD GPU on the PCI bus; {e}") from None
      raise
  ctx = _contexts[phys]
  if not (arch := spec.arch or ctx.arch):
    raise DeviceUnavailable(f"could not tell the arch of {ctx.name} (neither hipDeviceProp_t.gcnArchName nor the KFD topology says): "
                            "name it, e.g. DEV=AMD::gfx1100")
  from tinycore.renderer.build import build_renderer
  return HIPDevice(device_name, ctx, build_renderer(spec, arch=arch))
