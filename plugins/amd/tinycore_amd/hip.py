"""ROCm's HIP runtime (libamdhip64) through ctypes: only the calls the AMD runtime uses, each checked.

Written against the documented HIP C API (hip_runtime_api.h) and tested here against a fake libamdhip64
(tests/fake_hip/fake_amdhip64.c); it has NOT yet been run on AMD hardware.

The library is TINYCORE_LIBAMDHIP64 (a path) when set, else the first of find_library("amdhip64"), libamdhip64.so,
.so.7, .so.6 and /opt/rocm/lib/libamdhip64.so that loads. hipDeviceProp_t changed layout between ROCm versions
(hipGetDevicePropertiesR0600 since 6.0), so the arch is found by scanning an oversized properties buffer."""
from __future__ import annotations
import ctypes, ctypes.util, functools, os, re
from tinycore.device import DeviceUnavailable

OUT_OF_MEMORY, NO_DEVICE = 2, 100                   # hipErrorOutOfMemory, hipErrorNoDevice
HTOD, DTOH, DTOD = 1, 2, 3                           # hipMemcpyKind
BUFFER_POINTER, BUFFER_SIZE, END = 1, 2, 3           # HIP_LAUNCH_PARAM_* markers of hipModuleLaunchKernel's `extra`
PROPS_BYTES = 16384                                  # far more than any hipDeviceProp_t (R0600 is ~1.5 KB)

class HIPError(RuntimeError): pass

def _names() -> list[str]:
  if (p := os.environ.get("TINYCORE_LIBAMDHIP64")): return [p]
  found = ctypes.util.find_library("amdhip64")
  return ([found] if found else []) + ["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so"]

@functools.cache
def libhip() -> ctypes.CDLL:
  """The loaded HIP runtime, initialized; DeviceUnavailable when there is none or it sees no GPU."""
  for n in _names():
    try: lib = ctypes.CDLL(n); break
    except OSError as e: err = e
  else:
    if (p := os.environ.get("TINYCORE_LIBAMDHIP64")): raise DeviceUnavailable(f"TINYCORE_LIBAMDHIP64={p} could not be loaded: {err}")
    raise DeviceUnavailable("libamdhip64.so not found: install ROCm's HIP runtime, or set TINYCORE_LIBAMDHIP64 to its path")
  P, I, U, S, vp = ctypes.POINTER, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p
  lib.hipGetErrorString.argtypes, lib.hipGetErrorString.restype = [I], ctypes.c_char_p
  for f, a in {"hipInit": [U], "hipGetDeviceCount": [P(I)], "hipSetDevice": [I], "hipDeviceGetName": [ctypes.c_char_p, I, I],
               "hipMemGetInfo": [P(S), P(S)], "hipMalloc": [P(vp), S], "hipFree": [vp], "hipMemcpy": [vp, vp, S, I],
               "hipMemcpyPeer": [vp, I, vp, I, S], "hipModuleLoadData": [P(vp), ctypes.c_char_p],
               "hipModuleGetFunction": [P(vp), vp, ctypes.c_char_p],
               "hipModuleLaunchKernel": [vp] + [U] * 7 + [vp, P(vp), P(vp)], "hipModuleUnload": [vp], "hipEventCreate": [P(vp)],
               "hipEventRecord": [vp, vp], "hipEventSynchronize": [vp], "hipEventElapsedTime": [P(ctypes.c_float), vp, vp],
               "hipEventDestroy": [vp], "hipDeviceSynchronize": []}.items():
    getattr(lib, f).argtypes, getattr(lib, f).restype = a, I
  # ROCm 6+ headers map hipGetDeviceProperties to the R0600 symbol; older libraries export only the plain one
  lib.get_props = getattr(lib, "hipGetDevicePropertiesR0600", None) or getattr(lib, "hipGetDeviceProperties", None)
  if lib.get_props is not None: lib.get_props.argtypes, lib.get_props.restype = [vp, I], I
  rc = lib.hipInit(0)
  if rc == NO_DEVICE: raise DeviceUnavailable("ROCm's HIP runtime sees no AMD GPU (hipInit: hipErrorNoDevice)")
  if rc != 0: raise DeviceUnavailable(f"hipInit failed: {_errstr(lib, rc)}")
  return lib

def _errstr(lib, rc: int) -> str:
  s = lib.hipGetErrorString(rc)
  return f"{s.decode(errors='replace') if s else 'unknown error'} ({rc})"

def check(rc: int, what: str = "HIP call"):
  if rc != 0: raise HIPError(f"{what} failed: {_errstr(libhip(), rc)}")

def device_count() -> int:
  n = ctypes.c_int()
  rc = libhip().hipGetDeviceCount(ctypes.byref(n))
  if rc == NO_DEVICE: return 0
  check(rc, "hipGetDeviceCount")
  return n.value

def device_name(dev: int) -> str:
  buf = ctypes.create_string_buffer(256)
  check(libhip().hipDeviceGetName(buf, 256, dev), "hipDeviceGetName")
  return buf.value.decode(errors="replace")

def mem_info(dev: int) -> tuple[int, int]:
  """(free, total) bytes of GPU `dev`."""
  free, total = ctypes.c_size_t(), ctypes.c_size_t()
  check(libhip().hipSetDevice(dev), "hipSetDevice")
  check(libhip().hipMemGetInfo(ctypes.byref(free), ctypes.byref(total)), "hipMemGetInfo")
  return free.value, total.value

def gcn_arch(dev: int) -> str | None:
  """The GPU's gfx target ('gfx1100'; features like ':sramecc+:xnack-' dropped) from hipDeviceProp_t.gcnArchName,
  found by content since its offset differs between struct versions; None when the properties do not say."""
  lib = libhip()
  if lib.get_props is None: return None
  buf = ctypes.create_string_buffer(PROPS_BYTES)
  if lib.get_props(buf, dev) != 0: return None
  # name[256] comes first in every layout and may itself read 'gfx...': search after it
  m = re.compile(rb"gfx[0-9a-f]{3,4}(?=[:\x00])").search(buf.raw, 256)
  return m.group().decode() if m else None
