"""The light entry-point module of tinycore-amd: declares the AMD device, its renderers (LLVM IR via llvmlite, HIP
C++ via clang), interfaces (HIP, KFD, PCI, USB, EMU) and the probe/smi/emulator hooks.

Nothing here loads libamdhip64, opens /dev/kfd, starts llvmlite or looks for clang at import: device.py, hip.py,
compiler.py and smi.py do, on use (HIP's count() loads the HIP runtime to ask it)."""
import os
from tinycore.interface import Interface, EmuInterface
TINYCORE_PLUGIN_API = (1, 1)
AMD = 0x1002

def _gpus() -> list[dict]:
  from tinycore.pci import pci_devices
  return pci_devices(AMD)

def _hip_count() -> tuple[int, str | None]:
  """(GPUs ROCm's HIP runtime sees, why none)."""
  try:
    from tinycore_amd import hip
    n = hip.device_count()
    return n, None if n else "ROCm's HIP runtime sees no AMD GPU"
  except Exception as e: return 0, str(e)

def _missing() -> str:
  """Why DEV=AMD cannot open here, most basic reason first ('' when it can)."""
  why = _hip_count()[1] or ""
  return why if _gpus() or not why else f"no AMD GPU on the PCI bus; {why}"

def _open(device_name: str, spec):
  from tinycore_amd.device import open_device
  return open_device(device_name, spec)

def _mock() -> bool: return os.environ.get("MOCKGPU", "0") not in ("", "0")
def _kfd_default() -> bool:
  """A bare DEV=AMD opens KFD under the mock driver, or where there is /dev/kfd but no HIP runtime; else HIP."""
  return _mock() or (os.path.exists("/dev/kfd") and _hip_count()[0] == 0)

class HIP(Interface):
  name = "HIP"                    # ROCm's HIP runtime (libamdhip64), which drives the amdgpu kernel driver through KFD
  @property
  def default(self): return not _kfd_default()
  def count(self): return _hip_count()[0]
  def probe(self):
    from tinycore_amd import hip
    n = self.count()
    return [{"index": i, "name": hip.device_name(i), "arch": hip.gcn_arch(i)} for i in range(n)] if n else _gpus()
  def unavailable_reason(self): return None if self.count() else _missing()
class KFD(Interface):
  name = "KFD"                    # the amdgpu kernel driver's compute interface: /dev/kfd ioctls and AQL queues (kfd/)
  @property
  def default(self): return _kfd_default()
  def count(self):
    if _mock(): return 1          # MOCKGPU=1: the mock driver's GPU (mockgpu/)
    return len(_gpus()) if os.path.exists("/dev/kfd") else 0
  def probe(self):
    from tinycore_amd.topology import kfd_nodes
    if _mock(): return [{"index": 0, "name": "mock KFD GPU (MOCKGPU=1)"}]
    return [n for n in kfd_nodes() if n.get("gfx")] or _gpus()
  def unavailable_reason(self):
    if _mock() or self.count(): return None
    if not _gpus(): return "no AMD GPU on the PCI bus (MOCKGPU=1 runs a mock KFD driver)"
    return "the amdgpu kernel driver is not loaded (no /dev/kfd)"
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
  return [{"name": "AMD", "factory": _open, "priority": 95, "description": "AMD GPU (RDNA2+, CDNA) through ROCm's HIP runtime or KFD"}]

def tinycore_renderers(device):
  if device != "AMD": return None
  from tinycore_amd.arch import ARCHS   # a table, no imports
  archs = tuple(ARCHS)
  return [{"name": "LLVM", "default": True, "archs": archs, "load": "tinycore_amd.renderer_llvm:AMDLLVMRenderer",
           "description": "AMDGPU LLVM IR compiled by llvmlite"},
          {"name": "HIP", "archs": archs, "load": "tinycore_amd.renderer_hip:HIPRenderer", "description": "HIP C++ compiled by clang (-nogpulib)"}]

def tinycore_interfaces(device):
  return [HIP(), KFD(), PCIIface(), USBIface(), EmuInterface()] if device == "AMD" else None

def tinycore_probe():
  from tinycore_amd.topology import kfd_nodes
  nodes = {n["pci"]: n for n in kfd_nodes() if n.get("gfx")}   # matched by PCI address (location_id)
  return [{"device": "AMD", "name": "AMD GPU", **g, **nodes.get(g["bus"], {})} for g in _gpus()]

def tinycore_smi(device):
  if device != "AMD": return None
  from tinycore_amd.smi import smi
  return smi(_missing())

def tinycore_emulator(device, arch):
  if device != "AMD": return None
  from tinycore_amd.emulator import model
  return model(device, arch)

def tinycore_collectives(device):
  if device != "AMD": return None
  from tinycore_amd.rccl import RCCLEngine   # loads nothing: librccl is opened when the engine starts
  return [RCCLEngine]
