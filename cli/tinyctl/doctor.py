"""`tinyctl doctor`: what this machine has and lacks for each device, and the command that adds what is missing.

Four sources, each asked without opening hardware it doesn't need: the plugin distributions (installed or not), the
extras each installed plugin declares in its metadata (`tinycore-cpu[llvm]`), the system tools a plugin's optional
paths use (compilers, Vulkan and OpenCL drivers), and whether each installed device opens."""
from __future__ import annotations
import glob, os, shutil, sys, warnings
from dataclasses import asdict, dataclass
from typing import Callable

@dataclass
class Finding:
  kind: str       # plugin, extra, system (a tool or driver) or device (whether it opens)
  device: str     # the device it concerns
  needs: str      # the distribution, extra, tool or DEV
  ok: bool
  gives: str      # what having it gives (for a device that doesn't open: why)
  fix: str = ""   # the command that adds it, or the DEV= to try instead (empty when ok)
  @property
  def status(self) -> str: return "ok" if self.ok else "unavailable" if self.kind == "device" else "missing"
  def as_dict(self) -> dict: return {**asdict(self), "status": self.status}

def _sudo() -> str: return "" if not hasattr(os, "geteuid") or os.geteuid() == 0 else "sudo "
def _apt(pkgs: str) -> str:
  return f"{_sudo()}apt-get install {pkgs}" + ("" if sys.platform.startswith("linux") else "  (Debian/Ubuntu; use your system's package manager)")
def _versioned(tool: str) -> list[str]: return [tool, *[f"{tool}-{v}" for v in range(19, 30)]]
def _which(*names: str) -> bool: return any(shutil.which(n) for n in names)
def _files(*patterns: str) -> bool: return any(glob.glob(p) for p in patterns)

# System tools that plugins' optional paths use: (device, what, present?, what it gives, packages that add it).
# Data about this repository's plugins, kept in the CLI so core stays free of device names.
SYSTEM: list[tuple[str, str, Callable[[], bool], str, str]] = [
  ("CPU", "a C compiler (clang or gcc)", lambda: _which(os.environ.get("CC") or "clang", "clang", "gcc", "cc"),
   "DEV=CPU with its C renderer (without one: DEV=CPU:LLVM through llvmlite)", "clang"),
  ("AMD", "clang >= 19 with ld.lld", lambda: _which(*_versioned("clang")[1:]) and _which(*_versioned("ld.lld")),
   "AMD:HIP kernels compiled and linked for RDNA3/RDNA4 (NULL+AMD:HIP, EMU+AMD:HIP)", "clang-19 lld-19"),
  ("METAL", "clang++", lambda: _which(*_versioned("clang++"), "clang"),
   "the Metal Shading Language syntax check off macOS (its tests skip without it)", "clang"),
  ("WEBGPU", "a Vulkan driver (Mesa's lavapipe runs on the CPU)", lambda: _files("/usr/share/vulkan/icd.d/*.json", "/etc/vulkan/icd.d/*.json"),
   "DEV=WEBGPU without a GPU", "mesa-vulkan-drivers libvulkan1"),
  ("CL", "an OpenCL driver (PoCL runs on the CPU)", lambda: _files("/etc/OpenCL/vendors/*.icd"), "DEV=CL without a GPU",
   "pocl-opencl-icd ocl-icd-libopencl1"),
]

def _installed(dist: str) -> bool:
  from importlib.metadata import PackageNotFoundError, version
  try: version(dist)
  except PackageNotFoundError: return False
  return True

def _distributions() -> dict[str, list[str]]:
  """Each of this repository's plugin distributions with the device names it provides."""
  from tinycore.errors import PROVIDERS
  out: dict[str, list[str]] = {}
  for dev, (dist, _) in PROVIDERS.items(): out.setdefault(dist, []).append(dev)
  return out

def plugin_findings() -> list[Finding]:
  from tinycore.errors import install_hint
  out = []
  for dist, devs in _distributions().items():
    dev = devs[0]
    if _installed(dist): out.append(Finding("plugin", dev, dist, True, f"the {'/'.join(devs)} device{'s' * (len(devs) > 1)}"))
    else:
      fix = install_hint(dev).split(": ", 1)[1].strip().rstrip(".").replace("`", "")
      out.append(Finding("plugin", dev, dist, False, f"DEV={dev}, DEV=EMU+{dev}, DEV=NULL+{dev}", fix))
  return out

def extra_findings() -> list[Finding]:
  """Every extra an installed plugin declares, and whether its requirements are installed."""
  from importlib.metadata import requires
  from tinycore.errors import parse_requirement
  out = []
  for dist, devs in _distributions().items():
    if not _installed(dist): continue
    extras: dict[str, list[str]] = {}
    for req in requires(dist) or []:
      name, extra = parse_requirement(req)
      if extra: extras.setdefault(extra, []).append(name)
    for extra, names in sorted(extras.items()):
      missing = [n for n in names if not _installed(n)]
      out.append(Finding("extra", devs[0], f"{dist}[{extra}] ({', '.join(names)})", not missing, f"the optional {extra!r} part of {dist}",
                         f"pip install '{dist}[{extra}]'" if missing else ""))
  return out

def system_findings() -> list[Finding]:
  dists = _distributions()
  wanted = {d for dist, devs in dists.items() if _installed(dist) for d in devs}
  out = []
  for dev, what, probe, gives, pkgs in SYSTEM:
    if dev in wanted: out.append(Finding("system", dev, what, (ok := bool(probe())), gives, "" if ok else _apt(pkgs)))
  return out

def device_findings() -> list[Finding]:
  """Whether each installed device opens, on its default interface and renderer (no hardware is asked for twice)."""
  from tinyctl.checks import check, targets
  out = []
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for t in targets():
      if not t.default: continue
      check(t)
      why = t.why.split(". Without the hardware")[0]
      emu = "" if t.ok or t.kind != "real" else f"try DEV=EMU+{t.device} (its pipeline in the emulator)"
      out.append(Finding("device", t.device, f"DEV={t.dev}", bool(t.ok), "a computation checked against numpy" if t.ok else why, emu))
  return out

def diagnose() -> list[Finding]:
  """Every finding, grouped by device (this repository's devices first, in a fixed order)."""
  from tinycore.errors import PROVIDERS
  found = plugin_findings() + extra_findings() + system_findings() + device_findings()
  order = {d: i for i, d in enumerate(PROVIDERS)}
  return sorted(found, key=lambda f: order.get(f.device, len(order)))
