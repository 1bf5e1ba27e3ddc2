"""Live telemetry through NVML (libnvidia-ml, ctypes): memory, utilization, temperature, power, clocks, processes.

Without NVML (no driver) each PCI-visible GPU is still listed, with the reason in `status`."""
from __future__ import annotations
import ctypes, ctypes.util, functools

class _Memory(ctypes.Structure): _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
class _Util(ctypes.Structure): _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]
class _Proc(ctypes.Structure):   # nvmlProcessInfo_v1: the layout the unversioned call fills
  _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]

@functools.cache
def nvml() -> ctypes.CDLL | None:
  for n in filter(None, [ctypes.util.find_library("nvidia-ml"), "libnvidia-ml.so.1"]):
    try: lib = ctypes.CDLL(n)
    except OSError: continue
    return lib if lib.nvmlInit_v2() == 0 else None
  return None

def _q(fn, *args) -> bool: return fn(*args) == 0

def smi(device: str, reason: str) -> list[dict]:
  from tinycore.pci import pci_devices
  lib = nvml()
  if lib is None:
    return [{"device": device, "index": i, "name": "NVIDIA GPU", "bus": g.get("bus"), "status": f"NVML unavailable: {reason}"}
            for i, g in enumerate(pci_devices(0x10de))]
  n, out = ctypes.c_uint(), []
  if not _q(lib.nvmlDeviceGetCount_v2, ctypes.byref(n)): return []
  for i in range(n.value):
    h = ctypes.c_void_p()
    if not _q(lib.nvmlDeviceGetHandleByIndex_v2, i, ctypes.byref(h)): continue
    d: dict = {"device": device, "index": i}
    name = ctypes.create_string_buffer(96)
    if _q(lib.nvmlDeviceGetName, h, name, 96): d["name"] = name.value.decode()
    mem, util, v = _Memory(), _Util(), ctypes.c_uint()
    if _q(lib.nvmlDeviceGetMemoryInfo, h, ctypes.byref(mem)): d["mem_used"], d["mem_total"] = mem.used, mem.total
    if _q(lib.nvmlDeviceGetUtilizationRates, h, ctypes.byref(util)): d["util"] = util.gpu
    if _q(lib.nvmlDeviceGetTemperature, h, 0, ctypes.byref(v)): d["temp_c"] = v.value                     # NVML_TEMPERATURE_GPU
    if _q(lib.nvmlDeviceGetPowerUsage, h, ctypes.byref(v)): d["power_w"] = v.value / 1000                   # milliwatts
    if _q(lib.nvmlDeviceGetClockInfo, h, 1, ctypes.byref(v)): d["clock_mhz"] = v.value                      # NVML_CLOCK_SM
    cnt, procs = ctypes.c_uint(64), (_Proc * 64)()
    if _q(lib.nvmlDeviceGetComputeRunningProcesses, h, ctypes.byref(cnt), procs):
      d["processes"] = [{"pid": p.pid, "mem": p.usedGpuMemory} for p in procs[:cnt.value]]
    out.append(d)
  return out
