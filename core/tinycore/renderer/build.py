"""Building the renderer a DEV target names from what its plugin declared (RendererInfo.load), so no plugin repeats a
name -> class dispatch; NULL+, EMU+ and the plugins' own factories all come here."""
from __future__ import annotations
import inspect

def build_renderer(spec, renderer_info=None, arch: str | None = None):
  """The Renderer for `spec` (its device and renderer name), built with `arch` (default: spec.arch) when its class takes
  one. `renderer_info`: the plugin's RendererInfo, looked up in the registry when not given."""
  from tinycore.device import DeviceUnavailable
  if renderer_info is None:
    from tinycore.plugins import registry
    renderer_info = next((r for r in registry.renderers(spec.device) if r.name.upper() == (spec.renderer or "").upper()), None)
  if renderer_info is None: raise DeviceUnavailable(f"{spec.device} declares no renderer {spec.renderer!r}")
  cls = renderer_info.get()
  if not inspect.isclass(cls):
    raise DeviceUnavailable(f"{spec.device}:{renderer_info.name} doesn't name its Renderer class ('module:Class'), so core can't build it")
  arch = arch or spec.arch
  return cls(arch=arch) if "arch" in inspect.signature(cls).parameters else cls()
