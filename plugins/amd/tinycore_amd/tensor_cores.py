"""AMD matrix instructions: their shapes (renderer.tensor_cores) and per-lane layouts (the emulator's TCLayouts).

Codegen emits no WMMA UOps yet, so these are declared and checked (the emulator validates every layout and runs
a WMMA UOp against them in tests) but no kernel uses them. Layouts follow AMD's ISA guides:
- RDNA3 v_wmma_f32_16x16x16_f16 (wave32): A and B are replicated across the two half-waves: lane l holds row l%16
  of A (all 16 k) and column l%16 of B; D lane l element i is row 2i + l//16, column l%16.
- RDNA4 v_wmma_f32_16x16x16_f16 (wave32): no replication; half-wave h=l//16 holds k in [8h, 8h+8) of row/column
  l%16; D lane l element i is row i + 8*(l//16), column l%16.
- CDNA3 v_mfma_f32_16x16x16_f16 (wave64): lane l holds k in [4*(l//16), +4) of row/column l%16; D lane l element i
  is row 4*(l//16) + i, column l%16."""
from __future__ import annotations
from tinycore.dtype import dtypes, DType
from tinycore.renderer import TensorCore

def _lay(threads, elems, fn): return tuple(tuple(fn(l, e) for e in range(elems)) for l in range(threads))

def layouts(matrix: str, din: DType = dtypes.float16, dout: DType = dtypes.float32) -> list:
  from tinycore.emulator.model import TCLayout
  nm = f"{matrix}_16x16x16_{din.name}_{dout.name}"
  if matrix == "wmma_rdna3":
    return [TCLayout(nm, (16, 16, 16), din, dout, 32, _lay(32, 16, lambda l, e: (l % 16, e)), _lay(32, 16, lambda l, e: (e, l % 16)),
                     _lay(32, 8, lambda l, e: (2 * e + l // 16, l % 16)))]
  if matrix == "wmma_rdna4":
    return [TCLayout(nm, (16, 16, 16), din, dout, 32, _lay(32, 8, lambda l, e: (l % 16, e + 8 * (l // 16))),
                     _lay(32, 8, lambda l, e: (e + 8 * (l // 16), l % 16)), _lay(32, 8, lambda l, e: (e + 8 * (l // 16), l % 16)))]
  if matrix == "mfma":
    return [TCLayout(nm, (16, 16, 16), din, dout, 64, _lay(64, 4, lambda l, e: (l % 16, 4 * (l // 16) + e)),
                     _lay(64, 4, lambda l, e: (4 * (l // 16) + e, l % 16)), _lay(64, 4, lambda l, e: (4 * (l // 16) + e, l % 16)))]
  return []

_PAIRS = ((dtypes.float16, dtypes.float32), (dtypes.bfloat16, dtypes.float32), (dtypes.float16, dtypes.float16))
def tensor_cores(matrix: str) -> list[TensorCore]:
  """The shapes a renderer declares (elements per thread of A, B, C)."""
  if not matrix: return []
  t, ept = (64, (4, 4, 4)) if matrix == "mfma" else (32, (16, 16, 8) if matrix == "wmma_rdna3" else (8, 8, 8))
  pairs = _PAIRS[:2] if matrix == "mfma" else _PAIRS
  return [TensorCore((16, 16, 16), di, do, t, ept, f"{matrix}_16x16x16_{di.name}_{do.name}") for di, do in pairs]

def all_layouts(matrix: str) -> tuple:
  return tuple(l for di, do in (_PAIRS[:2] if matrix == "mfma" else _PAIRS) for l in layouts(matrix, di, do))
