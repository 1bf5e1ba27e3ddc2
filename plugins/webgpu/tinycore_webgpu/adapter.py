"""Finding the wgpu adapter and opening its device, once per process. WEBGPU_BACKEND picks Vulkan/Metal/D3D12/GL."""
from __future__ import annotations
import functools, os
from tinycore.device import DeviceUnavailable

NO_ADAPTER = "no WebGPU adapter: install a Vulkan driver, e.g. mesa-vulkan-drivers (lavapipe, a CPU Vulkan) on Debian/Ubuntu"
_BACKENDS = {"VULKAN": "Vulkan", "VK": "Vulkan", "METAL": "Metal", "MTL": "Metal", "D3D12": "D3D12", "DX12": "D3D12",
             "GL": "OpenGL", "OPENGL": "OpenGL", "GLES": "OpenGL"}
# limits we raise from WebGPU's conservative defaults to what the adapter allows
_LIMITS = ("max-buffer-size", "max-storage-buffer-binding-size", "max-storage-buffers-per-shader-stage",
           "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x", "max-compute-workgroup-size-y",
           "max-compute-workgroup-size-z", "max-compute-workgroup-storage-size", "max-bindings-per-bind-group")

def _wgpu():
  try: import wgpu
  except ImportError: raise DeviceUnavailable("the wgpu package is not installed (pip install wgpu)") from None
  return wgpu

def backend_wanted() -> str | None:
  b = os.getenv("WEBGPU_BACKEND", "").strip()
  if not b: return None
  if (name := _BACKENDS.get(b.upper().removeprefix("WGPUBACKENDTYPE_"))) is None:
    raise DeviceUnavailable(f"WEBGPU_BACKEND={b!r} is not a backend: use one of Vulkan, Metal, D3D12, GL")
  return name

@functools.cache
def adapter():
  wgpu = _wgpu()
  os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")   # Mesa's GL/EGL probe complains on stderr without it
  want = backend_wanted()
  try:
    if want is None: a = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    else:
      a = next((a for a in wgpu.gpu.enumerate_adapters_sync() if a.info.get("backend_type") == want), None)
      if a is None: raise DeviceUnavailable(f"no WebGPU adapter on the {want} backend (WEBGPU_BACKEND)")
  except DeviceUnavailable: raise
  except Exception as e: raise DeviceUnavailable(f"{NO_ADAPTER} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
  if a is None: raise DeviceUnavailable(NO_ADAPTER)
  return a

@functools.cache
def device():
  """(adapter, device, features we enabled)."""
  a = adapter()
  # WEBGPU_F16=0 leaves shader-f16 off: half is then held as f32 and packed (what adapters without it get)
  feats = [f for f in ("shader-f16", "timestamp-query") if f in a.features and (f != "shader-f16" or os.getenv("WEBGPU_F16", "1") != "0")]
  lim = {k: v for k, v in a.limits.items() if k in _LIMITS}
  try: d = a.request_device_sync(required_features=feats, required_limits=lim)
  except Exception as e: raise DeviceUnavailable(f"the WebGPU adapter {a.summary} refused a device: {e}") from None
  return a, d, frozenset(feats)
