"""tinycore-metal: tinycore backend for Apple GPUs through Metal (macOS only). The entry point is tinycore_metal.plugin (kept light)."""
__version__ = "0.1.0"
