"""Apple's execution model for the shared emulator (`DEV=EMU+METAL`): SIMD-groups of 32 threads, 32 KB of threadgroup
memory, 1024 threads per threadgroup, and the simdgroup_matrix 8x8 lane layout. The Metal renderer drives codegen
(its limits and choices); the interpreter runs the linearized program, so the MSL compiler is never needed.

simdgroup_matrix<T, 8, 8>: each of the 32 lanes holds 2 consecutive elements of one row, the same map for A, B and C.
Apple documents the type as opaque; this layout is the one observed on M1-M3 (and relied on by MLX and others):
q = lane/4; row = (q & 4) + (lane/2) % 4; col = (q & 2)*2 + (lane % 2)*2 + element."""
from __future__ import annotations

def _rc(lane, e: int):
  """(row, col) of lane's element e; lane may be an int or a UOp (codegen's fragments), so only // and %."""
  return (lane // 16 % 2) * 4 + lane // 2 % 4, (lane // 8 % 2) * 4 + lane % 2 * 2 + e

def simdgroup_8x8(dtype_in, dtype_out):
  from tinycore.emulator import TCLayout, layout
  lay = layout(32, 2, _rc)
  return TCLayout(f"simdgroup_8x8x8_{dtype_in.name}_{dtype_out.name}", (8, 8, 8), dtype_in, dtype_out, 32, lay, lay, lay)

def model(device: str = "METAL"):
  from tinycore.emulator import ExecModel
  from tinycore_metal.renderer_metal import TENSOR_CORES
  from tinycore.helpers import env_value   # read per open (helpers.getenv caches)
  level = env_value("METAL_MSLCHECK", 0)
  return ExecModel(name="apple-metal", warp_size=32, local_mem=32 * 1024, max_workgroup=1024,
                   tensor_cores=tuple(simdgroup_8x8(t.dtype_in, t.dtype_out) for t in TENSOR_CORES),
                   check=(lambda base, name, uops: check_msl(base, name, uops, level)) if level else None)

STATS = {"checked": 0, "float64": 0}   # over the process: kernels checked, kernels skipped (float64)

def check_msl(base, name: str, uops: list, level: int) -> None:
  """METAL_MSLCHECK=1: every kernel EMU+METAL runs is also rendered as MSL and checked structurally; =2 also
  type-checked by clang against the shim (mslcheck.py). Kernels Metal can't express (float64) are counted, not run."""
  from tinycore_metal.mslcheck import structure, clang_check
  try: src = base.render(name, uops)
  except NotImplementedError as e:
    if "float64" not in str(e): raise
    STATS["float64"] += 1
    return
  if (errs := structure(src)) or (level >= 2 and (errs := clang_check(src))): raise AssertionError(f"MSL check failed for {name}: {errs}\n{src}")
  STATS["checked"] += 1
