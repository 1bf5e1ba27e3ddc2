"""Shared memory above the 48 KB a kernel may declare statically: the rest of an SM's carve-out is dynamic shared memory,
which a kernel only gets when its function opts in (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES) and each launch
asks for it (cuLaunchKernel's sharedMemBytes).

The kernel carries its own requirement: the CUDA renderer defines `extern "C" __device__ unsigned <name>_dynamic_smem`
next to a kernel whose panels live in dynamic shared memory, and the loader reads it from the module
(cuModuleGetGlobal), so a cached binary needs nothing beside it."""
from __future__ import annotations

STATIC_MAX = 48 * 1024   # what __shared__ arrays may total; above it a kernel must use dynamic shared memory

# the most shared memory one block may have, opting in (CUDA C Programming Guide, "Technical Specifications per
# Compute Capability"): 227 KB on sm_90 and sm_100, 163 KB on sm_80/87, 99 KB on sm_86/89/120, 64 KB on sm_75, 96 KB on sm_70
_OPT_IN_MAX = {70: 96 * 1024, 72: 96 * 1024, 75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
               90: 227 * 1024, 100: 227 * 1024, 101: 227 * 1024, 103: 227 * 1024, 120: 99 * 1024, 121: 99 * 1024}

def block_limit(arch: str) -> int:
  """Bytes of shared memory one block may use on `arch` ('sm_90'), dynamic included."""
  cc = int(arch[3:].rstrip("af"))
  return _OPT_IN_MAX.get(cc, STATIC_MAX if cc < 70 else max(v for k, v in _OPT_IN_MAX.items() if k <= cc))

def symbol(kernel: str) -> str: return f"{kernel}_dynamic_smem"

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CUDA_ERROR_NOT_FOUND = 500

def opt_in(lib, module, fn, kernel: str, check) -> int:
  """The dynamic shared bytes `kernel` in `module` declares (0 if none), after opting its function in to them."""
  import ctypes
  ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
  rc = lib.cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size), module, symbol(kernel).encode())
  if rc == CUDA_ERROR_NOT_FOUND: return 0
  check(rc, f"cuModuleGetGlobal({symbol(kernel)})")
  if size.value != 4: raise RuntimeError(f"{kernel}: {symbol(kernel)} is {size.value} bytes, expected a 4-byte unsigned")
  val = ctypes.c_uint32()
  check(lib.cuMemcpyDtoH_v2(ctypes.byref(val), ctypes.c_void_p(ptr.value), 4), f"cuMemcpyDtoH({symbol(kernel)})")
  if val.value > STATIC_MAX: check(lib.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, val.value),
                                   f"cuFuncSetAttribute({kernel}, MAX_DYNAMIC_SHARED_SIZE_BYTES={val.value})")
  return val.value
