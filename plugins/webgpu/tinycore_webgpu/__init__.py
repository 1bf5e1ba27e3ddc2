"""tinycore-webgpu: tinycore backend for WebGPU through wgpu. The entry point is tinycore_webgpu.plugin (kept light)."""
__version__ = "0.1.0"
