"""Interface: the transport a device is reached through (CUDA driver, userspace PCI, KFD, USB, the emulator)."""
from __future__ import annotations

class Interface:
  """Plugins subclass this and return instances (or classes) from `tinycore_interfaces(device)`.

  `kind` is 'real', 'emulator' or 'compile-only'; only 'real' interfaces are used for default device selection.
  `default` marks the interface a bare `DEV=NV` uses. Keep the constructor cheap: the device factory opens the device."""
  name: str = "HOST"
  kind: str = "real"
  default: bool = False
  def count(self) -> int:
    """How many devices this interface can reach right now (0 when the driver/library is missing)."""
    return 1
  def probe(self) -> list[dict]:
    """Physical devices this interface sees, without opening them: [{'index': 0, 'name': ..., ...}]."""
    return [{"index": i} for i in range(self.count())]
  def unavailable_reason(self) -> str | None:
    """Why count() is 0, in the user's terms (e.g. 'libcuda.so not found'), or None when usable."""
    return None
  def __repr__(self): return f"<Interface {self.name} kind={self.kind}{' default' if self.default else ''}>"

class HostInterface(Interface):
  """The implicit interface of a device that lists none: the device is simply there."""
  name, default = "HOST", True

class EmuInterface(Interface):
  """`EMU+<DEVICE>`: the device's pipeline executed by core's shared emulator (tinycore.emulator); never a default."""
  name, kind = "EMU", "emulator"
  def count(self): return 1
  def unavailable_reason(self):
    try: import tinycore.emulator   # noqa: F401
    except ImportError: return "this tinycore has no shared emulator (tinycore.emulator)"
    return None
