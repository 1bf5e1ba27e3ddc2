"""The light entry-point module of tinycore-webgpu: declares WEBGPU; wgpu is only imported when the device opens."""
import importlib.util
from tinycore.interface import Interface
TINYCORE_PLUGIN_API = (1, 1)

def _missing() -> str:
  if importlib.util.find_spec("wgpu") is None: return "the wgpu package is not installed (pip install 'tinycore-webgpu[wgpu]')"
  return "the WEBGPU runtime is not implemented in tinycore-webgpu 0.1.0 yet"

def _open(device_name: str, spec):
  from tinycore.device import DeviceUnavailable
  raise DeviceUnavailable(_missing())

class WGPUIface(Interface):
  name, default = "WGPU", True
  def count(self): return 1 if importlib.util.find_spec("wgpu") is not None else 0
  def unavailable_reason(self): return None if self.count() else _missing()

def tinycore_devices():
  return [{"name": "WEBGPU", "factory": _open, "priority": 20, "description": "WebGPU through wgpu (Vulkan, Metal, D3D12, GL)"}]

def tinycore_renderers(device):
  if device != "WEBGPU": return None
  return [{"name": "WGSL", "default": True, "description": "WGSL shaders"}]

def tinycore_interfaces(device):
  return [WGPUIface()] if device == "WEBGPU" else None
