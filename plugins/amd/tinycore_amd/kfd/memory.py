"""GPU memory through KFD: a CPU virtual-address range is reserved, KFD allocates VRAM or GTT (system memory the GPU
reaches over PCIe) at that same address (ALLOC_MEMORY_OF_GPU with va_addr), maps it into the GPU's page tables
(MAP_MEMORY_TO_GPU) and, for memory the host touches, the render node's mmap places it at that address on the CPU
side too. One address then means the same bytes to the CPU and the GPU."""
from __future__ import annotations
import ctypes
from dataclasses import dataclass
from tinycore_amd.kfd import ioctl as kio
from tinycore_amd.kfd.syscalls import PROT_NONE, PROT_READ, PROT_WRITE, MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE

PAGE = 4096

@dataclass
class GPUAlloc:
  va: int
  size: int
  handle: int
  vram: bool
  cpu: bool                        # mapped on the host at `va`
  def view(self) -> ctypes.Array:
    if not self.cpu: raise RuntimeError(f"GPU memory at 0x{self.va:x} is not mapped on the host")
    return (ctypes.c_uint8 * self.size).from_address(self.va)

class GPUMemory:
  def __init__(self, sys, kfd_fd: int, drm_fd: int, gpu_id: int, gpuvm: tuple[int, int]):
    self.sys, self.kfd, self.drm, self.gpu_id, self.gpuvm = sys, kfd_fd, drm_fd, gpu_id, gpuvm
    self._ids = (ctypes.c_uint32 * 1)(gpu_id)
  def alloc(self, size: int, vram: bool, cpu: bool = False, executable: bool = False, uncached: bool = False) -> GPUAlloc:
    if vram and cpu: raise ValueError("VRAM is not mapped on the host here (that needs a large BAR): use GTT for host-visible memory")
    size = max(PAGE, (size + PAGE - 1) // PAGE * PAGE)
    va = self.sys.mmap(0, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
    try:
      if not (self.gpuvm[0] <= va and va + size <= self.gpuvm[1] + 1):
        raise MemoryError(f"the reserved address 0x{va:x} is outside the GPU's virtual aperture 0x{self.gpuvm[0]:x}-0x{self.gpuvm[1]:x}")
      flags = (kio.MEM_VRAM if vram else kio.MEM_GTT) | kio.MEM_WRITABLE | kio.MEM_NO_SUBSTITUTE
      if executable: flags |= kio.MEM_EXECUTABLE
      if uncached: flags |= kio.MEM_COHERENT | kio.MEM_UNCACHED
      args = kio.AllocMemory(va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags)
      try: self.sys.ioctl(self.kfd, kio.ALLOC_MEMORY_OF_GPU, args)
      except OSError as e:
        if e.errno == 12: raise MemoryError(f"KFD: out of {'VRAM' if vram else 'GTT'} allocating {size} bytes") from None   # ENOMEM
        raise
      a = GPUAlloc(va, size, args.handle, vram, cpu)
      try:
        if cpu: self.sys.mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, self.drm, args.mmap_offset)
        self.sys.ioctl(self.kfd, kio.MAP_MEMORY_TO_GPU, kio.MapMemory(handle=a.handle, device_ids_array_ptr=ctypes.addressof(self._ids), n_devices=1))
      except BaseException:
        self.sys.ioctl(self.kfd, kio.FREE_MEMORY_OF_GPU, kio.FreeMemory(handle=a.handle))
        raise
      return a
    except BaseException:
      self.sys.munmap(va, size)
      raise
  def free(self, a: GPUAlloc) -> None:
    """Unmapped from the GPU and freed before the address range goes back to the host."""
    self.sys.ioctl(self.kfd, kio.UNMAP_MEMORY_FROM_GPU, kio.MapMemory(handle=a.handle, device_ids_array_ptr=ctypes.addressof(self._ids), n_devices=1))
    self.sys.ioctl(self.kfd, kio.FREE_MEMORY_OF_GPU, kio.FreeMemory(handle=a.handle))
    self.sys.munmap(a.va, a.size)
