"""The only place the KFD runtime meets the kernel: open, close, ioctl, mmap, munmap and where the topology lives.

`LinuxSyscalls` is the real thing (libc through ctypes). The mock driver (tinycore_amd.mockgpu, MOCKGPU=1) is another
object with the same methods, so every line of the runtime above this one runs unchanged against it."""
from __future__ import annotations
import ctypes, ctypes.util, functools, os
from tinycore_amd.kfd import ioctl as kio

PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE = 0x01, 0x02, 0x10, 0x20, 0x4000
MAP_FAILED = ctypes.c_void_p(-1).value

class KFDError(OSError):
  """An ioctl or mmap the driver refused; says which call and what the kernel answered."""

@functools.cache
def _libc() -> ctypes.CDLL:
  libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
  libc.ioctl.argtypes, libc.ioctl.restype = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p], ctypes.c_int
  libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
  libc.mmap.restype = ctypes.c_void_p
  libc.munmap.argtypes, libc.munmap.restype = [ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int
  return libc

def host_mmap(addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
  """libc mmap; raises KFDError instead of returning MAP_FAILED."""
  # KFD's mmap offsets use the top bits (the doorbell type is 3 << 62): off_t is signed, so pass the same 64 bits as one
  p = _libc().mmap(addr or None, length, prot, flags, fd, offset - (1 << 64) if offset >= 1 << 63 else offset)
  if p is None or p == MAP_FAILED:
    e = ctypes.get_errno()
    raise KFDError(e, f"mmap({length} bytes, fd {fd}, offset 0x{offset:x}) failed: {os.strerror(e)}")
  return p

def host_munmap(addr: int, length: int) -> None:
  if _libc().munmap(addr, length) != 0:
    e = ctypes.get_errno()
    raise KFDError(e, f"munmap(0x{addr:x}, {length}) failed: {os.strerror(e)}")

class LinuxSyscalls:
  """/dev/kfd and /dev/dri/renderD* of this machine."""
  topology_root = "/sys/class/kfd/kfd/topology/nodes"
  mock = False
  def open(self, path: str) -> int: return os.open(path, os.O_RDWR | os.O_CLOEXEC)
  def close(self, fd: int) -> None: os.close(fd)
  def ioctl(self, fd: int, request: int, arg: ctypes.Structure) -> None:
    if _libc().ioctl(fd, request, ctypes.addressof(arg)) < 0:
      e = ctypes.get_errno()
      raise KFDError(e, f"KFD ioctl {kio.NAMES.get(request, hex(request))} failed: {os.strerror(e)} ({arg!r})")
  def mmap(self, addr: int, length: int, prot: int, flags: int, fd: int = -1, offset: int = 0) -> int:
    return host_mmap(addr, length, prot, flags, fd, offset)
  def munmap(self, addr: int, length: int) -> None: host_munmap(addr, length)
