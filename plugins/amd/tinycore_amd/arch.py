"""AMD GPU targets: what `DEV=AMD::<arch>` may name, and the facts codegen and the emulator need about each.

RDNA (gfx10xx-gfx12xx) runs compute in wave32 by default; CDNA (gfx9xx) is wave64 only. Every workgroup can use
64 KB of LDS (CDNA4/gfx950 has 160 KB, but 64 KB is what a kernel may declare without opting in)."""
from __future__ import annotations
from dataclasses import dataclass

DEFAULT_ARCH = "gfx1100"

@dataclass(frozen=True)
class Arch:
  name: str
  family: str        # RDNA2/3/4, CDNA2/3/4
  wave: int          # lanes per wavefront
  lds: int = 64 * 1024
  matrix: str = ""   # tensor-core instruction family: wmma_rdna3, wmma_rdna4, mfma, "" for none

ARCHS = {a.name: a for a in (
  Arch("gfx1030", "RDNA2", 32), Arch("gfx1100", "RDNA3", 32, matrix="wmma_rdna3"), Arch("gfx1101", "RDNA3", 32, matrix="wmma_rdna3"),
  Arch("gfx1102", "RDNA3", 32, matrix="wmma_rdna3"), Arch("gfx1200", "RDNA4", 32, matrix="wmma_rdna4"),
  Arch("gfx1201", "RDNA4", 32, matrix="wmma_rdna4"), Arch("gfx90a", "CDNA2", 64, matrix="mfma"),
  Arch("gfx942", "CDNA3", 64, matrix="mfma"), Arch("gfx950", "CDNA4", 64, matrix="mfma"))}

class AMDTarget:
  """What both AMD renderers (LLVM, HIP) share: the arch DEV names and its limits."""
  device, has_local, has_shared = "AMD", True, True
  global_max = (2**31 - 1, 65535, 65535)   # workgroups per grid dim
  local_max = (256, 1024, 1024)            # 256 lanes = 8 wave32 / 4 wave64: the hardware allows 1024
  def __init__(self, arch: str | None = None, compiler=None):
    from tinycore_amd.tensor_cores import tensor_cores
    self.target = parse_arch(arch)
    self.arch, self.shared_max, self.tensor_cores = self.target.name, self.target.lds, tensor_cores(self.target.matrix)
    self._compiler = compiler

def parse_arch(arch: str | None) -> Arch:
  """'gfx1100', 'GFX1100', '1100', 'gfx942:sramecc+:xnack-' (target features are dropped) -> Arch."""
  if not arch: return ARCHS[DEFAULT_ARCH]
  a = arch.lower().split(":")[0]
  a = a if a.startswith("gfx") else "gfx" + a
  if a not in ARCHS: raise ValueError(f"AMD: unknown arch {arch!r}; known: {', '.join(ARCHS)}")
  return ARCHS[a]
