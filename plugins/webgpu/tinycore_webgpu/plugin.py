"""The light entry-point module of tinycore-webgpu: declares WEBGPU; wgpu is only imported when the device opens."""
import importlib.util
from tinycore.interface import Interface
TINYCORE_PLUGIN_API = (1, 1)

def _missing() -> str | None:
  if importlib.util.find_spec("wgpu") is None: return "the wgpu package is not installed (pip install wgpu)"
  return None

def _open(device_name: str, spec):
  from tinycore.device import DeviceUnavailable
  if (why := _missing()): raise DeviceUnavailable(why)
  if device_name != "WEBGPU": raise DeviceUnavailable(f"{device_name}: WEBGPU exposes one adapter (WEBGPU_BACKEND chooses which API)")
  from tinycore_webgpu.device import open_device
  return open_device(device_name, spec)

class WGPUIface(Interface):
  name, default = "WGPU", True
  def count(self):
    if _missing(): return 0
    from tinycore.device import DeviceUnavailable
    from tinycore_webgpu.adapter import adapter
    try: adapter()
    except DeviceUnavailable: return 0
    return 1
  def unavailable_reason(self):
    if (why := _missing()): return why
    from tinycore.device import DeviceUnavailable
    from tinycore_webgpu.adapter import adapter
    try: adapter()
    except DeviceUnavailable as e: return str(e)
    return None

def tinycore_devices():
  # below CPU (10): on a machine with only lavapipe, WEBGPU is a CPU emulating a GPU and must not become the default
  return [{"name": "WEBGPU", "factory": _open, "priority": 5, "description": "WebGPU through wgpu (Vulkan, Metal, D3D12, GL)"}]

def tinycore_renderers(device):
  if device != "WEBGPU": return None
  return [{"name": "WGSL", "default": True, "load": "tinycore_webgpu.renderer_wgsl:WGSLRenderer", "description": "WGSL compute shaders"}]

def tinycore_interfaces(device):
  return [WGPUIface()] if device == "WEBGPU" else None

def tinycore_probe():
  if _missing(): return []
  from tinycore_webgpu.smi import smi
  row = smi()
  return [] if "name" not in row else [{"device": "WEBGPU", "name": row["name"], "backend": row.get("backend"), "driver": row.get("driver")}]

def tinycore_smi(device):
  if device != "WEBGPU": return None
  if (why := _missing()): return [{"device": "WEBGPU", "index": 0, "status": why}]
  from tinycore_webgpu.smi import smi
  return [smi()]
