"""Which OpenCL devices this machine has, and why none when there are none (pyopencl imported here, on first use).

CL:n numbers the devices of every platform the ICD loader lists, GPUs first, so CL means the best device."""
from __future__ import annotations
import functools, importlib.util

INSTALL_PYOPENCL = "pip install pyopencl"
INSTALL_ICD = ("install an OpenCL driver (ICD): `apt-get install pocl-opencl-icd` for CPUs (PoCL), or your GPU vendor's "
               "OpenCL runtime; `clinfo` lists what the loader sees")

def pyopencl_missing() -> str | None:
  if importlib.util.find_spec("pyopencl") is None: return f"the pyopencl package is not installed ({INSTALL_PYOPENCL})"
  return None

@functools.cache
def cl_devices() -> tuple:
  """Every OpenCL device (pyopencl Device objects), GPUs first; () when pyopencl has no platform."""
  import pyopencl as cl
  try: platforms = cl.get_platforms()
  except cl.Error: return ()   # the loader found no ICD (PLATFORM_NOT_FOUND_KHR)
  devs = []
  for p in platforms:
    try: devs += p.get_devices()
    except cl.Error: pass   # a platform with no devices of any type
  return tuple(sorted(devs, key=lambda d: not d.type & cl.device_type.GPU))

def missing() -> str | None:
  """Why CL can't open on this machine, most basic reason first; None when a device is there."""
  if (why := pyopencl_missing()): return why
  try: n = len(cl_devices())
  except Exception as e: return f"pyopencl could not load an OpenCL library ({type(e).__name__}: {e}); {INSTALL_ICD}"
  return None if n else f"no OpenCL platform or device found: {INSTALL_ICD}"

def describe(d) -> dict:
  """A device's identity and limits in plain Python values (tinyctl, smi, the renderer)."""
  return {"name": d.name.strip(), "platform": d.platform.name.strip(), "version": d.version.strip(), "driver": d.driver_version.strip(),
          "extensions": frozenset(d.extensions.split()), "mem_total": d.global_mem_size, "local_mem": d.local_mem_size,
          "max_workgroup": d.max_work_group_size, "max_item_sizes": tuple(d.max_work_item_sizes), "mem_align": d.mem_base_addr_align // 8,
          "fp32_correct_div": bool(d.single_fp_config & 128),   # CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT
          "is_cpu": bool(d.type & 2)}   # CL_DEVICE_TYPE_CPU
