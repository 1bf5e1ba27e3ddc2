"""tinycore-cpu: the host CPU as a tinycore device. The entry point is tinycore_cpu.plugin (kept light)."""
__version__ = "0.1.0"
