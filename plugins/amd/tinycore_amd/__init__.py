"""tinycore-amd: tinycore backend for AMD GPUs (KFD, PCI and USB interfaces; LLVM/HIP renderers). The entry point is tinycore_amd.plugin (kept light)."""
__version__ = "0.1.0"
