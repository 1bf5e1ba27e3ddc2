"""Opening AMD: the renderer DEV asks for, then the runtime. `EMU+AMD` hands the renderer to the shared emulator.

The hardware runtime would go through the amdgpu kernel driver's KFD interface (/dev/kfd ioctls: process
apertures, GPU memory, AQL user queues, signals) and load the code objects compiler.py makes. It is not written
yet: opening a real AMD GPU checks what it can (PCI, /dev/kfd, the KFD topology) and raises DeviceUnavailable."""
from __future__ import annotations
import os
from tinycore.device import DeviceUnavailable

def make_renderer(name: str | None, arch: str | None):
  name = (name or "LLVM").upper()
  if name == "LLVM":
    from tinycore_amd.renderer_llvm import AMDLLVMRenderer
    return AMDLLVMRenderer(arch)
  if name == "HIP":
    from tinycore_amd.renderer_hip import HIPRenderer
    return HIPRenderer(arch)
  raise ValueError(f"AMD has no renderer {name!r}: use LLVM (default) or HIP")

def open_device(device_name: str, spec):
  if spec.iface == "EMU":
    from tinycore_amd.emulator import open_emu
    return open_emu(device_name, spec)
  from tinycore_amd.topology import kfd_nodes
  from tinycore.pci import pci_devices
  if spec.iface == "USB": raise DeviceUnavailable("no USB-attached AMD GPU found (the USB bridge interface is not implemented)")
  if not pci_devices(0x1002): raise DeviceUnavailable("no AMD GPU on the PCI bus")
  if spec.iface == "PCI": raise DeviceUnavailable("PCI+AMD only probes (sysfs); a userspace PCI driver is not implemented: use DEV=AMD (KFD)")
  if not os.path.exists("/dev/kfd"): raise DeviceUnavailable("the amdgpu kernel driver is not loaded (no /dev/kfd)")
  gpus = [n for n in kfd_nodes() if n.get("gfx")]
  if not gpus: raise DeviceUnavailable("/dev/kfd is there but the KFD topology lists no GPU node")
  make_renderer(spec.renderer, spec.arch or gpus[0]["gfx"])   # a bad renderer/arch is still the user's error first
  raise DeviceUnavailable(f"found {', '.join(g['gfx'] for g in gpus)} through KFD, but tinycore-amd has no KFD runtime yet "
                          f"(compile-only: DEV=EMU+AMD runs AMD kernels in the emulator)")
