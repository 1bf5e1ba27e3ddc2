"""The DEV grammar: `[IFACE[:INDICES]+]DEVICE[:RENDERER[:ARCH]]`, several targets joined by `;`.

Parsing is syntax only; whether a name is installed is the device registry's question."""
from __future__ import annotations
import os, re
from dataclasses import dataclass, replace

GRAMMAR = ("DEV=[IFACE[:INDICES]+]DEVICE[:RENDERER[:ARCH]] with targets separated by ';', e.g. "
           "DEV=CPU, DEV=CPU:LLVM, DEV=NV:PTX, DEV=NV:CUDA:sm_90, DEV=AMD::gfx1100, DEV=PCI+AMD, DEV=EMU+NV, DEV=:1+NV, DEV=PCI:0,2+AMD")

class DevSpecError(ValueError):
  """A DEV string that does not follow the grammar, or an old-style environment variable."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*$")
_ARCH = re.compile(r"[A-Za-z0-9_.\-]+$")

@dataclass(frozen=True)
class DevSpec:
  """One DEV target. `device` is upper case; `renderer`/`iface` are None when left to the plugin's default."""
  device: str
  renderer: str | None = None
  arch: str | None = None
  iface: str | None = None
  indices: tuple[int, ...] | None = None   # physical indices the interface exposes, like CUDA_VISIBLE_DEVICES
  def physical(self, index: int) -> int:
    """Map a logical index (the `1` in `NV:1`) to the physical one selected by `:INDICES+`."""
    if self.indices is None: return index
    if index >= len(self.indices): raise IndexError(f"{self.device}:{index} but DEV={self} exposes only {len(self.indices)} device(s)")
    return self.indices[index]
  def replace(self, **kw) -> DevSpec: return replace(self, **kw)
  def __str__(self) -> str:
    pre = ""
    if self.iface is not None or self.indices is not None:
      pre = (self.iface or "") + (":" + ",".join(map(str, self.indices)) if self.indices is not None else "") + "+"
    post = (":" + (self.renderer or "")) if self.renderer or self.arch else ""
    if self.arch: post += ":" + self.arch
    return pre + self.device + post

def _err(s: str, why: str) -> DevSpecError: return DevSpecError(f"malformed DEV={s!r}: {why}. Expected {GRAMMAR}")

def _indices(s: str, txt: str) -> tuple[int, ...]:
  out: list[int] = []
  for part in txt.split(","):
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
    if m is None: raise _err(s, f"interface indices {txt!r} must be integers like 1 or 0,2 or 0-3")
    lo, hi = int(m[1]), int(m[2] or m[1])
    if hi < lo: raise _err(s, f"index range {part!r} is empty")
    out.extend(range(lo, hi + 1))
  if len(set(out)) != len(out): raise _err(s, f"interface indices {txt!r} repeat a device")
  return tuple(out)

def parse_target(s: str) -> DevSpec:
  """Parse one target, e.g. 'PCI:0,1+AMD:LLVM:gfx1100'."""
  t = s.strip()
  if not t: raise _err(s, "empty target")
  iface = indices = None
  if "+" in t:
    pre, _, t = t.partition("+")
    if "+" in t: raise _err(s, "only one IFACE+ prefix is allowed")
    name, colon, idx = pre.partition(":")
    if name and not _NAME.match(name): raise _err(s, f"interface name {name!r} must be letters, digits and _")
    if colon and not idx: raise _err(s, "':' after the interface needs indices, e.g. PCI:1+AMD")
    if not name and not colon: raise _err(s, "'+' needs an interface or indices before it, e.g. PCI+AMD or :1+NV")
    iface, indices = (name.upper() or None), (_indices(s, idx) if colon else None)
  parts = t.split(":")
  if len(parts) > 3: raise _err(s, f"too many ':' fields in {t!r} (DEVICE:RENDERER:ARCH at most)")
  dev, ren, arch = parts + [""] * (3 - len(parts))
  if not dev: raise _err(s, "missing DEVICE name")
  if not _NAME.match(dev):
    if dev.isdigit(): raise _err(s, f"{dev!r} is not a device name (select indices with {dev}+DEVICE or Device['DEVICE:{dev}'])")
    raise _err(s, f"device name {dev!r} must be letters, digits and _")
  if ren and not _NAME.match(ren): raise _err(s, f"renderer name {ren!r} must be letters, digits and _")
  if arch and not _ARCH.match(arch): raise _err(s, f"arch {arch!r} must be letters, digits, '_', '.' or '-'")
  if len(parts) >= 2 and not ren and not arch: raise _err(s, f"empty renderer and arch after {dev!r}")
  return DevSpec(dev.upper(), ren.upper() or None, arch or None, iface, indices)

def parse_dev(s: str) -> tuple[DevSpec, ...]:
  """Parse a whole DEV value ('CPU;NV:PTX'). An empty string gives no targets."""
  if not s.strip(): return ()
  raw = s.split(";")
  if any(not r.strip() for r in raw): raise _err(s, "empty target between ';'")
  specs = tuple(parse_target(r) for r in raw)
  seen: set[str] = set()
  for sp in specs:
    if sp.device in seen: raise _err(s, f"device {sp.device} named twice")
    seen.add(sp.device)
  return specs

# tinygrad's older spellings, mapped to the DEV that replaces them
LEGACY = {"CPU": "CPU", "CLANG": "CPU:C", "LLVM": "CPU:LLVM", "CPU_LLVM": "CPU:LLVM", "CUDA": "CUDA", "NV": "NV", "NV_PTX": "NV:PTX",
          "CUDA_PTX": "CUDA:PTX", "PTX": "NV:PTX", "AMD": "AMD", "AMD_LLVM": "AMD:LLVM", "HIP": "AMD:HIP", "METAL": "METAL",
          "WEBGPU": "WEBGPU", "GPU": "CL", "CL": "CL", "PYTHON": "EMU+DEVICE (e.g. EMU+AMD::gfx1100)", "NULL": "NULL+DEVICE (e.g. NULL+NV:PTX:sm_90)"}
_EMULATE = {"AMD": "EMU+AMD", "AMD_RDNA3": "EMU+AMD::gfx1100", "AMD_RDNA4": "EMU+AMD::gfx1200", "AMD_MI300": "EMU+AMD::gfx942",
            "CUDA": "EMU+NV", "CUDA_SM75": "EMU+NV::sm_75", "CUDA_SM80": "EMU+NV::sm_80", "CUDA_SM89": "EMU+NV::sm_89",
            "CUDA_SM90": "EMU+NV::sm_90", "METAL": "EMU+METAL", "INTEL": "EMU+CL"}

def check_legacy_env(env=None) -> None:
  """Reject old selection variables (CUDA=1, NV_PTX=1, AMD_IFACE=PCI, EMULATE=...) with the DEV= that replaces them."""
  env = os.environ if env is None else env
  for key, dev in LEGACY.items():
    v = env.get(key)
    if v not in (None, "", "0"): raise DevSpecError(f"{key}={v} is no longer supported: use DEV={dev} instead")
  for key in ("AMD_IFACE", "NV_IFACE"):
    if (v := env.get(key)) not in (None, ""):
      raise DevSpecError(f"{key}={v} is no longer supported: use DEV={v.upper()}+{key.split('_')[0]} instead")
  if (v := env.get("EMULATE")) not in (None, "", "0"):
    dev = _EMULATE.get(v.upper(), "EMU+DEVICE[::ARCH] (e.g. EMU+AMD::gfx1100)")
    raise DevSpecError(f"EMULATE={v} is no longer supported: use DEV={dev} instead")
