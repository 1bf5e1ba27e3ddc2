"""WebGPU runtime: storage buffers (allocator), pipelines built once per WGSL source, dispatch over a folded grid, timing."""
from __future__ import annotations
import time
import numpy as np
from tinycore.device import LRUAllocator, Compiled
from tinycore.helpers import prod

MAX_DIM = 65535   # WebGPU's guaranteed max workgroups per dimension

class WBuf:
  """A storage buffer, or a byte range of one (sub-buffer views)."""
  __slots__ = ("buf", "offset", "size")
  def __init__(self, buf, offset: int, size: int): self.buf, self.offset, self.size = buf, offset, size
  def __repr__(self): return f"<WBuf {self.size}B @{self.offset}>"

def _r4(x: int) -> int: return (x + 3) // 4 * 4   # copies and u32-packed bindings work in whole words

class WGPUAllocator(LRUAllocator):
  def __init__(self, dev, limits):
    super().__init__()
    self.dev = dev
    # a buffer bigger than one binding could be made, but no kernel could use it: refuse both up front
    self.max_size = min(limits["max-buffer-size"], limits["max-storage-buffer-binding-size"])
    self.align = limits["min-storage-buffer-offset-alignment"]
  def _alloc(self, size: int, options=None) -> WBuf:
    import wgpu
    if _r4(size) > self.max_size:
      raise MemoryError(f"WEBGPU: a buffer of {size} bytes exceeds this adapter's storage buffer limit of {self.max_size} bytes")
    u = wgpu.BufferUsage
    return WBuf(self.dev.create_buffer(size=_r4(size), usage=u.STORAGE | u.COPY_SRC | u.COPY_DST), 0, size)
  def _free(self, opaque: WBuf, size: int, options=None) -> None: opaque.buf.destroy()
  def _offset(self, opaque: WBuf, size: int, offset: int) -> WBuf: return WBuf(opaque.buf, opaque.offset + offset, size)
  def _copyin(self, dest: WBuf, src: memoryview) -> None:
    lo, n = dest.offset, src.nbytes
    a, b = lo & ~3, _r4(lo + n)
    if (a, b) == (lo, lo + n): self.dev.queue.write_buffer(dest.buf, lo, src); return
    # an unaligned start or end: patch the covering words (the bytes around belong to other views)
    words = bytearray(self.dev.queue.read_buffer(dest.buf, a, b - a)) if b - a <= dest.buf.size - a else bytearray(b - a)
    words[lo - a:lo - a + n] = src
    self.dev.queue.write_buffer(dest.buf, a, words)
  def _copyout(self, dest: memoryview, src: WBuf) -> None:
    lo, n = src.offset, dest.nbytes
    a, b = lo & ~3, min(_r4(lo + n), src.buf.size)
    dest[:] = memoryview(self.dev.queue.read_buffer(src.buf, a, b - a)).cast("B")[lo - a:lo - a + n]

def fold_grid(gs: tuple[int, ...]) -> tuple[int, int, int]:
  """Spread prod(gs) workgroups over x/y/z with each <= 65535; the kernel unfolds the flat id (renderer_wgsl)."""
  total = prod(gs)
  x = min(total, MAX_DIM)
  rest = -(-total // x)
  y = min(rest, MAX_DIM)
  z = -(-rest // y)
  if z > MAX_DIM: raise RuntimeError(f"WEBGPU: a grid of {gs} workgroups is more than 65535^3")
  return x, y, z

class WGPUProgram:
  def __init__(self, wdev: WebGPUDevice, name: str, lib: bytes):
    self.wdev, self.name, self.src = wdev, name, lib.decode()
    self.pipeline = self.layout = None
  def _build(self, nbufs: int):
    import wgpu
    d = self.wdev.dev
    st = wgpu.BufferBindingType
    entries = [{"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": st.storage}} for i in range(nbufs)]
    entries.append({"binding": nbufs, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": st.read_only_storage}})
    # an explicit layout: an auto layout would drop buffers the kernel never reads, yet the runtime binds every one
    self.layout = d.create_bind_group_layout(entries=entries)
    mod = d.create_shader_module(code=self.src)
    self.pipeline = d.create_compute_pipeline(layout=d.create_pipeline_layout(bind_group_layouts=[self.layout]),
                                              compute={"module": mod, "entry_point": "main"})
  def __call__(self, *bufs: WBuf, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, **kw):
    w = self.wdev
    if self.pipeline is None: self.pipeline, self.layout = w.pipelines.get(self.src, (None, None))
    if self.pipeline is None:
      self._build(len(bufs))
      w.pipelines[self.src] = (self.pipeline, self.layout)
    gs = tuple(int(g) for g in global_size) + (1,) * (3 - len(global_size))
    info = w.info_buffer(gs + tuple(int(v) for v in vals))
    ents = []
    for i, b in enumerate(bufs):
      if b.offset % w.allocator.align:
        raise RuntimeError(f"WEBGPU: a buffer view at byte offset {b.offset} can't be bound "
                           f"(storage offsets must be multiples of {w.allocator.align})")
      ents.append({"binding": i, "resource": {"buffer": b.buf, "offset": b.offset, "size": min(_r4(b.size), b.buf.size - b.offset)}})
    ents.append({"binding": len(bufs), "resource": {"buffer": info, "offset": 0, "size": info.size}})
    bg = w.dev.create_bind_group(layout=self.layout, entries=ents)
    enc = w.dev.create_command_encoder()
    ts = wait and w.query_set is not None
    cp = enc.begin_compute_pass(timestamp_writes={"query_set": w.query_set, "beginning_of_pass_write_index": 0,
                                                  "end_of_pass_write_index": 1} if ts else None)
    cp.set_pipeline(self.pipeline)
    cp.set_bind_group(0, bg)
    cp.dispatch_workgroups(*fold_grid(gs))
    cp.end()
    if ts: enc.resolve_query_set(w.query_set, 0, 2, w.query_buf, 0)
    st = time.perf_counter()
    w.dev.queue.submit([enc.finish()])
    if not wait: return None
    if ts:
      t0, t1 = np.frombuffer(w.dev.queue.read_buffer(w.query_buf), np.uint64)[:2]
      if t1 > t0: return float(t1 - t0) * 1e-9   # WebGPU timestamps are nanoseconds
    w.synchronize()   # no timestamp queries: wall time around submit..done (includes the submit overhead)
    return time.perf_counter() - st

class WebGPUDevice(Compiled):
  def __init__(self, device_name: str, renderer_name: str | None):
    import wgpu
    from tinycore_webgpu.adapter import device
    from tinycore_webgpu.renderer_wgsl import WGSLRenderer
    from tinycore_webgpu.compiler_wgsl import WGSLCompiler
    self.adapter, self.dev, self.features = device()
    if (renderer_name or "WGSL").upper() != "WGSL": raise ValueError(f"WEBGPU has no renderer {renderer_name!r}: use WGSL")
    self.pipelines: dict[str, tuple] = {}
    self._infos: dict[tuple, object] = {}
    self.query_set = self.query_buf = None
    if "timestamp-query" in self.features:
      self.query_set = self.dev.create_query_set(type=wgpu.QueryType.timestamp, count=2)
      self.query_buf = self.dev.create_buffer(size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
    r = WGSLRenderer(WGSLCompiler(self.dev), f16="shader-f16" in self.features)
    super().__init__(device_name, WGPUAllocator(self.dev, self.dev.limits), r, lambda name, lib: WGPUProgram(self, name, lib))
  def info_buffer(self, key: tuple):
    """The tc_info buffer (grid size, Variable values), one per distinct launch, kept for reuse."""
    if (b := self._infos.get(key)) is None:
      import wgpu
      if len(self._infos) > 4096: self._infos.clear()
      b = self._infos[key] = self.dev.create_buffer_with_data(data=np.array(key, np.int32).tobytes(), usage=wgpu.BufferUsage.STORAGE)
    return b
  def synchronize(self) -> None:
    # wgpuDevicePoll(wait=True) blocks until every submission is done; wgpu-py 0.32's on_submitted_work_done has a
    # broken callback signature, so the poll is the reliable wait
    if hasattr(self.dev, "_poll_wait"): self.dev._poll_wait()
    else: self.dev.queue.on_submitted_work_done_sync()
