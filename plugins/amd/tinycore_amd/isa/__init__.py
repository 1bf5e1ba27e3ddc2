"""An RDNA3/RDNA4 instruction emulator: runs the code objects our AMD renderers compile, instruction by instruction,
over a GPU memory the caller provides (the mock KFD driver, or ArenaMemory in tests).

  stats = dispatch(code_object, kernel, arch, grid, block, kernarg_addr, mem)

grid counts work-groups, block work-items; mem implements GlobalMemory (load/store of byte rows at uint64 addresses).
Python + numpy, vectorized across the 32 lanes of a wave32. See decode.py (encodings), wave.py (execution), valu.py
and salu.py (what each op computes), wmma.py (matrix layouts), dispatch.py (initial state, work-groups, barriers)."""
from tinycore_amd.isa.memory import GlobalMemory, ArenaMemory, DictMemory, MemoryFault
from tinycore_amd.isa.dispatch import dispatch, DispatchStats, SUPPORTED
from tinycore_amd.isa.decode import UnknownInstruction, decode
from tinycore_amd.isa.wave import ExecutionError
from tinycore_amd.isa.loader import BadCodeObject, load

__all__ = ["GlobalMemory", "ArenaMemory", "DictMemory", "MemoryFault", "dispatch", "DispatchStats", "SUPPORTED", "UnknownInstruction",
           "decode", "ExecutionError", "BadCodeObject", "load"]
