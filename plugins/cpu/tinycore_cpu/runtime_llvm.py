"""Runs the object files LLVMCompiler makes: llvmlite's MCJIT links them in memory (no dlopen, no system linker).

Same call signature and threading as CPUProgram: fxn(*buf_ptrs, *int_vals, core_start, core_end)."""
from __future__ import annotations
import ctypes, ctypes.util, functools, struct
import llvmlite.binding as llvm
from tinycore_cpu.runtime import CPUProgram
from tinycore_cpu.compiler_llvm import host_target_machine

@functools.cache
def _load_runtime_libs() -> None:
  # libm is already in the process; libgcc_s has the soft-float helpers LLVM may call (half conversions without F16C)
  if (p := ctypes.util.find_library("gcc_s")) is not None:
    try: llvm.load_library_permanently(p)
    except RuntimeError: pass

@functools.cache
def _funcptr_type(): return ctypes.CDLL(None)._FuncPtr   # cdecl, GIL released during the call, no fixed argtypes

def undefined_symbols(obj: bytes) -> list[str]:
  """Global symbols an ELF64 little-endian relocatable object needs from outside ([] for other formats)."""
  if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1: return []
  shoff, shentsize, shnum = struct.unpack_from("<Q", obj, 0x28)[0], *struct.unpack_from("<HH", obj, 0x3A)
  secs = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
  out = []
  for _, typ, _, _, off, size, link, _, _, entsize in secs:
    if typ != 2: continue   # SHT_SYMTAB
    stroff = secs[link][4]
    for j in range(size // entsize):
      name, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", obj, off + j * entsize)
      if shndx == 0 and name and info >> 4 in (1, 2): out.append(obj[stroff + name:obj.index(b"\0", stroff + name)].decode())
  return out

class LLVMProgram(CPUProgram):
  def __init__(self, name: str, lib: bytes):
    self.name = name
    _load_runtime_libs()
    # one engine per kernel: it owns the executable memory, so it lives as long as the program does. It also owns (and
    # frees on disposal) the target machine it is given, so it gets its own: sharing the cached one was a double free
    # (a segfault when a second LLVM program was garbage-collected)
    self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host_target_machine.__wrapped__())
    # an unresolved call would jump to address 0: refuse to load instead
    if (missing := [s for s in undefined_symbols(lib) if not llvm.address_of_symbol(s)]):
      raise RuntimeError(f"LLVM: kernel {name!r} calls {', '.join(missing)}, which this process doesn't provide")
    self.engine.add_object_file(llvm.ObjectFileRef.from_data(lib))
    self.engine.finalize_object()
    if not (addr := self.engine.get_function_address(name)): raise RuntimeError(f"LLVM: kernel {name!r} not found in its object file")
    # a CDLL function pointer with no argtypes takes the ctypes args CPUProgram passes, and releases the GIL
    self.fxn = _funcptr_type()(addr)
    self.fxn.restype = None
