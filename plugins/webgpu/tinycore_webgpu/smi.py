"""`tinyctl smi` for WEBGPU: WebGPU exposes no live telemetry, so the row is the adapter's identity, backend and limits."""
from __future__ import annotations

def smi() -> dict:
  from tinycore_webgpu.adapter import adapter
  from tinycore.device import DeviceUnavailable
  try: a = adapter()
  except DeviceUnavailable as e: return {"device": "WEBGPU", "index": 0, "status": str(e)}
  info, lim = a.info, a.limits
  row = {"device": "WEBGPU", "index": 0, "name": info.get("device") or a.summary, "vendor": info.get("vendor") or None,
         "backend": info.get("backend_type"), "adapter_type": info.get("adapter_type"), "driver": info.get("description") or None,
         # no memory counters in WebGPU: the largest buffer a kernel can bind is the closest thing it says
         "max_buffer": min(lim["max-buffer-size"], lim["max-storage-buffer-binding-size"]),
         "f16": "shader-f16" in a.features, "timestamps": "timestamp-query" in a.features,
         "status": "software adapter (CPU)" if info.get("adapter_type") == "CPU" else "ok"}
  return {k: v for k, v in row.items() if v is not None}
