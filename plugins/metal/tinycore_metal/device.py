"""The METAL runtime: the system default GPU, a command queue, shared-storage buffers (zero-copy with the host),
pipelines from MSL source or a metallib, dispatch and GPU timestamps. Through objc.py (ctypes, no PyObjC).

UNTESTED ON APPLE HARDWARE: written on Linux against Apple's documented selectors; nothing here has run. A Mac user
should first run `tinyctl device list` and the conformance kit on DEV=METAL (docs/metal.md)."""
from __future__ import annotations
import ctypes
from tinycore.device import Compiled, LRUAllocator, DeviceUnavailable
from tinycore.compiler import CompileError
from tinycore.helpers import prod
from tinycore_metal.objc import lib, cls, send, nsstring, release, error_text, to_str, MTLSize
from tinycore_metal.compiler_metal import METALLIB_MAGIC

STORAGE_SHARED = 0        # MTLResourceStorageModeShared: CPU and GPU see the same pages
CB_STATUS_ERROR = 5       # MTLCommandBufferStatusError
U, B = ctypes.c_ulong, ctypes.c_bool   # NSUInteger, BOOL (arm64: C bool)

class MetalContext:
  """The GPU and its queue. Command buffers not yet waited on are kept until synchronize()."""
  def __init__(self):
    self.dev = lib()[1].MTLCreateSystemDefaultDevice()
    if not self.dev: raise DeviceUnavailable("MTLCreateSystemDefaultDevice returned nil (no Metal GPU)")
    self.queue, self.name = send(self.dev, "newCommandQueue"), to_str(send(self.dev, "name"))
    self.inflight: list[int] = []
  def synchronize(self):
    for cb in self.inflight: _wait(cb)
    self.inflight = []

def _wait(cb) -> None:
  send(cb, "waitUntilCompleted", restype=None)
  failed = send(cb, "status", restype=U) == CB_STATUS_ERROR
  err = send(cb, "error")
  msg = to_str(send(err, "localizedDescription")) if err else ""
  release(cb)
  if failed: raise RuntimeError(f"METAL: command buffer failed: {msg or 'no error description'}")

class MetalBuffer:
  """An MTLBuffer and the byte range of it a tinycore Buffer uses (sub-buffers share the MTLBuffer)."""
  __slots__ = ("buf", "size", "offset")
  def __init__(self, buf: int, size: int, offset: int = 0): self.buf, self.size, self.offset = buf, size, offset
  def host(self) -> memoryview:
    p = send(self.buf, "contents") + self.offset
    return memoryview((ctypes.c_char * self.size).from_address(p)).cast("B")

class MetalAllocator(LRUAllocator):
  def __init__(self, ctx: MetalContext):
    super().__init__()
    self.ctx = ctx
  def _alloc(self, size: int, options=None) -> MetalBuffer:
    b = send(self.ctx.dev, "newBufferWithLength:options:", max(size, 1), STORAGE_SHARED, argtypes=[U, U])
    if not b: raise MemoryError(f"METAL: out of memory allocating {size} bytes")   # the LRU frees its cache and retries
    return MetalBuffer(b, size)
  def _free(self, opaque: MetalBuffer, size: int, options=None) -> None:
    self.ctx.synchronize()   # a queued kernel may still use it
    release(opaque.buf)
  # shared storage: host access is a plain memory copy once the GPU is done with the buffer
  def _as_buffer(self, opaque: MetalBuffer) -> memoryview:
    self.ctx.synchronize()
    return opaque.host()
  def _copyin(self, dest: MetalBuffer, src: memoryview) -> None:
    self.ctx.synchronize()
    dest.host()[:] = memoryview(src).cast("B")
  def _copyout(self, dest: memoryview, src: MetalBuffer) -> None:
    self.ctx.synchronize()
    memoryview(dest).cast("B")[:] = src.host()
  def _offset(self, opaque: MetalBuffer, size: int, offset: int) -> MetalBuffer: return MetalBuffer(opaque.buf, size, opaque.offset + offset)
  def _transfer(self, dest, src, size: int, src_dev, dest_dev) -> None:
    src_dev.synchronize(); dest_dev.synchronize()
    dest.host()[:size] = src.host()[:size]

def _library(ctx: MetalContext, name: str, lib: bytes) -> int:
  err = ctypes.c_void_p()
  if lib.startswith(METALLIB_MAGIC):
    # a metallib from xcrun: wrapped in dispatch_data (the NULL destructor makes libdispatch copy the bytes)
    ld = ctypes.CDLL("/usr/lib/libSystem.B.dylib")
    ld.dispatch_data_create.restype = ctypes.c_void_p
    ld.dispatch_data_create.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]
    data = ld.dispatch_data_create(lib, len(lib), None, None)
    out = send(ctx.dev, "newLibraryWithData:error:", data, ctypes.byref(err))
  else:
    opts = send(cls("MTLCompileOptions"), "new")
    # IEEE semantics: NaN-propagating MAX and isnan must not be folded away (mathMode from macOS 15, else fastMathEnabled)
    if send(opts, "respondsToSelector:", _selp("setMathMode:"), restype=B): send(opts, "setMathMode:", 0, restype=None, argtypes=[ctypes.c_long])
    else: send(opts, "setFastMathEnabled:", False, restype=None, argtypes=[B])
    out = send(ctx.dev, "newLibraryWithSource:options:error:", (src := nsstring(lib.decode())), opts, ctypes.byref(err))
    release(opts); release(src)
  if not out:
    log = lib.decode(errors="replace") if not lib.startswith(METALLIB_MAGIC) else None
    raise CompileError(f"METAL: the library for {name} did not build", log, error_text(err))
  return out
def _selp(name: str):
  from tinycore_metal.objc import sel
  return ctypes.c_void_p(sel(name))

class MetalProgram:
  """`prg(*bufs, global_size, local_size, vals, wait)`: global_size counts threadgroups; with `wait`, GPU seconds."""
  def __init__(self, ctx: MetalContext, name: str, lib: bytes):
    self.ctx, self.name = ctx, name
    self.library = _library(ctx, name, lib)
    self.fn = send(self.library, "newFunctionWithName:", (nm := nsstring(name)))
    release(nm)
    if not self.fn: raise CompileError(f"METAL: no kernel {name!r} in its library")
    err = ctypes.c_void_p()
    self.pipeline = send(ctx.dev, "newComputePipelineStateWithFunction:error:", self.fn, ctypes.byref(err))
    if not self.pipeline: raise CompileError(f"METAL: pipeline for {name} failed", None, error_text(err))
    self.max_threads = send(self.pipeline, "maxTotalThreadsPerThreadgroup", restype=U)
  def __call__(self, *bufs: MetalBuffer, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, **kw):
    gs, ls = tuple(global_size or (1, 1, 1)), tuple(local_size or (1, 1, 1))
    if prod(ls) > self.max_threads: raise RuntimeError(f"{self.name}: threadgroup {ls} exceeds this pipeline's {self.max_threads} threads")
    objc = lib()[0]
    objc.objc_autoreleasePoolPush.restype = ctypes.c_void_p
    pool = objc.objc_autoreleasePoolPush()
    try:
      cb = send(send(self.ctx.queue, "commandBuffer"), "retain")   # outlives the pool until waited on
      enc = send(cb, "computeCommandEncoder")
      send(enc, "setComputePipelineState:", self.pipeline, restype=None)
      for i, b in enumerate(bufs): send(enc, "setBuffer:offset:atIndex:", b.buf, b.offset, i, restype=None, argtypes=[ctypes.c_void_p, U, U])
      # scalar arguments are `constant int&`: small inline bytes, no buffer needed
      for j, v in enumerate(vals):
        send(enc, "setBytes:length:atIndex:", ctypes.byref(ctypes.c_int32(v)), 4, len(bufs) + j, restype=None, argtypes=[ctypes.c_void_p, U, U])
      send(enc, "dispatchThreadgroups:threadsPerThreadgroup:", MTLSize(*gs), MTLSize(*ls), restype=None, argtypes=[MTLSize, MTLSize])
      send(enc, "endEncoding", restype=None)
      send(cb, "commit", restype=None)
    finally: objc.objc_autoreleasePoolPop(ctypes.c_void_p(pool))
    if not wait:
      self.ctx.inflight.append(cb)
      return None
    self.ctx.synchronize()
    send(cb, "waitUntilCompleted", restype=None)   # the timestamps are valid once it has completed
    t0, t1 = send(cb, "GPUStartTime", restype=ctypes.c_double), send(cb, "GPUEndTime", restype=ctypes.c_double)
    _wait(cb)
    return t1 - t0
  def __del__(self):
    try:
      for o in (self.pipeline, self.fn, self.library): release(o)
    except Exception: pass

class MetalDevice(Compiled):
  def __init__(self, device_name: str, ctx: MetalContext, renderer):
    self.ctx = ctx
    super().__init__(device_name, MetalAllocator(ctx), renderer, lambda name, lib: MetalProgram(ctx, name, lib))
  def synchronize(self) -> None: self.ctx.synchronize()

_ctx: MetalContext | None = None
def open_device(device_name: str, spec) -> Compiled:
  global _ctx
  from tinycore_metal.objc import metal_missing
  if (why := metal_missing()) is not None: raise DeviceUnavailable(why)
  if int(device_name.partition(":")[2] or 0) != 0: raise DeviceUnavailable("METAL opens the system default GPU only (METAL:0)")
  if (spec.renderer or "METAL").upper() != "METAL": raise ValueError(f"METAL has no renderer {spec.renderer!r}: use METAL")
  if _ctx is None: _ctx = MetalContext()
  from tinycore_metal.renderer_metal import MetalRenderer
  return MetalDevice(device_name, _ctx, MetalRenderer(spec.arch))
