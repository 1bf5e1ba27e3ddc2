"""The light entry-point module of tinycore-cpu: declarations only; compilers and runtimes load on first open."""
TINYCORE_PLUGIN_API = (1, 1)

def _open(device_name: str, spec):
  from tinycore_cpu.device import open_device   # heavy: compilers, ctypes
  return open_device(device_name, spec)

def tinycore_devices():
  return [{"name": "CPU", "factory": _open, "priority": 10, "description": "the host CPU (C via gcc/clang, or LLVM IR)"}]

def tinycore_renderers(device):
  if device != "CPU": return None
  return [{"name": "C", "aliases": ("CLANG",), "default": True, "load": "tinycore_cpu.renderer_c:CRenderer",
           "description": "C compiled by clang or gcc"},
          {"name": "LLVM", "load": "tinycore_cpu.renderer_llvm:LLVMRenderer", "description": "LLVM IR compiled by llvmlite"}]

def tinycore_probe():
  from tinycore_cpu.probe import probe
  return [probe()]

def tinycore_smi(device):
  if device != "CPU": return None
  from tinycore_cpu.smi import smi
  return [smi()]
