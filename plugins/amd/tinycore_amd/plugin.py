"""The light entry-point module of tinycore-amd: declares the AMD device with KFD, PCI, USB and EMU interfaces.

Nothing here opens /dev/kfd or loads a compiler; the factory only checks what is missing and says so."""
import os
from tinycore.interface import Interface
TINYCORE_PLUGIN_API = (1, 1)
AMD = 0x1002

def _gpus() -> list[dict]:
  from tinycore.pci import pci_devices
  return pci_devices(AMD)

def _missing() -> str:
  if not _gpus(): return "no AMD GPU on the PCI bus"
  if not os.path.exists("/dev/kfd"): return "the amdgpu kernel driver is not loaded (no /dev/kfd)"
  return "the AMD runtime is not implemented in tinycore-amd 0.1.0 yet"

def _open(device_name: str, spec):
  from tinycore.device import DeviceUnavailable
  if spec.iface == "EMU": raise DeviceUnavailable(f"EMU+{spec.device} needs the shared emulator, not in this tinycore yet")
  if spec.iface == "USB": raise DeviceUnavailable("no USB-attached AMD GPU found")
  raise DeviceUnavailable(_missing())

class KFD(Interface):
  name, default = "KFD", True
  def count(self): return len(_gpus()) if os.path.exists("/dev/kfd") else 0
  def probe(self): return _gpus()
  def unavailable_reason(self): return None if self.count() else _missing()
class PCIIface(Interface):
  name = "PCI"
  def count(self): return len(_gpus())
  def probe(self): return _gpus()
  def unavailable_reason(self): return None if self.count() else "no AMD GPU on the PCI bus"
class USBIface(Interface):
  name = "USB"
  def count(self): return 0
  def unavailable_reason(self): return "no USB-attached AMD GPU found"
class EmuIface(Interface):
  name, kind = "EMU", "emulator"
  def unavailable_reason(self): return "the shared emulator is not in this tinycore yet"

def tinycore_devices():
  return [{"name": "AMD", "factory": _open, "priority": 95, "description": "AMD GPU (RDNA2+, CDNA)"}]

def tinycore_renderers(device):
  if device != "AMD": return None
  archs = ("gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1200", "gfx1201")
  return [{"name": "LLVM", "default": True, "archs": archs, "description": "LLVM IR for the amdgcn target"},
          {"name": "HIP", "archs": archs, "description": "HIP C compiled by clang"}]

def tinycore_interfaces(device):
  return [KFD(), PCIIface(), USBIface(), EmuIface()] if device == "AMD" else None

def tinycore_probe():
  return [{"device": "AMD", "name": "AMD GPU", **g} for g in _gpus()]

def tinycore_smi(device):
  if device != "AMD": return None
  return [{"device": "AMD", "index": i, "name": "AMD GPU", "bus": g["bus"], "status": _missing()} for i, g in enumerate(_gpus())]
