"""tinycore-opencl loads through its entry point and, where pyopencl or an OpenCL driver (ICD) is missing, CL says
which one and how to install it."""
import importlib.util
import pytest
from tinycore.testing.plugin_contract import contract_tests
from tinycore.device import Device, DeviceUnavailable
from tinycore_opencl import platforms
DEVICES = ["CL"]
globals().update(contract_tests("opencl", "tinycore-opencl", DEVICES))

def test_gpu_is_an_alias_of_cl(registry):
  from tinycore.devspec import parse_dev
  assert Device.resolve(parse_dev("GPU")[0]).device == "CL"
  if platforms.missing(): return
  assert Device["GPU"].device == "CL"

def test_without_pyopencl_the_reason_names_pip(registry, monkeypatch):
  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "pyopencl" else real(n, *a))
  with pytest.raises(DeviceUnavailable, match=r"pip install pyopencl"): Device["CL"]

def test_without_an_icd_the_reason_names_apt(registry, monkeypatch):
  if platforms.pyopencl_missing(): pytest.skip(platforms.pyopencl_missing())
  monkeypatch.setattr(platforms, "cl_devices", lambda: ())
  with pytest.raises(DeviceUnavailable, match=r"apt-get install pocl-opencl-icd") as e: Device["CL"]
  assert str(e.value).startswith("CL (DEV=") and e.value.__suppress_context__

def test_an_index_past_the_devices_is_unavailable(registry):
  if platforms.missing(): pytest.skip(platforms.missing())
  with pytest.raises(DeviceUnavailable, match="ICD loader lists"): Device[f"CL:{len(platforms.cl_devices())}"]

def test_smi_rows_name_the_device(registry):
  from tinycore_opencl.plugin import tinycore_smi
  rows = tinycore_smi("CL")
  if platforms.missing(): assert rows == [{"device": "CL", "index": 0, "status": platforms.missing()}]
  else: assert rows and all(r["name"] and r["mem_total"] > 0 for r in rows)
