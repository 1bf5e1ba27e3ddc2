"""The KFD ioctl ABI (/dev/kfd) as ctypes structures: only the calls this runtime makes.

Written from the Linux uapi header include/uapi/linux/kfd_ioctl.h, KFD_IOCTL_MAJOR_VERSION 1 / MINOR_VERSION 11 (the
header Linux 6.1 ships, Debian's linux-libc-dev 6.1). Every structure used here is unchanged in later 1.x headers;
newer fields are appended at the end of structures this runtime does not use."""
from __future__ import annotations
import ctypes

u32, u64 = ctypes.c_uint32, ctypes.c_uint64
MAJOR, MINOR_MIN = 1, 2   # ACQUIRE_VM and ALLOC_MEMORY_OF_GPU exist since 1.2

class _S(ctypes.Structure):
  def __repr__(self): return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)}' for n, _ in self._fields_)})"

class GetVersion(_S): _fields_ = [("major_version", u32), ("minor_version", u32)]
class CreateQueue(_S):
  _fields_ = [("ring_base_address", u64), ("write_pointer_address", u64), ("read_pointer_address", u64), ("doorbell_offset", u64),
              ("ring_size", u32), ("gpu_id", u32), ("queue_type", u32), ("queue_percentage", u32), ("queue_priority", u32),
              ("queue_id", u32), ("eop_buffer_address", u64), ("eop_buffer_size", u64), ("ctx_save_restore_address", u64),
              ("ctx_save_restore_size", u32), ("ctl_stack_size", u32)]
class DestroyQueue(_S): _fields_ = [("queue_id", u32), ("pad", u32)]
class CreateEvent(_S):
  _fields_ = [("event_page_offset", u64), ("event_trigger_data", u32), ("event_type", u32), ("auto_reset", u32), ("node_id", u32),
              ("event_id", u32), ("event_slot_index", u32)]
class DestroyEvent(_S): _fields_ = [("event_id", u32), ("pad", u32)]
class EventData(_S):
  # the union of the memory / hw exception records is 32 bytes (memory_exception_data is the larger member)
  _fields_ = [("exception", ctypes.c_uint8 * 32), ("kfd_event_data_ext", u64), ("event_id", u32), ("pad", u32)]
class WaitEvents(_S): _fields_ = [("events_ptr", u64), ("num_events", u32), ("wait_for_all", u32), ("timeout", u32), ("wait_result", u32)]
class AcquireVM(_S): _fields_ = [("drm_fd", u32), ("gpu_id", u32)]
class AllocMemory(_S):
  _fields_ = [("va_addr", u64), ("size", u64), ("handle", u64), ("mmap_offset", u64), ("gpu_id", u32), ("flags", u32)]
class FreeMemory(_S): _fields_ = [("handle", u64)]
class MapMemory(_S): _fields_ = [("handle", u64), ("device_ids_array_ptr", u64), ("n_devices", u32), ("n_success", u32)]
class DeviceApertures(_S):
  _fields_ = [("lds_base", u64), ("lds_limit", u64), ("scratch_base", u64), ("scratch_limit", u64), ("gpuvm_base", u64),
              ("gpuvm_limit", u64), ("gpu_id", u32), ("pad", u32)]
class GetProcessAperturesNew(_S): _fields_ = [("kfd_process_device_apertures_ptr", u64), ("num_of_nodes", u32), ("pad", u32)]

# _IOC(dir, 'K', nr, size) from asm-generic/ioctl.h: nr bits 0-7, type 8-15, size 16-29, direction 30-31 (1 write, 2 read)
def _ioc(direction: int, nr: int, st) -> int: return (direction << 30) | (ctypes.sizeof(st) << 16) | (ord("K") << 8) | nr
W, R, RW = 1, 2, 3
GET_VERSION = _ioc(R, 0x01, GetVersion)
CREATE_QUEUE = _ioc(RW, 0x02, CreateQueue)
DESTROY_QUEUE = _ioc(RW, 0x03, DestroyQueue)
CREATE_EVENT = _ioc(RW, 0x08, CreateEvent)
DESTROY_EVENT = _ioc(W, 0x09, DestroyEvent)
WAIT_EVENTS = _ioc(RW, 0x0C, WaitEvents)
GET_PROCESS_APERTURES_NEW = _ioc(RW, 0x14, GetProcessAperturesNew)
ACQUIRE_VM = _ioc(W, 0x15, AcquireVM)
ALLOC_MEMORY_OF_GPU = _ioc(RW, 0x16, AllocMemory)
FREE_MEMORY_OF_GPU = _ioc(W, 0x17, FreeMemory)
MAP_MEMORY_TO_GPU = _ioc(RW, 0x18, MapMemory)
UNMAP_MEMORY_FROM_GPU = _ioc(RW, 0x19, MapMemory)
NAMES = {v: k for k, v in globals().items() if k.isupper() and isinstance(v, int) and v > 0xffff}

QUEUE_TYPE_COMPUTE_AQL = 2
MAX_QUEUE_PERCENTAGE, MAX_QUEUE_PRIORITY = 100, 15
EVENT_SIGNAL = 0
SIGNAL_EVENT_LIMIT = 4096          # event slots in the event page (8 bytes each)
WAIT_COMPLETE, WAIT_TIMEOUT, WAIT_FAIL = 0, 1, 2
# ALLOC_MEMORY_OF_GPU flags
MEM_VRAM, MEM_GTT, MEM_USERPTR, MEM_DOORBELL = 1 << 0, 1 << 1, 1 << 2, 1 << 3
MEM_WRITABLE, MEM_EXECUTABLE, MEM_PUBLIC, MEM_NO_SUBSTITUTE = 1 << 31, 1 << 30, 1 << 29, 1 << 28
MEM_AQL_QUEUE_MEM, MEM_COHERENT, MEM_UNCACHED = 1 << 27, 1 << 26, 1 << 25
# mmap offsets of /dev/kfd: the doorbell page of a process is at KFD_MMAP_TYPE_DOORBELL (3 << 62) | gpu_id << 46; CREATE_QUEUE
# returns that offset with the queue's byte offset inside the page in its low bits (KFD 1.x)
MMAP_DOORBELL_PAGE_MASK = ~((1 << 13) - 1)
