"""The light entry-point module of tinycore-metal: declares METAL; the Metal framework is only touched on macOS."""
import sys, platform
from tinycore.interface import Interface
TINYCORE_PLUGIN_API = (1, 1)

def _missing() -> str:
  if sys.platform != "darwin": return f"Metal needs macOS (this is {platform.system() or sys.platform})"
  return "the METAL runtime is not implemented in tinycore-metal 0.1.0 yet"

def _open(device_name: str, spec):
  from tinycore.device import DeviceUnavailable
  if spec.iface == "EMU": raise DeviceUnavailable("EMU+METAL needs the shared emulator, not in this tinycore yet")
  raise DeviceUnavailable(_missing())

class MetalIface(Interface):
  name, default = "METAL", True
  def count(self): return 1 if sys.platform == "darwin" else 0
  def unavailable_reason(self): return None if self.count() else _missing()
class EmuIface(Interface):
  name, kind = "EMU", "emulator"
  def unavailable_reason(self): return "the shared emulator is not in this tinycore yet"

def tinycore_devices():
  return [{"name": "METAL", "factory": _open, "priority": 80, "description": "Apple GPU through Metal"}]

def tinycore_renderers(device):
  if device != "METAL": return None
  return [{"name": "METAL", "default": True, "description": "Metal Shading Language compiled by the Metal framework"}]

def tinycore_interfaces(device):
  return [MetalIface(), EmuIface()] if device == "METAL" else None

def tinycore_probe():
  if sys.platform != "darwin": return []
  return [{"device": "METAL", "name": platform.machine()}]
