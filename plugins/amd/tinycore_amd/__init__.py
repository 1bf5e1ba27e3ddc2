"""tinycore-amd: tinycore backend for AMD GPUs (a HIP runtime; KFD, PCI and USB probing; LLVM/HIP renderers).
The entry point is tinycore_amd.plugin (kept light)."""
__version__ = "0.1.0"
