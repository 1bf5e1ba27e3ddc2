"""A device's execution model for the emulator: what a plugin's `tinycore_emulator(device)` hook returns.

Tensor-core layouts say, for each lane of a warp and each element of that lane's vector operand, which matrix
element it holds. The emulator gathers the warp's fragments into whole matrices with them, multiplies, and scatters
the result back, so a wrong layout in a renderer shows up as a wrong number."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Callable
from tinycore.dtype import DType

Layout = tuple[tuple[tuple[int, int], ...], ...]   # [lane][element] -> (row, col)

@dataclass(frozen=True)
class TCLayout:
  """One warp-wide matrix instruction D[M,N] = A[M,K] @ B[K,N] + C[M,N], executed by `threads` lanes.
  a/b/c: per lane, per element of its vector operand, the (row, col) held in A, B and C/D. WMMA UOps name it by `name`."""
  name: str
  dims: tuple[int, int, int]          # (M, N, K)
  dtype_in: DType
  dtype_out: DType
  threads: int
  a: Layout
  b: Layout
  c: Layout
  # what the instruction does to A and B before multiplying (NVIDIA's tf32: float32 rounded to a 10-bit mantissa)
  round_inputs: Callable | None = field(default=None, compare=False)
  def __post_init__(self):
    M, N, K = self.dims
    for nm, lay, (R, C) in (("a", self.a, (M, K)), ("b", self.b, (K, N)), ("c", self.c, (M, N))):
      assert len(lay) == self.threads, f"{self.name}: layout {nm} has {len(lay)} lanes, want {self.threads}"
      cells = {rc for lane in lay for rc in lane}
      # every element must be held by some lane (A/B may be replicated across lanes, e.g. RDNA3)
      assert cells == {(r, c) for r in range(R) for c in range(C)}, f"{self.name}: layout {nm} doesn't cover the {R}x{C} matrix"
    assert sum(len(l) for l in self.c) == M * N, f"{self.name}: each C element must be held by exactly one lane"

def layout(threads: int, elems: int, fn: Callable[[int, int], tuple[int, int]]) -> Layout:
  """A layout from fn(lane, element) -> (row, col)."""
  return tuple(tuple(fn(l, e) for e in range(elems)) for l in range(threads))

@dataclass(frozen=True)
class ExecModel:
  """warp_size: lanes that execute in lockstep and share a WMMA; local_mem: bytes of shared memory per workgroup;
  max_workgroup: most threads in one workgroup; tensor_cores: the TCLayouts the device's WMMA UOps name."""
  name: str = "generic"
  warp_size: int = 32
  local_mem: int = 48 * 1024
  max_workgroup: int = 1024
  tensor_cores: tuple[TCLayout, ...] = field(default=())
  # check(base_renderer, name, uops): called for every kernel the emulator renders, so a plugin can also render it
  # with its real renderer and check the source (Metal's MSL checks); raise to fail the kernel
  check: Callable | None = field(default=None, compare=False)
  def tc(self, name: str) -> TCLayout:
    for t in self.tensor_cores:
      if t.name == name: return t
    from tinycore.emulator.errors import EmulatorError
    raise EmulatorError(f"{self.name}: no tensor-core layout {name!r} (have {[t.name for t in self.tensor_cores]})")

def as_model(m) -> ExecModel:
  """A plugin may return an ExecModel, a dict of its fields, or None (the generic model)."""
  if m is None: return ExecModel()
  if isinstance(m, dict): return ExecModel(**{**m, "tensor_cores": tuple(m.get("tensor_cores", ()))})
  return m
