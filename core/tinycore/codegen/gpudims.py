"""Mapping output loops to a GPU launch grid.

On devices with local (workgroup) threads the global RANGEs are not loops: each becomes a SPECIAL thread index.
At most three dims are launched (x is the innermost output dim, so neighbouring threads touch neighbouring memory);
leading dims beyond three are merged into one with div/mod. Each SPECIAL carries (name, bound, local size):
index = group_id * local + local_id, and threads past the bound do nothing."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.helpers import prod


def to_gpu_dims(k: UOp, local_max: int = 256, local_sizes: tuple[int, ...] | None = None) -> UOp:
  # local_sizes: per launch dim (x, y, z) workgroup size, chosen by codegen/opt_gpu.py; None: local_max threads on x only
  glob = sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda r: r.arg)
  if not glob: return k
  bounds = [g.src[0] for g in glob]
  repl: dict[UOp, UOp] = {}
  if len(glob) > 3:
    # merge the leading dims into one launch dim
    lead, glob, bounds = glob[:len(glob) - 2], glob[len(glob) - 2:], bounds[len(glob) - 2:]
    merged_bound = prod([g.src[0] for g in lead], index_const(1)).simplify()
    merged = UOp(Ops.RANGE, dtypes.index, (merged_bound,), ("g", -1))
    rem = merged
    for g in reversed(lead):
      repl[g] = rem % g.src[0] if g is not lead[0] else rem
      rem = rem // g.src[0]
    glob, bounds = [merged] + glob, [merged_bound] + bounds
  specials = {}
  for dim, (g, b) in enumerate(zip(reversed(glob), reversed(bounds))):
    bi = b.arg if b.op is Ops.CONST else None
    local = min(local_max, bi) if dim == 0 and bi is not None else 1
    if local_sizes is not None: local = local_sizes[dim] if dim < len(local_sizes) else 1
    specials[g] = UOp(Ops.SPECIAL, dtypes.index, (b,), (f"gidx{dim}", local))
  k = k.substitute({**{g: specials.get(g, g) for g in glob}}) if not repl else k.substitute(repl).substitute(specials)
  return k

def launch_dims(uops: list[UOp], var_vals: dict | None = None) -> tuple[tuple, tuple]:
  """(global size in workgroups, local size) from the SPECIALs of a linearized program."""
  gs, ls = [1, 1, 1], [1, 1, 1]
  for u in uops:
    if u.op is not Ops.SPECIAL: continue
    dim, local = int(u.arg[0][-1]), u.arg[1]
    b = u.src[0]
    n = b.arg if b.op is Ops.CONST else b
    gs[dim], ls[dim] = (-(-n // local) if isinstance(n, int) else n), local  # type: ignore[assignment]
  return tuple(gs), tuple(ls)
