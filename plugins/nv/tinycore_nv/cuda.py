"""The CUDA driver API (libcuda) through ctypes: only the calls the runtime uses, each checked.

Contexts are the devices' primary contexts (cuDevicePrimaryCtxRetain): the same context the CUDA runtime and other
libraries share, and a signature that did not change across driver versions (cuCtxCreate did in CUDA 13)."""
from __future__ import annotations
import ctypes, ctypes.util, functools
from tinycore.device import DeviceUnavailable

CU_DEVICE_ATTRIBUTE = {"max_threads_per_block": 1, "max_grid_dim_y": 6, "max_grid_dim_z": 7, "max_shared_per_block": 8,
  "warp_size": 10, "sm_count": 16, "cc_major": 75, "cc_minor": 76, "pci_bus_id": 33, "pci_device_id": 34, "pci_domain_id": 50}

class CUDAError(RuntimeError): pass

@functools.cache
def libcuda() -> ctypes.CDLL:
  """The loaded driver library, initialized; DeviceUnavailable when there is none or no GPU."""
  path = ctypes.util.find_library("cuda")
  names = [path] if path else []
  for n in names + ["libcuda.so.1", "libcuda.so"]:
    try: lib = ctypes.CDLL(n); break
    except OSError: continue
  else: raise DeviceUnavailable("libcuda.so not found (install the NVIDIA driver)")
  lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
  for f in ("cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2"): getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
  lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
  lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
  lib.cuMemcpyPeer.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
  lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
  lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
  lib.cuModuleGetGlobal_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_char_p]
  lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
  lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
  # CUDA 12.8+ drivers add _v2 (the headers of 13 map the plain name to it); older ones have only the plain one
  lib.event_elapsed = getattr(lib, "cuEventElapsedTime_v2", None) or lib.cuEventElapsedTime
  lib.event_elapsed.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
  for f in ("cuCtxSetCurrent", "cuEventRecord", "cuEventSynchronize", "cuModuleUnload", "cuEventDestroy_v2"):
    getattr(lib, f).argtypes = [ctypes.c_void_p] * (2 if f == "cuEventRecord" else 1)
  rc = lib.cuInit(0)
  if rc == 100: raise DeviceUnavailable("no CUDA-capable GPU (cuInit: CUDA_ERROR_NO_DEVICE)")
  if rc != 0: raise DeviceUnavailable(f"cuInit failed: {_errstr(lib, rc)}")
  return lib

def _errstr(lib, rc: int) -> str:
  s = ctypes.c_char_p()
  lib.cuGetErrorString(rc, ctypes.byref(s))
  return f"{s.value.decode() if s.value else 'unknown error'} ({rc})"

def check(rc: int, what: str = "CUDA call"):
  if rc != 0: raise CUDAError(f"{what} failed: {_errstr(libcuda(), rc)}")

def device_count() -> int:
  n = ctypes.c_int()
  check(libcuda().cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
  return n.value

def attribute(dev: int, name: str) -> int:
  v = ctypes.c_int()
  check(libcuda().cuDeviceGetAttribute(ctypes.byref(v), CU_DEVICE_ATTRIBUTE[name], dev), f"cuDeviceGetAttribute({name})")
  return v.value

def device_name(dev: int) -> str:
  buf = ctypes.create_string_buffer(256)
  check(libcuda().cuDeviceGetName(buf, 256, dev), "cuDeviceGetName")
  return buf.value.decode()

def driver_version() -> int:
  v = ctypes.c_int()
  check(libcuda().cuDriverGetVersion(ctypes.byref(v)), "cuDriverGetVersion")
  return v.value

def mem_info() -> tuple[int, int]:
  """(free, total) bytes of the current context's device."""
  free, total = ctypes.c_size_t(), ctypes.c_size_t()
  check(libcuda().cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
  return free.value, total.value
