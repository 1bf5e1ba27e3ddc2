"""NVRTC through ctypes: CUDA C -> PTX, and -> cubin when a real arch (sm_XX) is given.

libnvrtc comes from the CUDA toolkit (CUDA_PATH, /usr/local/cuda*) or else the `nvidia-cuda-nvrtc` wheel (the `nvrtc`
extra of tinycore-nv). The wheel's folder is found through its metadata, so no LD_LIBRARY_PATH is needed; its
libnvrtc-builtins is loaded first with RTLD_GLOBAL because libnvrtc dlopens it by bare name."""
from __future__ import annotations
import ctypes, ctypes.util, functools, glob, os
from tinycore.compiler import Compiler, CompileError

def _toolkits() -> list[str]:
  roots = [os.getenv(k) for k in ("CUDA_PATH", "CUDA_HOME")] + ["/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
  return [r for r in roots if r and os.path.isdir(r)]

def _wheel_libdirs() -> list[str]:
  from importlib import metadata
  out = []
  for dist in ("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvrtc-cu13"):
    try: files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError: continue
    out += [os.path.dirname(str(f.locate())) for f in files if os.path.basename(str(f)).startswith("libnvrtc.so")]
  return list(dict.fromkeys(out))

@functools.cache
def find_nvrtc() -> str | None:
  """Path of libnvrtc.so (toolkit first, then the pip wheel, then the loader's search path)."""
  dirs = [d for r in _toolkits() for d in (os.path.join(r, "lib64"), os.path.join(r, "lib"), os.path.join(r, "targets/x86_64-linux/lib"))]
  for d in dirs + _wheel_libdirs():
    if (libs := sorted(glob.glob(os.path.join(d, "libnvrtc.so*")), key=len)): return libs[0]
  return ctypes.util.find_library("nvrtc")

@functools.cache
def find_cuda_include() -> str | None:
  """A folder with cuda_fp16.h/cuda_bf16.h (NVRTC has no built-in copy): the toolkit's include folder."""
  for r in _toolkits():
    if os.path.exists(os.path.join(r, "include", "cuda_fp16.h")): return os.path.join(r, "include")
  return None

@functools.cache
def _lib() -> ctypes.CDLL:
  path = find_nvrtc()
  if path is None:
    raise FileNotFoundError("libnvrtc.so not found: install the CUDA toolkit or `pip install 'tinycore-nv[nvrtc]'` (nvidia-cuda-nvrtc)")
  for b in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins*.so*")), key=lambda p: ("alt" in p, len(p)))[:1]:
    ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
  lib = ctypes.CDLL(path)
  lib.nvrtcGetErrorString.restype = ctypes.c_char_p
  lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p,
                                     ctypes.c_void_p]
  lib.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
  for f in ("nvrtcGetProgramLogSize", "nvrtcGetPTXSize", "nvrtcGetCUBINSize"):
    getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
  for f in ("nvrtcGetProgramLog", "nvrtcGetPTX", "nvrtcGetCUBIN"): getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
  lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
  return lib

def nvrtc_version() -> tuple[int, int]:
  a, b = ctypes.c_int(), ctypes.c_int()
  _lib().nvrtcVersion(ctypes.byref(a), ctypes.byref(b))
  return a.value, b.value

def _check(rc: int, what: str):
  if rc != 0: raise RuntimeError(f"NVRTC {what} failed: {_lib().nvrtcGetErrorString(rc).decode()}")

def _get(prog, size_fn, get_fn) -> bytes:
  n = ctypes.c_size_t()
  _check(size_fn(prog, ctypes.byref(n)), size_fn.__name__)
  buf = ctypes.create_string_buffer(n.value)
  _check(get_fn(prog, buf), get_fn.__name__)
  return buf.raw

def nvrtc_compile(src: str, arch: str, cubin: bool, include: str | None = None, name: str = "kernel.cu") -> bytes:
  """`arch` like sm_90; cubin=False gives NUL-terminated PTX for compute_XX (any newer driver can JIT it)."""
  lib = _lib()
  prog = ctypes.c_void_p()
  _check(lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None), "nvrtcCreateProgram")
  try:
    opts = [f"--gpu-architecture={arch if cubin else arch.replace('sm_', 'compute_')}", "-std=c++17", "-diag-suppress=177"]
    if include: opts.append(f"-I{include}")
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    log = _get(prog, lib.nvrtcGetProgramLogSize, lib.nvrtcGetProgramLog).rstrip(b"\0").decode(errors="replace")
    if rc != 0: raise CompileError(f"NVRTC failed to compile {name} for {arch}: {lib.nvrtcGetErrorString(rc).decode()}", src, log)
    return _get(prog, lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if cubin else _get(prog, lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
  finally: lib.nvrtcDestroyProgram(ctypes.byref(prog))

class NVRTCCompiler(Compiler):
  """CUDA C -> cubin for `arch` (what the runtime loads); `ptx=True` gives PTX instead (driver-JIT portable)."""
  def __init__(self, arch: str = "sm_80", ptx: bool = False):
    self.arch, self.ptx, self.include = arch, ptx, find_cuda_include()
    super().__init__(f"nvrtc-{'.'.join(map(str, nvrtc_version()))}-{arch}-{'ptx' if ptx else 'cubin'}-{bool(self.include)}")
  def compile(self, src: str) -> bytes: return nvrtc_compile(src, self.arch, not self.ptx, self.include)
  def to_ptx(self, src: str) -> str: return nvrtc_compile(src, self.arch, False, self.include).rstrip(b"\0").decode()
