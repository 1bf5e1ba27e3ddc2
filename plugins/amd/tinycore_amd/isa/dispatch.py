"""Dispatching a kernel over a grid: work-groups one after another, the waves of a work-group interleaved at barriers.

Initial register state follows LLVM's AMDGPUUsage "Initial Kernel Execution State": the user SGPRs the descriptor
enables, in their fixed order from s0, then the work-group ids from SGPR USER_SGPR_COUNT, and the work-item ids packed
in v0 (x in bits 0-9, y in 10-19, z in 20-29) as RDNA3/4 always do."""
from __future__ import annotations
import functools
from dataclasses import dataclass, field
import numpy as np
from tinycore_amd.isa.loader import Image, load
from tinycore_amd.isa.memory import GlobalMemory
from tinycore_amd.isa.wave import Wave, ExecutionError, TTMP

SUPPORTED = ("gfx1100", "gfx1101", "gfx1102", "gfx1200", "gfx1201")
MAX_LDS = 64 * 1024

@dataclass
class DispatchStats:
  instructions: int = 0
  opcodes: set = field(default_factory=set)   # distinct mnemonics executed (without _e32/_e64)
  waves: int = 0
  workgroups: int = 0

@functools.lru_cache(maxsize=64)
def _image(code_object: bytes) -> tuple[Image, dict]:
  """The loaded image and its decoded-instruction cache (shared by every dispatch of the same code object)."""
  return load(code_object), {}

class WorkGroup:
  def __init__(self, image: Image, arch: str, mem: GlobalMemory, lds_size: int):
    self.code, self.arch, self.mem = image.memory, arch, mem
    self.lds = np.zeros(lds_size, np.uint8)

def _check_dims(name: str, dims, limit: int) -> tuple[int, int, int]:
  d = tuple(int(x) for x in dims)
  if len(d) != 3 or any(x < 1 for x in d): raise ValueError(f"{name} must be three positive ints, got {dims!r}")
  if limit and np.prod(d) > limit: raise ValueError(f"{name} {d} has {int(np.prod(d))} work-items; at most {limit} are allowed")
  return d  # type: ignore[return-value]

def dispatch(code_object: bytes, kernel: str, arch: str, grid: tuple[int, int, int], block: tuple[int, int, int],
             kernarg_addr: int, mem: GlobalMemory, *, dispatch_ptr: int = 0, max_instructions: int = 200_000_000) -> DispatchStats:
  """Run `kernel` of `code_object` over grid (in work-groups) x block (work-items) against `mem`."""
  if arch not in SUPPORTED: raise ValueError(f"the ISA emulator runs RDNA3/RDNA4 (wave32): {', '.join(SUPPORTED)}; not {arch!r}")
  image, program = _image(bytes(code_object))
  if image.arch != arch: raise ValueError(f"the code object is for {image.arch} but the dispatch asks for {arch}")
  if (kd := image.kernels.get(kernel)) is None:
    raise ValueError(f"the code object has no kernel {kernel!r} (it has {', '.join(image.kernels) or 'none'})")
  grid, block = _check_dims("grid", grid, 0), _check_dims("block", block, 1024)
  if not kd.wave32: raise ValueError(f"{kernel} is compiled for wave64; the emulator runs wave32 only")
  if kd.lds_size > MAX_LDS: raise ValueError(f"{kernel} asks for {kd.lds_size} bytes of LDS; a work-group has {MAX_LDS}")
  if kd.scratch_size: raise NotImplementedError(f"{kernel} uses {kd.scratch_size} bytes of scratch per lane; scratch is not emulated")
  if (kd.dispatch_ptr or kd.queue_ptr) and not dispatch_ptr:
    raise ValueError(f"{kernel} reads the dispatch packet (its descriptor enables the dispatch/queue pointer): pass dispatch_ptr")
  if block[1] > 1023 or block[0] > 1023 or block[2] > 1023: raise ValueError(f"block {block}: each dimension must fit the 10-bit work-item id")
  user = []
  if kd.private_segment_buffer: user += [0, 0, 0, 0]
  if kd.dispatch_ptr: user += [dispatch_ptr & 0xFFFFFFFF, dispatch_ptr >> 32]
  if kd.queue_ptr: user += [0, 0]
  if kd.kernarg_ptr: user += [kernarg_addr & 0xFFFFFFFF, kernarg_addr >> 32]
  if kd.dispatch_id: user += [0, 0]
  if kd.flat_scratch_init: user += [0, 0]
  if kd.private_segment_size: user += [0]
  if len(user) > kd.user_sgprs: raise ValueError(f"{kernel}: descriptor enables {len(user)} user SGPRs but USER_SGPR_COUNT is {kd.user_sgprs}")
  nthreads = block[0] * block[1] * block[2]
  tid = np.arange(nthreads)
  packed = (tid % block[0]) | ((tid // block[0]) % block[1]) << 10 | (tid // (block[0] * block[1])) << 20
  stats = DispatchStats()
  for gz in range(grid[2]):
    for gy in range(grid[1]):
      for gx in range(grid[0]):
        group = WorkGroup(image, arch, mem, kd.lds_size)
        waves = []
        for w in range(0, nthreads, 32):
          wave = Wave(group, kd.entry, kd.vgprs, stats)
          wave.s[:len(user)] = user
          s = kd.user_sgprs
          for on, gid in zip(kd.workgroup_id, (gx, gy, gz)):
            if on: wave.s[s] = gid; s += 1
          if kd.workgroup_info: wave.s[s] = 0; s += 1
          if arch.startswith("gfx12"):   # RDNA4 also has the ids in trap temporaries: ttmp9 = x, ttmp7 = y | z << 16
            wave.s[TTMP + 9], wave.s[TTMP + 7] = gx, gy | gz << 16
          lanes = packed[w:w + 32]
          wave.v[0, :len(lanes)] = lanes
          wave.s[126] = (1 << len(lanes)) - 1
          waves.append(wave)
        stats.waves += len(waves)
        stats.workgroups += 1
        _run_group(waves, program, max_instructions)
  return stats

def _run_group(waves: list[Wave], program: dict, limit: int):
  """Run each wave to its next barrier or its end; release the barrier when every wave still running reached it."""
  while True:
    for w in waves:
      if not w.done and not w.at_barrier: w.run(program, limit)
    live = [w for w in waves if not w.done]
    if not live: return
    if not all(w.at_barrier for w in live): raise ExecutionError("internal: a wave stopped neither at a barrier nor at s_endpgm")
    for w in live: w.at_barrier = False
