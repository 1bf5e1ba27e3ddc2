"""The light entry-point module of tinycore-nv: declares the NV and CUDA devices, their renderers (CUDA C, PTX),
interfaces (the driver API, PCI probing, EMU) and the probe/smi/emulator hooks.

Nothing here loads libcuda, NVRTC or NVML: device.py, nvrtc.py and smi.py do, on first use."""
import ctypes.util, glob
from tinycore.interface import Interface, EmuInterface
TINYCORE_PLUGIN_API = (1, 1)
NVIDIA = 0x10de

def _gpus() -> list[dict]:
  from tinycore.pci import pci_devices
  return pci_devices(NVIDIA)

def _missing() -> str:
  """Why no NVIDIA device can be opened here, most basic reason first."""
  if not _gpus(): return "no NVIDIA GPU on the PCI bus"
  if not glob.glob("/dev/nvidia[0-9]*"): return "the nvidia kernel driver is not loaded (no /dev/nvidia*)"
  if ctypes.util.find_library("cuda") is None: return "libcuda.so not found (install the NVIDIA driver)"
  return "the CUDA driver sees no usable GPU"

def _open(device_name: str, spec):
  from tinycore.device import DeviceUnavailable
  if (why := _missing()) != "the CUDA driver sees no usable GPU": raise DeviceUnavailable(why)   # cheap checks first
  from tinycore_nv.device import open_device
  return open_device(device_name, spec)

class NVDrv(Interface):
  name, default = "NVDRV", True   # the kernel driver; today opened through libcuda (direct ioctls may come later)
  def count(self): return len(glob.glob("/dev/nvidia[0-9]*"))
  def probe(self): return _gpus()
  def unavailable_reason(self): return None if self.count() else _missing()
class CUDAIface(Interface):
  name, default = "CUDA", True    # the CUDA driver API (libcuda)
  def count(self): return len(_gpus()) if ctypes.util.find_library("cuda") else 0
  def probe(self): return _gpus()
  def unavailable_reason(self): return None if self.count() else _missing()
class PCIIface(Interface):
  name = "PCI"                    # userspace driver over vfio/sysfs
  def count(self): return len(_gpus())
  def probe(self): return _gpus()
  def unavailable_reason(self): return None if self.count() else "no NVIDIA GPU on the PCI bus"

def tinycore_devices():
  return [{"name": "NV", "factory": _open, "priority": 100, "description": "NVIDIA GPU through the kernel driver"},
          {"name": "CUDA", "factory": _open, "priority": 90, "description": "NVIDIA GPU through the CUDA driver API"}]

def tinycore_renderers(device):
  if device not in ("NV", "CUDA"): return None
  archs = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
  return [{"name": "CUDA", "default": True, "archs": archs, "load": "tinycore_nv.renderer_cuda:CUDARenderer",
           "description": "CUDA C compiled by NVRTC"},
          {"name": "PTX", "archs": archs, "load": "tinycore_nv.renderer_ptx:PTXRenderer", "description": "PTX assembled by ptxas or the driver"}]

def tinycore_interfaces(device):
  if device == "NV": return [NVDrv(), PCIIface(), EmuInterface()]
  if device == "CUDA": return [CUDAIface(), EmuInterface()]
  return None

def tinycore_probe():
  return [{"device": "NV", "name": "NVIDIA GPU", **g} for g in _gpus()]

def tinycore_smi(device):
  if device not in ("NV", "CUDA"): return None
  from tinycore_nv.smi import smi
  return smi(device, _missing())

def tinycore_emulator(device, arch):
  if device not in ("NV", "CUDA"): return None
  from tinycore_nv.emulator import model
  return model(device, arch)

def tinycore_collectives(device):
  if device not in ("NV", "CUDA"): return None
  from tinycore_nv.nccl import NCCLEngine   # loads nothing: libnccl is opened when the engine starts
  return [NCCLEngine]
