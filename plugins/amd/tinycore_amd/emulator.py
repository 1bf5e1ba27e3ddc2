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
