"""The integer type a kernel's index math is rendered in.

Codegen reasons about indices as exact integers (dtypes.index). A kernel gets int32 when every index value (each node's
value range, loop bounds and variables included) and every buffer's element count fit int32, because 32-bit math is
what small kernels are fastest in; otherwise int64, if the renderer lists 64 in `Renderer.index_widths`, else a clear
error naming the limit. Past int32 a 32-bit index would wrap and silently read the wrong elements."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.dtype import DType, dtypes, PtrDType

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1

class IndexWidthError(ValueError):
  """A kernel needs wider index math than its renderer can give."""

def _widest(uops: list[UOp]) -> tuple[int, int, int]:
  """(lowest index value, highest index value, biggest buffer element count) of a linearized program."""
  lo = hi = biggest = 0
  # a thread id built without its size (hand-written programs) has no known extent: what is computed from it is no evidence
  unsized = {u for u in uops if u.op is Ops.SPECIAL and not u.src and len(u.arg) < 2}
  for u in uops:
    if u.dtype == dtypes.index:
      if unsized and any(x in unsized for x in u.toposort()): continue
      lo, hi = min(lo, u.vmin), max(hi, u.vmax)
    elif u.op is Ops.DEFINE_GLOBAL and isinstance(u.dtype, PtrDType): biggest = max(biggest, u.dtype.size)
  return lo, hi, biggest

def index_dtype(uops: list[UOp], renderer) -> DType:
  """int32 where it holds every index of `uops`, else int64 where `renderer` can render it (raises IndexWidthError if not)."""
  lo, hi, biggest = _widest(uops)
  if INT32_MIN <= lo and hi <= INT32_MAX and biggest <= INT32_MAX: return dtypes.int32
  if 64 in renderer.index_widths: return dtypes.int64
  what = f"a buffer of {biggest} elements" if biggest > INT32_MAX else f"index values in [{lo}, {hi}]"
  raise IndexWidthError(f"{type(renderer).__name__} ({renderer.device}) renders index math in at most "
                        f"{max(renderer.index_widths)} bits, up to {INT32_MAX} (2**31-1) elements; this kernel needs {what}. "
                        f"Split the tensor into pieces under 2**31 elements or use a device whose renderer has 64-bit indices")
