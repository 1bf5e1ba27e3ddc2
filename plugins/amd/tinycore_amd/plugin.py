"""The light entry-point module of tinycore-amd: declares the AMD device, its renderers (LLVM IR via llvmlite, HIP
C++ via clang), interfaces (KFD, PCI, USB, EMU) and the probe/smi/emulator hooks.

Nothing here opens /dev/kfd, starts llvmlite or looks for clang: device.py, compiler.py and smi.py do, on use."""
import os
from tinycore.interface import Interface, EmuInterface
TINYCORE_PLUGIN_API = (1, 1)
AMD = 0x1002

def _gpus() -> list[dict]:
  from tinycore.pci import pci_devices
  return pci_devices(AMD)

def _missing() -> str:
  if not _gpus(): return "no AMD GPU on the PCI bus"
  if not os.path.exists("/dev/kfd"): return "the amdgpu kernel driver is not loaded (no /dev/kfd)"
  return "the KFD runtime is not implemented in tinycore-amd yet (compile-only; DEV=EMU+AMD emulates)"

def _open(device_name: str, spec):
  from tinycore_amd.device import open_device
  return open_device(device_name, spec)

class KFD(Interface):
  name, default = "KFD", True    # the amdgpu kernel driver's compute interface
  def count(self): return len(_gpus()) if os.path.exists("/dev/kfd") else 0
  def probe(self):
    from tinycore_amd.topology import kfd_nodes
    return [n for n in kfd_nodes() if n.get("gfx")] or _gpus()
  def unavailable_reason(self): return _missing()   # even with a GPU: no runtime yet
class PCIIface(Interface):
  name = "PCI"
  def count(self): return len(_gpus())
  def probe(self): return _gpus()
  def unavailable_reason(self): return "no AMD GPU on the PCI bus" if not self.count() else "PCI+AMD only probes: no userspace driver yet"
class USBIface(Interface):
  name = "USB"
  def count(self): return 0
  def unavailable_reason(self): return "no USB-attached AMD GPU found"

def tinycore_devices():
  return [{"name": "AMD", "factory": _open, "priority": 95, "description": "AMD GPU (RDNA2+, CDNA) through KFD"}]

def tinycore_renderers(device):
  if device != "AMD": return None
  from tinycore_amd.arch import ARCHS   # a table, no imports
  archs = tuple(ARCHS)
  return [{"name": "LLVM", "default": True, "archs": archs, "load": "tinycore_amd.renderer_llvm:AMDLLVMRenderer", "description": "AMDGPU LLVM IR compiled by llvmlite"},
          {"name": "HIP", "archs": archs, "load": "tinycore_amd.renderer_hip:HIPRenderer", "description": "HIP C++ compiled by clang (-nogpulib)"}]

def tinycore_interfaces(device):
  return [KFD(), PCIIface(), USBIface(), EmuInterface()] if device == "AMD" else None

def tinycore_probe():
  from tinycore_amd.topology import kfd_nodes
  nodes = {n["pci"]: n for n in kfd_nodes() if n.get("gfx")}   # matched by PCI address (location_id)
  return [{"device": "AMD", "name": "AMD GPU", **g, **nodes.get(g["bus"], {})} for g in _gpus()]

def tinycore_smi(device):
  if device != "AMD": return None
  from tinycore_amd.smi import smi
  return smi(_missing())

def tinycore_emulator(device):
  if device != "AMD": return None
  from tinycore_amd.emulator import model
  return model(device)
