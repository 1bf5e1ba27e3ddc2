"""pytest plugin of the conformance kit: `--device=NAME` runs every test with Device.DEFAULT set to NAME (DEV=NAME)."""
from __future__ import annotations
import os

def pytest_addoption(parser):
  try: parser.addoption("--device", action="store", default=None, help="tinycore device to run the conformance kit on (e.g. CPU, EMU+NV); default: DEV or auto")
  except ValueError: pass   # registered twice: once as -p plugin, once through the package's conftest

def pytest_configure(config):
  dev = config.getoption("--device", default=None)
  if not dev: return
  os.environ["DEV"] = dev
  from tinycore.device import Device
  Device.DEFAULT = dev

def pytest_report_header(config):
  try:
    from tinycore.device import Device
    return f"tinycore conformance kit: device {Device.DEFAULT}"
  except Exception as e: return f"tinycore conformance kit: no device ({e})"
