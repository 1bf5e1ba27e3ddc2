"""The mock KFD driver: the same methods as kfd.syscalls.LinuxSyscalls (open, close, ioctl, mmap, munmap, the topology
root), answered the way amdgpu's KFD answers them, for GPUs of the archs it is configured with.

What it checks, as the kernel would: ioctl argument sizes come from the request number, GPU ids must be acquired, a
VA given to ALLOC_MEMORY_OF_GPU must lie in a range this process reserved and overlap no allocation, the render-node
mmap must name an allocation's offset at that allocation's address, queue rings must be mapped GTT, and munmap
refuses memory KFD still holds. Everything it cannot run raises an error naming the call, never a crash.
Address space is real host address space (reservations are real mmaps), so the runtime's pointers are real pointers."""
from __future__ import annotations
import atexit, ctypes, errno, functools, os
from tinycore.device import DeviceUnavailable
from tinycore_amd.kfd import ioctl as kio
from tinycore_amd.kfd.syscalls import KFDError, host_mmap, host_munmap, PROT_NONE, PROT_READ, PROT_WRITE, MAP_SHARED, MAP_PRIVATE, \
  MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE
from tinycore_amd.mockgpu.cp import CommandProcessor, MockGPUError, MockQueue
from tinycore_amd.mockgpu.memory import MockGPUMemory, Region
from tinycore_amd.mockgpu.topology import PARTS, write_tree

KFD_FD, RENDER_FD_BASE = 1 << 20, (1 << 20) + 16
DOORBELL_PAGE = 8192
GPUVM_BASE, GPUVM_LIMIT = 1 << 16, (1 << 47) - 1
LDS_BASE, SCRATCH_BASE = 1 << 48, 2 << 48     # where gfx9+ KFD puts the LDS and scratch apertures

def _default_dispatch(*a):
  try: from tinycore_amd.isa import dispatch
  except ImportError as e: raise MockGPUError(f"the RDNA ISA emulator (tinycore_amd.isa) is not available: {e}") from None
  return dispatch(*a)

class MockKFD:
  mock = True
  def __init__(self, archs: tuple[str, ...] = ("gfx1100",), dispatch=None):
    self.mem = MockGPUMemory()
    self.cp = CommandProcessor(self.mem, dispatch or _default_dispatch, self._signal_event)
    self.archs: list[str] = []
    self.fds: dict[int, str] = {}
    self.acquired: set[int] = set()
    self.reservations: dict[int, int] = {}       # va -> size of PROT_NONE ranges this process reserved
    self.offsets: dict[int, Region] = {}         # render-node mmap offset -> allocation
    self.handles: dict[int, Region] = {}
    self.queues: dict[int, MockQueue] = {}
    self.event_page: Region | None = None
    self.events: dict[int, bool] = {}            # event id -> signaled
    self.next_handle = 1
    self.errors: list[str] = []
    for a in archs: self.configure(a)

  # ***** topology
  def configure(self, arch: str | None) -> None:
    """Makes sure a GPU of `arch` exists (the first GPU's arch when None)."""
    arch = (arch or (self.archs[0] if self.archs else "gfx1100")).split(":")[0].lower()
    if arch not in PARTS: raise DeviceUnavailable(f"the mock GPU driver models {', '.join(PARTS)}, not {arch}")
    if arch not in self.archs:
      self.archs.append(arch)
      self.topology_root = write_tree(self.archs)
  def nodes(self) -> dict[int, dict]:
    """gpu_id -> {'gfx', 'minor'} of the GPUs the topology lists."""
    from tinycore_amd.mockgpu.topology import GPU_ID_BASE, RENDER_MINOR_BASE
    return {GPU_ID_BASE + i: {"gfx": a, "minor": RENDER_MINOR_BASE + i - 1} for i, a in enumerate(self.archs, 1)}

  # ***** files
  def open(self, path: str) -> int:
    if path == "/dev/kfd":
      self.fds[KFD_FD] = path
      return KFD_FD
    for gid, n in self.nodes().items():
      if path == f"/dev/dri/renderD{n['minor']}":
        fd = RENDER_FD_BASE + n["minor"]
        self.fds[fd] = path
        return fd
    raise FileNotFoundError(errno.ENOENT, f"mock KFD: no such device {path}")
  def close(self, fd: int) -> None:
    if self.fds.pop(fd, None) is None: raise KFDError(errno.EBADF, f"mock KFD: close of fd {fd}, which is not open")

  # ***** ioctls
  def ioctl(self, fd: int, request: int, arg: ctypes.Structure) -> None:
    name = kio.NAMES.get(request)
    if fd != KFD_FD or fd not in self.fds: raise KFDError(errno.EBADF, f"mock KFD: ioctl {name or hex(request)} on fd {fd}, not /dev/kfd")
    if name is None: raise KFDError(errno.ENOTTY, f"mock KFD: ioctl 0x{request:x} is not one this driver answers")
    if ctypes.sizeof(arg) != (request >> 16) & 0x3fff:
      raise KFDError(errno.EINVAL, f"mock KFD: {name} given a {ctypes.sizeof(arg)}-byte argument, the request encodes {(request >> 16) & 0x3fff}")
    getattr(self, "_" + name.lower())(arg)

  def _fail(self, code: int, what: str): raise KFDError(code, f"mock KFD: {what}")
  def _gpu(self, gpu_id: int, acquired: bool = True) -> dict:
    if (n := self.nodes().get(gpu_id)) is None: self._fail(errno.EINVAL, f"no GPU with id {gpu_id}")
    if acquired and gpu_id not in self.acquired: self._fail(errno.EINVAL, f"GPU {gpu_id} used before ACQUIRE_VM")
    return n

  def _get_version(self, a): a.major_version, a.minor_version = 1, 11
  def _acquire_vm(self, a):
    n = self._gpu(a.gpu_id, acquired=False)
    if self.fds.get(a.drm_fd) != f"/dev/dri/renderD{n['minor']}":
      self._fail(errno.EINVAL, f"ACQUIRE_VM: fd {a.drm_fd} is not GPU {a.gpu_id}'s render node")
    self.acquired.add(a.gpu_id)
  def _get_process_apertures_new(self, a):
    gpus = [g for g in self.nodes() if g in self.acquired]
    if a.num_of_nodes < len(gpus): self._fail(errno.ENOSPC, "GET_PROCESS_APERTURES_NEW: array too small")
    arr = (kio.DeviceApertures * len(gpus)).from_address(a.kfd_process_device_apertures_ptr) if gpus else []
    for i, g in enumerate(gpus): arr[i] = kio.DeviceApertures(lds_base=LDS_BASE, lds_limit=LDS_BASE + (1 << 32) - 1, scratch_base=SCRATCH_BASE,
                                   scratch_limit=SCRATCH_BASE + (1 << 32) - 1, gpuvm_base=GPUVM_BASE, gpuvm_limit=GPUVM_LIMIT, gpu_id=g)
    a.num_of_nodes = len(gpus)

  def _alloc_memory_of_gpu(self, a):
    self._gpu(a.gpu_id)
    kinds = a.flags & (kio.MEM_VRAM | kio.MEM_GTT | kio.MEM_USERPTR | kio.MEM_DOORBELL)
    if kinds not in (kio.MEM_VRAM, kio.MEM_GTT): self._fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU: flags 0x{a.flags:x} (the mock has VRAM and GTT)")
    if a.size == 0 or a.size % 4096 or a.va_addr % 4096:
      self._fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU: size {a.size} / va 0x{a.va_addr:x} not page-aligned")
    if not any(v <= a.va_addr and a.va_addr + a.size <= v + s for v, s in self.reservations.items()):
      self._fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU: va 0x{a.va_addr:x}+{a.size} is not in an address range this process reserved")
    vram = kinds == kio.MEM_VRAM
    if not vram: host_mmap(a.va_addr, a.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_ANONYMOUS)   # GTT: host pages
    r = Region(a.va_addr, a.size, vram, self.next_handle)
    try: self.mem.add(r)
    except ValueError as e: self._fail(errno.EINVAL, f"ALLOC_MEMORY_OF_GPU: {e}")
    self.next_handle += 1
    a.handle, a.mmap_offset = r.handle, r.handle << 32
    self.handles[r.handle], self.offsets[a.mmap_offset] = r, r
  def _region(self, handle: int) -> Region:
    if (r := self.handles.get(handle)) is None: self._fail(errno.EINVAL, f"no allocation with handle {handle}")
    return r
  def _map_memory_to_gpu(self, a, mapped=True):
    r = self._region(a.handle)
    if not 1 <= a.n_devices <= 8: self._fail(errno.EINVAL, f"{a.n_devices} devices")
    for g in (ctypes.c_uint32 * a.n_devices).from_address(a.device_ids_array_ptr): self._gpu(g)
    r.mapped, a.n_success = mapped, a.n_devices
  def _unmap_memory_from_gpu(self, a): self._map_memory_to_gpu(a, mapped=False)
  def _free_memory_of_gpu(self, a):
    r = self._region(a.handle)
    if r is self.event_page and self.events: self._fail(errno.EBUSY, "FREE_MEMORY_OF_GPU: the event page is in use by events")
    if any(q.ring >= r.va and q.ring < r.va + r.size for q in self.queues.values()): self._fail(errno.EBUSY, "FREE_MEMORY_OF_GPU: a queue's ring")
    self.mem.remove(r.va)
    del self.handles[r.handle], self.offsets[r.handle << 32]
    if not r.vram: host_mmap(r.va, r.size, PROT_NONE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS | MAP_NORESERVE)   # back to a reservation

  def _create_event(self, a):
    if a.event_type != kio.EVENT_SIGNAL: self._fail(errno.EINVAL, f"CREATE_EVENT: event type {a.event_type} (the mock has signal events)")
    if a.event_page_offset:
      if self.event_page is not None: self._fail(errno.EINVAL, "CREATE_EVENT: the event page is already set (one per process)")
      if (r := self.handles.get(a.event_page_offset)) is None or r.vram or r.size < kio.SIGNAL_EVENT_LIMIT * 8:
        self._fail(errno.EINVAL, "CREATE_EVENT: the event page must be a GTT allocation of 4096 slots, named by its handle")
      self.event_page = r
    elif self.event_page is None: self._fail(errno.EINVAL, "CREATE_EVENT: the first signal event must name the event page")
    slot = next(i for i in range(1, kio.SIGNAL_EVENT_LIMIT + 1) if i not in self.events)
    if slot >= kio.SIGNAL_EVENT_LIMIT: self._fail(errno.ENOSPC, "CREATE_EVENT: out of event slots")
    self.events[slot] = False
    a.event_id, a.event_slot_index, a.event_trigger_data = slot, slot, slot
  def _destroy_event(self, a):
    if self.events.pop(a.event_id, None) is None: self._fail(errno.EINVAL, f"DESTROY_EVENT: no event {a.event_id}")
  def _signal_event(self, event_id: int) -> None:
    if event_id in self.events: self.events[event_id] = True
  def _wait_events(self, a):
    if not 1 <= a.num_events <= kio.SIGNAL_EVENT_LIMIT: self._fail(errno.EINVAL, f"WAIT_EVENTS: {a.num_events} events")
    ids = [e.event_id for e in (kio.EventData * a.num_events).from_address(a.events_ptr)]
    if (bad := [i for i in ids if i not in self.events]): self._fail(errno.EINVAL, f"WAIT_EVENTS: no event {bad[0]}")
    self.run()   # the mock GPU works while the host sleeps
    hit = [self.events[i] for i in ids]
    a.wait_result = kio.WAIT_COMPLETE if (all(hit) if a.wait_for_all else any(hit)) else kio.WAIT_TIMEOUT
    for i in ids: self.events[i] = False   # auto-reset
  def run(self) -> None:
    """Processes every queue's announced packets; a packet that failed is raised here, once."""
    for q in self.queues.values(): self.errors += self.cp.run(q)
    if self.errors:
      errs, self.errors = self.errors, []
      raise MockGPUError("the mock GPU failed to run " + "; ".join(errs))

  def _create_queue(self, a):
    n = self._gpu(a.gpu_id)
    if a.queue_type != kio.QUEUE_TYPE_COMPUTE_AQL: self._fail(errno.EINVAL, f"CREATE_QUEUE: queue type {a.queue_type} (the mock runs AQL queues)")
    if a.ring_size < 1024 or a.ring_size & (a.ring_size - 1): self._fail(errno.EINVAL, f"CREATE_QUEUE: ring size {a.ring_size}")
    for what, addr, size in (("ring", a.ring_base_address, a.ring_size), ("read pointer", a.read_pointer_address, 8),
                             ("write pointer", a.write_pointer_address, 8), ("EOP buffer", a.eop_buffer_address, a.eop_buffer_size),
                             ("context save area", a.ctx_save_restore_address, a.ctx_save_restore_size)):
      try: r = self.mem.region_of(addr, max(size, 1))
      except Exception: self._fail(errno.EFAULT, f"CREATE_QUEUE: the {what} at 0x{addr:x}+{size} is not mapped GPU memory")
      if what in ("ring", "read pointer", "write pointer") and r.vram: self._fail(errno.EINVAL, f"CREATE_QUEUE: the {what} must be in GTT")
    qid = len(self.queues) and max(self.queues) + 1
    off = (3 << 62) | (a.gpu_id << 46)
    self.queues[qid] = MockQueue(qid, {**n, "gpu_id": a.gpu_id}, a.ring_base_address, a.ring_size, a.read_pointer_address,
                                 a.write_pointer_address, off)
    a.queue_id, a.doorbell_offset = qid, off | (qid * 8)
  def _destroy_queue(self, a):
    if self.queues.pop(a.queue_id, None) is None: self._fail(errno.EINVAL, f"DESTROY_QUEUE: no queue {a.queue_id}")

  # ***** memory maps
  def mmap(self, addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
    if fd == -1:
      va = host_mmap(addr, length, prot, flags)
      if prot == PROT_NONE: self.reservations[va] = length
      return va
    if fd == KFD_FD:
      qs = [q for q in self.queues.values() if q.doorbell_offset == offset]
      if not qs or length != DOORBELL_PAGE: self._fail(errno.EINVAL, f"mmap of /dev/kfd at offset 0x{offset:x}, length {length}: not a doorbell page")
      page = host_mmap(0, DOORBELL_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS)
      for q in qs: q.doorbell = page + (q.queue_id * 8)
      return page
    if fd in self.fds:
      r = self.offsets.get(offset)
      if r is None or r.vram: self._fail(errno.EINVAL, f"mmap of the render node at offset 0x{offset:x}: no host-mappable allocation there")
      if addr != r.va or length != r.size or not flags & MAP_FIXED:
        self._fail(errno.EINVAL, f"mmap of allocation 0x{r.va:x}+{r.size} must be MAP_FIXED at its address with its size")
      return r.va   # GTT pages are already at that address
    self._fail(errno.EBADF, f"mmap of fd {fd}")
  def munmap(self, addr: int, length: int) -> None:
    live = [r for r in self.mem.regions.values() if r.va < addr + length and addr < r.va + r.size]
    if live: self._fail(errno.EBUSY, f"munmap(0x{addr:x}, {length}) over GPU memory KFD still holds (free it first)")
    self.reservations.pop(addr, None)
    for q in self.queues.values():
      if q.doorbell and addr <= q.doorbell < addr + length: q.doorbell = 0
    host_munmap(addr, length)

@functools.cache
def shared_mock() -> MockKFD:
  """The process's mock machine (MOCKGPU=1); GPUs appear for each arch DEV asks for. With MOCKGPU_STATS=DIR it writes
  what the emulator ran (dispatches, instructions, opcodes executed and emitted) to DIR at exit."""
  m = MockKFD(archs=())
  if (d := os.environ.get("MOCKGPU_STATS")): atexit.register(m.cp.coverage.dump, d)
  return m
