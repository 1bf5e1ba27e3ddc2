"""`DEV=KFD+AMD`: AMD GPUs driven straight through the amdgpu kernel driver's KFD interface, no ROCm.

Opening: /dev/kfd and the GPU's render node, GET_VERSION, ACQUIRE_VM (the render node's GPU VM becomes this process's),
the GPU's virtual aperture, one AQL compute queue. Buffers live in VRAM; copies go through a host-visible GTT staging
buffer and the blit kernel (blit.py). Code objects are loaded into GTT (loader.py) and run by AQL kernel-dispatch
packets whose kernarg segment (explicit arguments, then the hidden ones the metadata asks for) is written into a GTT
ring. With MOCKGPU=1 the syscalls go to the mock driver (tinycore_amd.mockgpu), which runs the kernels on the ISA
emulator. NOT yet run on AMD hardware: everything here is tested against the mock only."""
from __future__ import annotations
import ctypes, functools, os, time, weakref
from tinycore.device import Compiled, LRUAllocator, DeviceUnavailable
from tinycore_amd.kfd import aql, blit, ioctl as kio, loader
from tinycore_amd.kfd.memory import GPUMemory
from tinycore_amd.kfd.queue import AQLQueue
from tinycore_amd.kfd.syscalls import LinuxSyscalls
from tinycore_amd.topology import kfd_nodes

STAGING_BYTES = 8 << 20
KERNARG_BYTES = 4 << 20

def gpu_nodes(sys) -> list[dict]:
  """The KFD topology's GPU nodes, each with its gpu_id (the handle every ioctl names the GPU by)."""
  out = []
  for n in kfd_nodes(sys.topology_root):
    if not n.get("gfx"): continue
    try:
      with open(os.path.join(sys.topology_root, str(n["node"]), "gpu_id")) as f: n["gpu_id"] = int(f.read().strip())
    except (OSError, ValueError): continue
    if n["gpu_id"]: out.append(n)
  return out

def syscalls():
  """The process's syscall layer: the real kernel, or the mock driver when MOCKGPU=1 (the mock 'machine'). One object
  per process either way: KFD keeps one process per address space, and what is kept per layer (the /dev/kfd fd below,
  queue.py's signal event) is that process's. A second layer would open /dev/kfd again for the next GPU and have its
  CREATE_EVENT refused (one event page per process)."""
  if os.environ.get("MOCKGPU", "0") not in ("", "0"):
    from tinycore_amd.mockgpu.driver import shared_mock
    return shared_mock()
  return _linux()

@functools.cache
def _linux() -> LinuxSyscalls: return LinuxSyscalls()

# /dev/kfd's fd per syscall layer, keyed by the object itself: an id() outlives its object and is reused (a test's
# dead MockKFD and the next one at the same address shared an entry, so the new driver was never opened)
_kfd_fds: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

class KFDGPU:
  """One GPU opened through KFD: its memory, its AQL queue and the blit kernel."""
  def __init__(self, sys, node: dict):
    self.sys, self.node, self.arch = sys, node, node["gfx"]
    if sys not in _kfd_fds:   # one /dev/kfd per process: every GPU is a node of the same KFD process
      try: _kfd_fds[sys] = sys.open("/dev/kfd")
      except OSError as e: raise DeviceUnavailable(f"cannot open /dev/kfd: {e.strerror} (is this user in the 'render' group?)") from None
    self.kfd = _kfd_fds[sys]
    try: self.drm = sys.open(f"/dev/dri/renderD{node['drm_minor']}")
    except OSError as e: raise DeviceUnavailable(f"cannot open /dev/dri/renderD{node['drm_minor']}: {e.strerror}") from None
    v = kio.GetVersion()
    sys.ioctl(self.kfd, kio.GET_VERSION, v)
    if v.major_version != kio.MAJOR or v.minor_version < kio.MINOR_MIN:
      raise DeviceUnavailable(f"KFD interface {v.major_version}.{v.minor_version} is not supported (need {kio.MAJOR}.{kio.MINOR_MIN}+)")
    self.version = (v.major_version, v.minor_version)
    sys.ioctl(self.kfd, kio.ACQUIRE_VM, kio.AcquireVM(drm_fd=self.drm, gpu_id=node["gpu_id"]))
    aps = (kio.DeviceApertures * 16)()
    ap = kio.GetProcessAperturesNew(kfd_process_device_apertures_ptr=ctypes.addressof(aps), num_of_nodes=16)
    sys.ioctl(self.kfd, kio.GET_PROCESS_APERTURES_NEW, ap)
    mine = [a for a in aps[:ap.num_of_nodes] if a.gpu_id == node["gpu_id"]]
    if not mine: raise DeviceUnavailable(f"KFD reports no virtual aperture for GPU id {node['gpu_id']}")
    self.apertures = mine[0]
    self.mem = GPUMemory(sys, self.kfd, self.drm, node["gpu_id"], (mine[0].gpuvm_base, mine[0].gpuvm_limit))
    self.queue = AQLQueue(sys, self.kfd, self.mem, node)
    self.staging = self.mem.alloc(STAGING_BYTES, vram=False, cpu=True)
    self.staging_busy = -1                   # the last packet that reads or writes the staging buffer
    self.kernargs = self.mem.alloc(KERNARG_BYTES, vram=False, cpu=True, uncached=True)
    self.kernarg_at, self.kernarg_seq = 0, -1
    self.blit: KFDProgram | None = None
  def kernarg(self, data: bytes) -> int:
    """A 64-byte-aligned copy of `data` in the kernarg ring; wrapping waits for every packet that used the ring."""
    n = (len(data) + 63) // 64 * 64 or 64
    if n > KERNARG_BYTES: raise ValueError(f"kernel arguments of {len(data)} bytes exceed the {KERNARG_BYTES}-byte kernarg ring")
    if self.kernarg_at + n > KERNARG_BYTES:
      self.queue.wait(self.kernarg_seq)
      self.kernarg_at = 0
    va = self.kernargs.va + self.kernarg_at
    ctypes.memmove(va, data, len(data))
    self.kernarg_at += n
    return va
  def copy(self, dst: int, src: int, n: int) -> int:
    """Queues a GPU copy of n bytes; returns the packet's sequence number."""
    if self.blit is None:
      from tinycore_amd.compiler import AMDLLVMCompiler
      self.blit = KFDProgram(self, blit.NAME, AMDLLVMCompiler(self.arch).compile_cached(blit.SOURCE))
    return self.blit.submit((dst, src), (n,), (blit.grid(n), 1, 1), (blit.LANES, 1, 1))

class KFDAllocator(LRUAllocator):
  def __init__(self, gpu: KFDGPU):
    super().__init__()
    self.gpu, self.allocs = gpu, {}
  def _alloc(self, size: int, options=None) -> int:
    a = self.gpu.mem.alloc(size, vram=True)
    self.allocs[a.va] = a
    return a.va
  def _free(self, opaque: int, size: int, options=None) -> None:
    self.gpu.queue.synchronize()   # a queued kernel may still use it
    self.gpu.mem.free(self.allocs.pop(opaque))
  def _offset(self, opaque: int, size: int, offset: int) -> int: return opaque + offset
  def _copyin(self, dest: int, src: memoryview) -> None:
    g, data = self.gpu, src.tobytes() if src.readonly else None
    base = None if data is not None else ctypes.addressof((ctypes.c_char * src.nbytes).from_buffer(src))
    for off in range(0, src.nbytes, STAGING_BYTES):
      k = min(STAGING_BYTES, src.nbytes - off)
      g.queue.wait(g.staging_busy)
      ctypes.memmove(g.staging.va, data[off:off + k] if data is not None else base + off, k)
      g.staging_busy = g.copy(dest + off, g.staging.va, k)
  def _copyout(self, dest: memoryview, src: int) -> None:
    g = self.gpu
    base = ctypes.addressof((ctypes.c_char * dest.nbytes).from_buffer(dest))
    for off in range(0, dest.nbytes, STAGING_BYTES):
      k = min(STAGING_BYTES, dest.nbytes - off)
      g.staging_busy = g.copy(g.staging.va, src + off, k)
      g.queue.wait(g.staging_busy)
      ctypes.memmove(base + off, g.staging.va, k)

# hidden kernel arguments (code object v5 metadata value kinds) this runtime fills in; the rest are zero
def _hidden(kind: str, grid: tuple, block: tuple, apertures) -> int:
  ax = {"x": 0, "y": 1, "z": 2}
  if kind.startswith("hidden_block_count_"): return grid[ax[kind[-1]]]
  if kind.startswith("hidden_group_size_"): return block[ax[kind[-1]]]
  if kind == "hidden_grid_dims": return 3
  # the high halves of the LDS and scratch apertures, which flat addressing of __shared__/private memory needs
  if kind == "hidden_shared_base": return apertures.lds_base >> 32
  if kind == "hidden_private_base": return apertures.scratch_base >> 32
  return 0   # remainders (every work-group is full), offsets, heap, hostcall, queue pointers

class KFDProgram:
  """A code object loaded into GPU memory; called like every tinycore program (grid in work-groups)."""
  def __init__(self, gpu: KFDGPU, name: str, lib: bytes):
    from tinycore_amd.codeobject import read
    self.gpu, self.name = gpu, name
    co = read(lib)
    if co.arch != gpu.arch: raise RuntimeError(f"{name}: the code object is for {co.arch} but the GPU is {gpu.arch}")
    if (k := co.kernels.get(name)) is None:
      raise RuntimeError(f"{name}: the code object has no kernel of that name (it has {', '.join(co.kernels) or 'none'})")
    self.meta = k
    if k.private_segment_size and not gpu.sys.mock:
      # the CP needs per-queue scratch (amd_queue_t's scratch fields, set up by the HSA runtime on demand): not written yet
      raise RuntimeError(f"{name} uses {k.private_segment_size} bytes of scratch per lane, which this KFD runtime does not set up yet "
                         "(use DEV=HIP+AMD)")
    self.args = [(a[".offset"], a[".size"], a.get(".value_kind", "")) for a in k.args]
    self.n_explicit = sum(not kind.startswith("hidden_") for *_, kind in self.args)
    self.kernarg_size = max([k.kernarg_size] + [o + s for o, s, _ in self.args])
    self.code = gpu.mem.alloc(loader.file_offset(loader.parse(lib).size) + len(lib), vram=False, cpu=True, executable=True)
    image, img = loader.layout(lib, self.code.va)
    if name not in img.descriptors: raise RuntimeError(f"{name}: no kernel descriptor symbol {name}.kd in the code object")
    ctypes.memmove(self.code.va, image, len(image))
    self.kernel_object = self.code.va + img.descriptors[name]
  def kernargs(self, bufs, vals, grid, block) -> bytes:
    if self.n_explicit != len(bufs) + len(vals):
      raise RuntimeError(f"{self.name} takes {self.n_explicit} explicit arguments but was given {len(bufs)} buffers and {len(vals)} values")
    out, explicit = bytearray(self.kernarg_size), iter([*bufs, *vals])
    for off, size, kind in self.args:
      v = _hidden(kind, grid, block, self.gpu.apertures) if kind.startswith("hidden_") else next(explicit)
      out[off:off + size] = (int(v) & ((1 << 8 * size) - 1)).to_bytes(size, "little")
    return bytes(out)
  def submit(self, bufs, vals, grid, block) -> int:
    for what, dims, lim in (("grid", grid, 2**32 - 1), ("work-group", block, 1024)):
      if any(not 1 <= d <= lim for d in dims): raise ValueError(f"{self.name}: {what} size {dims} is out of range (1..{lim} each)")
    if grid[0] * block[0] >= 2**32 or grid[1] * block[1] >= 2**32 or grid[2] * block[2] >= 2**32:
      raise ValueError(f"{self.name}: grid {grid} x work-group {block} exceeds 2**32 work-items in a dimension")
    ka = self.gpu.kernarg(self.kernargs(bufs, vals, grid, block))
    body = aql.dispatch_body(tuple(g * b for g, b in zip(grid, block)), block, self.meta.private_segment_size,
                             self.meta.group_segment_size, self.kernel_object, ka, 0)
    seq = self.gpu.queue.submit(aql.TYPE_KERNEL_DISPATCH, body)
    self.gpu.kernarg_seq = seq
    return seq
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, **kw):
    gs, ls = tuple((*(global_size or ()), 1, 1, 1)[:3]), tuple((*(local_size or ()), 1, 1, 1)[:3])
    t0 = time.perf_counter()
    seq = self.submit(bufs, vals, gs, ls)
    if wait:
      self.gpu.queue.wait(seq)
      return time.perf_counter() - t0   # host-measured: submit to completion
    return None
  def __del__(self):
    try:
      self.gpu.queue.synchronize()
      self.gpu.mem.free(self.code)
    except Exception: pass

class KFDDevice(Compiled):
  def __init__(self, device_name: str, gpu: KFDGPU, renderer):
    self.gpu = gpu
    super().__init__(device_name, KFDAllocator(gpu), renderer, lambda name, lib: KFDProgram(gpu, name, lib))
  def synchronize(self) -> None: self.gpu.queue.synchronize()

# the opened GPUs by (topology GPU id, syscall layer), which is the layer object itself, not its id(): held here, it
# cannot die and have its id() reused by a new driver. Not weak like _kfd_fds: each KFDGPU holds its layer (self.sys),
# so a weak key would never be dropped anyway; opened GPUs are never closed, they last as long as the process.
_gpus: dict[tuple[int, object], KFDGPU] = {}
def open_kfd(device_name: str, spec) -> KFDDevice:
  sys = syscalls()
  if sys.mock: sys.configure(spec.arch)
  elif not os.path.exists("/dev/kfd"): raise DeviceUnavailable("the amdgpu kernel driver is not loaded (no /dev/kfd); MOCKGPU=1 runs a mock one")
  nodes = gpu_nodes(sys)
  if sys.mock and spec.arch: nodes = [n for n in nodes if n["gfx"] == spec.arch.split(":")[0].lower()]   # the mock's GPU of that arch
  phys = spec.physical(int(device_name.partition(":")[2] or 0))
  if phys >= len(nodes): raise DeviceUnavailable(f"GPU {phys} requested but the KFD topology lists {len(nodes)}")
  node = nodes[phys]
  if spec.arch and spec.arch.split(":")[0].lower() != node["gfx"]:
    raise DeviceUnavailable(f"DEV asks for {spec.arch} but KFD GPU {phys} is {node['gfx']}")
  if (key := (node["gpu_id"], sys)) not in _gpus: _gpus[key] = KFDGPU(sys, node)
  from tinycore.renderer.build import build_renderer
  return KFDDevice(device_name, _gpus[key], build_renderer(spec, arch=node["gfx"]))
