"""AMD's execution model for the shared emulator (`DEV=EMU+AMD[:RENDERER[:ARCH]]`): wave32 on RDNA, wave64 on
CDNA, 64 KB of LDS per workgroup, 1024 lanes per workgroup, and the arch's WMMA/MFMA lane layouts.
The AMD renderer DEV names drives codegen (AMD's choices); the interpreter runs the linearized program."""
from __future__ import annotations

def model(device: str = "AMD", arch: str | None = None):
  from tinycore.emulator import ExecModel
  from tinycore_amd.arch import parse_arch
  from tinycore_amd.tensor_cores import all_layouts
  a = parse_arch(arch)
  return ExecModel(name=f"amd-{a.name}", warp_size=a.wave, local_mem=a.lds, max_workgroup=1024, tensor_cores=all_layouts(a.matrix))

def open_emu(device_name: str, spec):
  try: from tinycore.emulator import open_emulated
  except ImportError:
    from tinycore.device import DeviceUnavailable
    raise DeviceUnavailable("EMU+AMD needs tinycore's shared emulator (tinycore.emulator), missing from this tinycore") from None
  from tinycore_amd.device import make_renderer
  # rendering only: neither clang nor llvmlite is needed to emulate
  return open_emulated(device_name, make_renderer(spec.renderer, spec.arch), model(spec.device, spec.arch))
