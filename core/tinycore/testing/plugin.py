"""pytest plugin of the conformance kit: `--device=NAME` runs every test with Device.DEFAULT set to NAME (DEV=NAME)."""
from __future__ import annotations
import os

def pytest_addoption(parser):
  try:
    parser.addoption("--device", action="store", default=None,
                     help="tinycore device to run the conformance kit on (e.g. CPU, EMU+NV); default: DEV or auto")
    parser.addoption("--compile-also", action="store", default="", help="comma-separated devices (e.g. NULL+AMD:HIP:gfx1201) that "
                     "compile every kernel the kit runs, with their own renderer and real compiler; a compile error fails the test")
  except ValueError: pass   # registered twice: once as -p plugin, once through the package's conftest

def pytest_configure(config):
  # the kit's long runs (the fuzzer's long variant): deselect with -m "not slow", run with -m slow
  config.addinivalue_line("markers", "slow: long runs (fuzzing); run with -m slow")
  dev = config.getoption("--device", default=None)
  if not dev: return
  import pytest
  from tinycore.errors import TinycoreError
  # a device name that doesn't parse, isn't installed or can't open is the command line's mistake: one line naming the fix
  # (what to install, the DEV= to try), not an INTERNALERROR traceback or every test failing the same way
  try:
    os.environ["DEV"] = dev
    from tinycore.device import Device
    Device.DEFAULT = dev
    Device[Device.DEFAULT]
    if (also := [d for d in config.getoption("--compile-also", default="").split(",") if d]): _compile_also(also)
  except (TinycoreError, ValueError) as e: raise pytest.UsageError(f"tinycore conformance kit: {e}") from None

def pytest_collection_modifyitems(config, items):
  """Without a -m expression (a third party's `pytest --pyargs tinycore.testing`), slow tests stay out, as in our pytest.ini."""
  if config.getoption("markexpr", default=""): return
  slow = [i for i in items if i.get_closest_marker("slow")]
  if slow:
    config.hook.pytest_deselected(items=slow)
    items[:] = [i for i in items if not i.get_closest_marker("slow")]

def _compile_also(devices: list[str]):
  """Every kernel about to run is also lowered, rendered and compiled for each of `devices` (NULL+ devices compile
  only), so one kit run checks the kernels of several (renderer, arch) targets against their real compilers."""
  from tinycore.device import Device
  from tinycore.engine import run
  for d in devices: Device[d]   # a device that can't open is the user's error now, not a silent no-op
  def compile_elsewhere(ei):
    if (ast := getattr(ei.runner, "ast", None)) is not None:
      for d in devices: run.get_runner(d, ast)   # cached per (device, ast): each kernel compiles once per target
  compile_elsewhere.kit_compile_also = True   # type: ignore[attr-defined]   # marks the hook so it's added once
  if not any(getattr(h, "kit_compile_also", False) for h in run.capture_hooks): run.capture_hooks.append(compile_elsewhere)

def pytest_report_header(config):
  try:
    from tinycore.device import Device
    return f"tinycore conformance kit: device {Device.DEFAULT}"
  except Exception as e: return f"tinycore conformance kit: no device ({e})"
