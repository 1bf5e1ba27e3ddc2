"""The light entry-point module of tinycore-opencl: declares CL (alias GPU, tinygrad's old name) with its OpenCL C
renderer, the probe/smi hooks and EMU+CL (the CL pipeline on core's emulator: codegen checks with no OpenCL driver).
pyopencl is imported only when the device opens or a listing probes."""
from tinycore.interface import Interface, EmuInterface
TINYCORE_PLUGIN_API = (1, 1)

def _open(device_name: str, spec):
  from tinycore.device import DeviceUnavailable
  if spec.iface == "EMU":
    from tinycore.emulator import open_emulated
    from tinycore_opencl.renderer_cl import CLRenderer
    return open_emulated(device_name, CLRenderer(spec.arch), {"name": "opencl", "local_mem": CLRenderer.shared_max, "max_workgroup": 256})
  from tinycore_opencl.platforms import missing
  if (why := missing()): raise DeviceUnavailable(why)
  from tinycore_opencl.device import open_device
  return open_device(device_name, spec)

class ICDIface(Interface):
  name, default = "ICD", True   # the Khronos ICD loader: every platform installed in /etc/OpenCL/vendors
  def count(self):
    from tinycore_opencl.platforms import missing, cl_devices
    return 0 if missing() else len(cl_devices())
  def unavailable_reason(self):
    from tinycore_opencl.platforms import missing
    return missing()

def tinycore_devices():
  # below CPU (10): OpenCL is the way in for GPUs without a native plugin, but on most machines it is PoCL, a CPU
  # that the CPU plugin drives better; choose it with DEV=CL
  return [{"name": "CL", "factory": _open, "priority": 5, "aliases": ("GPU",), "description": "any OpenCL device through pyopencl"}]

def tinycore_renderers(device):
  if device != "CL": return None
  return [{"name": "CL", "default": True, "load": "tinycore_opencl.renderer_cl:CLRenderer", "description": "OpenCL C built by the device's driver"}]

def tinycore_interfaces(device):
  return [ICDIface(), EmuInterface()] if device == "CL" else None

def _rows() -> list[dict]:
  from tinycore_opencl.platforms import missing, cl_devices, describe
  if missing(): return []
  return [describe(d) for d in cl_devices()]

def tinycore_probe():
  return [{"device": "CL", "index": i, "name": r["name"], "platform": r["platform"], "driver": r["driver"]} for i, r in enumerate(_rows())]

def tinycore_smi(device):
  if device != "CL": return None
  from tinycore_opencl.platforms import missing
  if (why := missing()): return [{"device": "CL", "index": 0, "status": why}]
  # OpenCL reports sizes, not usage: memory total and the limits codegen works with
  return [{"device": "CL", "index": i, "name": r["name"], "mem_total": r["mem_total"],
           "status": f"{r['platform']} {r['version']}, driver {r['driver']}, local memory {r['local_mem']} B, work-group <= {r['max_workgroup']}"}
          for i, r in enumerate(_rows())]
