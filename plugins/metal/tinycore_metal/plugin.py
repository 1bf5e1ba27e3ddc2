"""The light entry-point module of tinycore-metal: declares METAL (the MSL renderer, the Metal runtime, EMU) and the
probe/smi/emulator hooks. The Metal framework is only loaded on macOS, on first use (objc.py, device.py)."""
import sys, platform
from tinycore.interface import Interface, EmuInterface
TINYCORE_PLUGIN_API = (1, 1)

def _missing() -> str:
  if sys.platform != "darwin": return f"Metal needs macOS (this is {platform.system() or sys.platform})"
  from tinycore_metal.objc import metal_missing
  return metal_missing() or "Metal reports no GPU"

def _open(device_name: str, spec):
  if sys.platform != "darwin":
    from tinycore.device import DeviceUnavailable
    raise DeviceUnavailable(_missing())
  from tinycore_metal.device import open_device
  return open_device(device_name, spec)

class MetalIface(Interface):
  name, default = "METAL", True
  def count(self): return 1 if sys.platform == "darwin" else 0
  def unavailable_reason(self): return None if self.count() else _missing()

def tinycore_devices():
  return [{"name": "METAL", "factory": _open, "priority": 80, "description": "Apple GPU through Metal"}]

def tinycore_renderers(device):
  if device != "METAL": return None
  return [{"name": "METAL", "default": True, "archs": ("2.4", "3.0", "3.1", "3.2"), "load": "tinycore_metal.renderer_metal:MetalRenderer",
           "description": "Metal Shading Language compiled by the Metal framework (or xcrun metal when present)"}]

def tinycore_interfaces(device):
  return [MetalIface(), EmuInterface()] if device == "METAL" else None

def tinycore_probe():
  if sys.platform != "darwin": return []
  return [{"device": "METAL", "name": platform.machine()}]

def tinycore_smi(device):
  if device != "METAL": return None
  from tinycore_metal.smi import smi
  return smi()

def tinycore_emulator(device, arch):
  if device != "METAL": return None
  from tinycore_metal.emulator import model
  return model(device)
