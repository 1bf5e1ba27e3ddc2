"""An AQL compute queue and its completion signals: the ring of 64-byte packets KFD's CREATE_QUEUE hands to the
command processor, the read/write dispatch indices, the doorbell, and a timeline of signals (one per packet, in
submission order) that synchronize() and the copies wait on.

Every packet has its barrier bit set, so the queue runs them in order: a kernel sees the copies and kernels before it.
Waiting reads the signal's value and, while it is not done, sleeps in WAIT_EVENTS on the event the packet processor
raises when it completes a signal whose mailbox is set (interrupt signals, as the HSA runtime uses)."""
from __future__ import annotations
import ctypes, os, struct, time, weakref
from dataclasses import dataclass
from tinycore_amd.kfd import aql, ioctl as kio
from tinycore_amd.kfd.memory import GPUAlloc, GPUMemory
from tinycore_amd.kfd.syscalls import PROT_READ, PROT_WRITE, MAP_SHARED

RING_BYTES = 64 * 1024          # 1024 packets
SIGNALS = 1024                  # completion signals in the pool (a slot is reused once the packet that had it is done)
DOORBELL_PAGE = 8192            # gfx9+ doorbell page per process
EOP_BYTES = 4096
TIMEOUT_S = float(os.environ.get("TINYCORE_KFD_TIMEOUT", "120"))

class GPUHang(RuntimeError):
  """A packet did not complete in TINYCORE_KFD_TIMEOUT seconds."""

def _cwsr_sizes(node: dict) -> tuple[int, int]:
  """(ctx_save_restore_size, ctl_stack_size): room for the state of every wave the CUs can hold, which the CP saves
  there on preemption. Sized generously from the CU count (the exact formula is the thunk's and varies per gfx)."""
  cus, waves = max(node.get("compute_units") or 1, 1), 32
  ctl = (cus * waves * 12 + 40 + 4095) // 4096 * 4096
  return ctl + cus * (512 * 1024 + 64 * 1024 + 4096), ctl

@dataclass
class ProcessEvent:
  page: GPUAlloc          # the event page: a mailbox slot per event
  event_id: int
  mailbox: int
  gpus: set               # GPU ids the page is mapped on

# per syscalls object (one KFD process), keyed by the object: a dead mock driver's id() is reused by the next one
_events: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

def process_event(sys, kfd_fd: int, mem: GPUMemory) -> tuple[int, int]:
  """(event id, mailbox address) of the process's one signal event, shared by every queue of every GPU. KFD takes one
  event page per process (a second one is EINVAL): the first CREATE_EVENT names our GTT page by its handle, and the
  page is mapped on each GPU whose packet processor writes mailboxes into it."""
  if (ev := _events.get(sys)) is None:
    page = mem.alloc(kio.SIGNAL_EVENT_LIMIT * 8, vram=False, cpu=True, uncached=True)
    args = kio.CreateEvent(event_page_offset=page.handle, event_type=kio.EVENT_SIGNAL, auto_reset=1)
    sys.ioctl(kfd_fd, kio.CREATE_EVENT, args)
    _events[sys] = ev = ProcessEvent(page, args.event_id, page.va + 8 * args.event_slot_index, {mem.gpu_id})
  if mem.gpu_id not in ev.gpus:
    ids = (ctypes.c_uint32 * 1)(mem.gpu_id)
    sys.ioctl(kfd_fd, kio.MAP_MEMORY_TO_GPU, kio.MapMemory(handle=ev.page.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1))
    ev.gpus.add(mem.gpu_id)
  return ev.event_id, ev.mailbox

class AQLQueue:
  def __init__(self, sys, kfd_fd: int, mem: GPUMemory, node: dict):
    self.sys, self.kfd, self.mem = sys, kfd_fd, mem
    self.ring = mem.alloc(RING_BYTES, vram=False, cpu=True, uncached=True)
    self.ctl = mem.alloc(4096, vram=False, cpu=True, uncached=True)           # read/write dispatch ids (u64 each)
    self.eop = mem.alloc(EOP_BYTES, vram=True)
    cwsr, ctl_stack = _cwsr_sizes(node)
    self.cwsr = mem.alloc(cwsr, vram=False)
    self.signals = mem.alloc(SIGNALS * aql.SIGNAL_SIZE, vram=False, cpu=True, uncached=True)
    self.allocs = [self.ring, self.ctl, self.eop, self.cwsr, self.signals]
    self.rptr, self.wptr = self.ctl.va, self.ctl.va + 8
    ctypes.memset(self.ring.va, 0, self.ring.size)
    for i in range(RING_BYTES // aql.PACKET_SIZE): ctypes.c_uint16.from_address(self.ring.va + i * aql.PACKET_SIZE).value = aql.TYPE_INVALID
    self.event_id, self.mailbox = process_event(sys, kfd_fd, mem)
    args = kio.CreateQueue(ring_base_address=self.ring.va, write_pointer_address=self.wptr, read_pointer_address=self.rptr,
                           ring_size=RING_BYTES, gpu_id=mem.gpu_id, queue_type=kio.QUEUE_TYPE_COMPUTE_AQL,
                           queue_percentage=kio.MAX_QUEUE_PERCENTAGE, queue_priority=7, eop_buffer_address=self.eop.va,
                           eop_buffer_size=EOP_BYTES, ctx_save_restore_address=self.cwsr.va, ctx_save_restore_size=cwsr, ctl_stack_size=ctl_stack)
    sys.ioctl(kfd_fd, kio.CREATE_QUEUE, args)
    self.queue_id = args.queue_id
    page = args.doorbell_offset & kio.MMAP_DOORBELL_PAGE_MASK
    self.doorbell_page = sys.mmap(0, DOORBELL_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, kfd_fd, page)
    self.doorbell = self.doorbell_page + (args.doorbell_offset - page)
    self.next = 0                 # write index of the next packet == sequence number of the next signal
    self.done = 0                 # every packet below this index is known complete
    self.ring_packets = RING_BYTES // aql.PACKET_SIZE

  def _signal(self, seq: int) -> int: return self.signals.va + (seq % SIGNALS) * aql.SIGNAL_SIZE
  def submit(self, kind: int, body: bytes) -> int:
    """Writes one packet with a fresh completion signal and rings the doorbell; returns its sequence number."""
    seq = self.next
    if seq - self.done >= min(self.ring_packets, SIGNALS): self.wait(seq - min(self.ring_packets, SIGNALS))   # ring slot and signal free
    sig = self._signal(seq)
    struct.pack_into("<qqQIIQQQ", (ctypes.c_char * aql.SIGNAL_SIZE).from_address(sig), 0, aql.SIGNAL_KIND_USER, 1, self.mailbox,
                     self.event_id, 0, 0, 0, 0)
    slot = self.ring.va + (seq % self.ring_packets) * aql.PACKET_SIZE
    full = bytearray(body)
    full[-8:] = sig.to_bytes(8, "little")          # completion_signal is the last field of both packet kinds
    ctypes.memmove(slot + 4, bytes(full), aql.PACKET_SIZE - 4)
    setup = aql.SETUP_DIMS if kind == aql.TYPE_KERNEL_DISPATCH else 0
    ctypes.c_uint32.from_address(slot).value = aql.header(kind) | setup << 16   # header last: the packet becomes valid
    self.next = seq + 1
    ctypes.c_uint64.from_address(self.wptr).value = self.next
    ctypes.c_uint64.from_address(self.doorbell).value = seq   # the HSA doorbell takes the index of the packet written
    return seq
  def complete(self, seq: int) -> bool:
    return seq < self.done or ctypes.c_int64.from_address(self._signal(seq) + aql.SIG_VALUE).value <= 0
  def wait(self, seq: int, timeout: float = TIMEOUT_S) -> None:
    if seq < self.done: return
    data = kio.EventData(event_id=self.event_id)
    deadline = time.monotonic() + timeout
    while not self.complete(seq):
      if time.monotonic() > deadline: raise GPUHang(f"AQL packet {seq} did not complete in {timeout:.0f} s (TINYCORE_KFD_TIMEOUT)")
      self.sys.ioctl(self.kfd, kio.WAIT_EVENTS, kio.WaitEvents(events_ptr=ctypes.addressof(data), num_events=1, wait_for_all=1, timeout=100))
    self.done = max(self.done, seq + 1)   # in order: everything before it is done too
  def synchronize(self) -> None:
    if self.next: self.wait(self.next - 1)
  def destroy(self) -> None:
    self.sys.ioctl(self.kfd, kio.DESTROY_QUEUE, kio.DestroyQueue(queue_id=self.queue_id))
    self.sys.munmap(self.doorbell_page, DOORBELL_PAGE)
    for a in self.allocs: self.mem.free(a)
