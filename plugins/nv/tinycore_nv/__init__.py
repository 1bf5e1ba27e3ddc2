"""tinycore-nv: tinycore backend for NVIDIA GPUs (NV and CUDA devices; CUDA C via NVRTC, PTX). The entry point is tinycore_nv.plugin (kept light)."""
__version__ = "0.1.0"
