"""Opening WEBGPU: one wgpu device per process (adapter.py), wrapped as a Compiled with the WGSL renderer."""
from __future__ import annotations

_opened: dict = {}
def open_device(device_name: str, spec):
  from tinycore_webgpu.runtime import WebGPUDevice
  if device_name not in _opened: _opened[device_name] = WebGPUDevice(device_name, getattr(spec, "renderer", None))
  return _opened[device_name]
