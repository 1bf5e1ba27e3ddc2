"""`DEV=EMU+<DEVICE>`: the device's own pipeline executed by the shared emulator, opened by core as it opens NULL+.

A GPU plugin declares an interface of kind "emulator" named EMU and answers `tinycore_emulator(device, arch)` with
its execution model; core builds the renderer DEV names from the plugin's RendererInfo (with the arch), so codegen
makes the device's own choices, and hands the linearized programs to the interpreter. Rendering only: the device's
compiler and runtime are never needed."""
from __future__ import annotations
from tinycore.device import Compiled, DeviceUnavailable

def open_emu(device_name: str, spec, renderer_info) -> Compiled:
  try: from tinycore.emulator import open_emulated, emulator_model
  except ImportError: raise DeviceUnavailable("this tinycore has no shared emulator (tinycore.emulator)") from None
  from tinycore.renderer.build import build_renderer
  ren = build_renderer(spec, renderer_info)
  # the model of the arch the renderer settled on (its default when DEV names none)
  return open_emulated(device_name, ren, emulator_model(spec.device, spec.arch or ren.arch))
