"""The exceptions a user meets, in one module, each with a message that names the fix: the distribution or extra to
install, the `DEV=` to try.

Core stays free of device policy: which distribution provides a device that isn't installed comes from a catalogue of
this repository's own plugins (data, not branches), and which extra brings a missing module comes from the installed
distribution's own metadata."""
from __future__ import annotations
import re
from typing import Any
# re-exported, so every user-facing error is reachable from here (CorruptFileError/UnsupportedFileError: __getattr__ below)
from tinycore.devspec import DevSpecError as DevSpecError
from tinycore.helpers import EnvError as EnvError

class TinycoreError(Exception):
  """Base of the errors below that are tinycore's own (DevSpecError, EnvError and the file errors are ValueErrors)."""

class DeviceUnavailable(TinycoreError, RuntimeError):
  """Raised by a plugin's factory when this machine lacks what the device needs (driver, library, OS)."""
  cause: BaseException | None = None   # the plugin's own exception, for `tinyctl plugins`

class UnknownDeviceError(TinycoreError, ValueError):
  """A device, renderer or interface name that no installed plugin provides."""

class MissingDependencyError(DeviceUnavailable):
  """A device's plugin is installed but a Python module it needs is not; `install` is the command that adds it."""
  def __init__(self, msg: str, module: str = "", install: str = ""):
    super().__init__(msg)
    self.module, self.install = module, install

class ResultUnavailableError(TinycoreError, RuntimeError):
  """A result read back from a compile-only device (`DEV=NULL+...`): its kernels were compiled, never run."""

def __getattr__(name: str) -> Any:
  # the file errors live with the loaders (tinycore.nn.file_errors); importing tinycore.nn pulls in Tensor, so only on use
  if name in ("CorruptFileError", "UnsupportedFileError"):
    from tinycore.nn import file_errors
    return getattr(file_errors, name)
  raise AttributeError(f"module 'tinycore.errors' has no attribute {name!r}")

# This repository's plugins: the distribution (and its folder in a checkout) that provides each device name.
PROVIDERS: dict[str, tuple[str, str]] = {
  "CPU": ("tinycore-cpu", "plugins/cpu"), "NV": ("tinycore-nv", "plugins/nv"), "CUDA": ("tinycore-nv", "plugins/nv"),
  "AMD": ("tinycore-amd", "plugins/amd"), "METAL": ("tinycore-metal", "plugins/metal"), "WEBGPU": ("tinycore-webgpu", "plugins/webgpu"),
  "CL": ("tinycore-opencl", "plugins/opencl"), "GPU": ("tinycore-opencl", "plugins/opencl")}

def install_hint(device: str, installed: set[str] | frozenset[str] = frozenset()) -> str:
  """' NV is provided by tinycore-nv: ...' for a device this repository has a plugin for whose distribution is not among
  `installed` (an installed one that doesn't load is explained by its own status), else ''."""
  if (hit := PROVIDERS.get(device.upper())) is None or hit[0] in installed: return ""
  dist, folder = hit
  return f" {device.upper()} is provided by {dist}: `pip install {dist}` (from a checkout: `pip install ./{folder}`)."

def unknown_device_hint(device: str, installed: set[str]) -> str:
  """What to install for a device name no plugin provides; `installed`: the plugin distributions present (none: say so)."""
  if (hint := install_hint(device, installed)) or installed: return hint
  return " No backend plugin is installed." + install_hint("CPU")

def emulator_hint(device: str, iface: str | None) -> str:
  """What to try without the hardware, for a device whose plugin declares a renderer (EMU+ and NULL+ are built on it)."""
  if iface in ("EMU", "NULL"): return ""
  try:
    from tinycore.plugins import registry
    if not registry.renderers(device): return ""
  except Exception: return ""   # a hint must never replace the error it decorates
  return f" Without the hardware, try DEV=EMU+{device} (its pipeline run by the emulator) or DEV=NULL+{device} (compile only)."

def parse_requirement(req: str) -> tuple[str, str | None]:
  """('llvmlite', 'llvm') from 'llvmlite>=0.40; extra == "llvm"': a requirement's name and the extra that adds it."""
  name = re.match(r"\s*([A-Za-z0-9._-]+)", req)
  extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
  return (name[1] if name else ""), (extra[1] if extra else None)

def _norm(name: str) -> str: return re.sub(r"[-_.]+", "_", name).lower()

def install_command(dist: str, module: str) -> str:
  """The pip command that adds top-level `module` for distribution `dist`: its extra when its metadata declares one."""
  top = module.split(".")[0]
  try:
    from importlib.metadata import requires
    reqs = requires(dist) or []
  except Exception: reqs = []
  for req in reqs:
    name, extra = parse_requirement(req)
    if extra and _norm(name) == _norm(top): return f"pip install '{dist}[{extra}]'"
  return f"pip install {top}"

def missing_module(err: ImportError, what: str, dist: str) -> MissingDependencyError:
  """The error for `what` (e.g. 'CPU (DEV=CPU:LLVM)') failing to open because plugin distribution `dist` lacks a module."""
  module = (err.name or "").split(".")[0] or str(err)
  if _norm(module) == _norm(dist):   # the plugin's own code is incomplete: no extra fixes that
    cmd = f"pip install --force-reinstall {dist}"
    return MissingDependencyError(f"{what}: the installed {dist} is incomplete ({err}): `{cmd}`", module, cmd)
  cmd = install_command(dist, module)
  return MissingDependencyError(f"{what} needs the Python module {module!r}, which is not installed: `{cmd}`", module, cmd)
