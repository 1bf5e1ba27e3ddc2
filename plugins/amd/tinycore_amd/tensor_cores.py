"""AMD matrix instructions: their shapes and fragment layouts (renderer.tensor_cores, used by codegen/opt_tc.py) and
the per-lane layout tables the emulator runs them with; both come from the same functions below.

Codegen emits them for half inputs with float accumulation (the renderers keep bfloat16 as float in registers, so
bf16 WMMA is declared for the emulator only). Layouts follow AMD's ISA guides (not verified on hardware):
- RDNA3 v_wmma_f32_16x16x16_f16 (wave32): A and B are replicated across the two half-waves: lane l holds row l%16
  of A (all 16 k) and column l%16 of B; D lane l element i is row 2i + l//16, column l%16.
- RDNA4 v_wmma_f32_16x16x16_f16 (wave32): no replication; half-wave h=l//16 holds k in [8h, 8h+8) of row/column
  l%16; D lane l element i is row i + 8*(l//16), column l%16.
- CDNA3 v_mfma_f32_16x16x16_f16 (wave64): lane l holds k in [4*(l//16), +4) of row/column l%16; D lane l element i
  is row 4*(l//16) + i, column l%16."""
from __future__ import annotations
from tinycore.dtype import dtypes, DType
from tinycore.renderer import TensorCore

# fn(lane, element) -> (row, col) of A[16,16], B[16,16], C[16,16]; lane may be a UOp (codegen) or an int (emulator)
FRAGS = {
  "wmma_rdna3": (lambda l, e: (l % 16, e), lambda l, e: (e, l % 16), lambda l, e: (2 * e + l // 16, l % 16)),
  "wmma_rdna4": (lambda l, e: (l % 16, e + 8 * (l // 16)), lambda l, e: (e + 8 * (l // 16), l % 16), lambda l, e: (e + 8 * (l // 16), l % 16)),
  "mfma": (lambda l, e: (l % 16, 4 * (l // 16) + e), lambda l, e: (4 * (l // 16) + e, l % 16), lambda l, e: (4 * (l // 16) + e, l % 16)),
}
def _shape(matrix: str) -> tuple[int, tuple[int, int, int]]:
  """(lanes, elements per lane of A, B, C)."""
  return (64, (4, 4, 4)) if matrix == "mfma" else (32, (16, 16, 8) if matrix == "wmma_rdna3" else (8, 8, 8))

def layouts(matrix: str, din: DType = dtypes.float16, dout: DType = dtypes.float32) -> list:
  from tinycore.emulator.model import TCLayout, layout
  if matrix not in FRAGS: return []
  t, (ea, eb, ec) = _shape(matrix)
  fa, fb, fc = FRAGS[matrix]
  return [TCLayout(f"{matrix}_16x16x16_{din.name}_{dout.name}", (16, 16, 16), din, dout, t, layout(t, ea, fa), layout(t, eb, fb), layout(t, ec, fc))]

_PAIRS = ((dtypes.float16, dtypes.float32), (dtypes.bfloat16, dtypes.float32), (dtypes.float16, dtypes.float16))
def _pairs(matrix: str): return _PAIRS[:2] if matrix == "mfma" else _PAIRS

def tensor_cores(matrix: str) -> list[TensorCore]:
  """What a renderer declares; the half -> float one carries the fragments codegen needs."""
  if matrix not in FRAGS: return []
  t, ept = _shape(matrix)
  return [TensorCore((16, 16, 16), di, do, t, ept, f"{matrix}_16x16x16_{di.name}_{do.name}",
                     FRAGS[matrix] if (di, do) == (dtypes.float16, dtypes.float32) else None) for di, do in _pairs(matrix)]

def all_layouts(matrix: str) -> tuple:
  return tuple(l for di, do in _pairs(matrix) for l in layouts(matrix, di, do))
