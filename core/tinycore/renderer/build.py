"""Building the renderer a DEV target names from what its plugin declared (RendererInfo.load), so no plugin repeats a
name -> class dispatch; NULL+, EMU+ and the plugins' own factories all come here."""
from __future__ import annotations
import inspect

def renderer_info(spec):
  """The RendererInfo a resolved DEV target names (its device's renderer called spec.renderer), or None."""
  from tinycore.plugins import registry
  return next((r for r in registry.renderers(spec.device) if r.name.upper() == (spec.renderer or "").upper()), None)

def build_renderer(spec, info=None, arch: str | None = None):
  """The Renderer for `spec` (its device and renderer name), built with `arch` (default: spec.arch) when its class takes
  one. `info`: the plugin's RendererInfo, looked up when not given."""
  from tinycore.device import DeviceUnavailable
  if info is None and (info := renderer_info(spec)) is None: raise DeviceUnavailable(f"{spec.device} declares no renderer {spec.renderer!r}")
  cls = info.get()
  if not inspect.isclass(cls):
    raise DeviceUnavailable(f"{spec.device}:{info.name} doesn't name its Renderer class ('module:Class'), so core can't build it")
  arch = arch or spec.arch
  return cls(arch=arch) if "arch" in inspect.signature(cls).parameters else cls()   # type: ignore[call-arg]   # checked just before
