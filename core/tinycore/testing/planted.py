"""Planted out-of-bounds accesses for memory-safety tests: a real kernel from a device's own pipeline, with the index
into one of its buffers shifted, so the emulator, a sanitizer or guard pages must report it. Importable from the
subprocesses those tests start (a guard-page hit or a sanitizer report ends the process)."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.renderer import ProgramSpec

def pipeline_program(device: str, n: int) -> ProgramSpec:
  """The program `device`'s pipeline makes for out = 2*x + 1 over n float32s (buffer 0 is out, buffer 1 is x)."""
  import numpy as np
  from tinycore.device import Device
  from tinycore.tensor import Tensor
  from tinycore.codegen import get_program
  t = Tensor(np.arange(n, dtype=np.float32), device=device) * 2 + 1
  return get_program(t.schedule()[-1].ast, Device[device].renderer)

def plant_index(uops: list[UOp], buf: int, shift: int) -> list[UOp]:
  """The linearized program with every INDEX into buffer `buf` moved by `shift` elements (later nodes rebuilt to use it)."""
  new: dict[UOp, UOp] = {}
  out: list[UOp] = []
  planted = 0
  for u in uops:
    src = tuple(new.get(s, s) for s in u.src)
    if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL and u.src[0].arg == buf:
      c = UOp.const(src[1].dtype, shift)
      moved = UOp(Ops.ADD, src[1].dtype, (src[1], c))
      out += [c, moved]
      src, planted = (src[0], moved, *src[2:]), planted + 1
    new[u] = nu = u if src == u.src else u.replace(src=src)
    out.append(nu)
  if not planted: raise ValueError(f"the program has no INDEX into buffer {buf} to plant")
  return out
