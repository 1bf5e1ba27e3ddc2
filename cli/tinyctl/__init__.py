"""tinyctl: the command line for tinycore devices (`device list`), plugins and live telemetry (`smi`)."""
__version__ = "0.1.0"
