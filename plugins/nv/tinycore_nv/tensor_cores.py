"""NVIDIA mma.sync.m16n8k16 (sm_80+), m16n8k8 tf32 and m16n8k32 fp8 (sm_89+): shapes and fragment layouts, declared on
the CUDA renderer (renderer.tensor_cores, which codegen/opt_tc.py and opt_smem.py read) and handed to the shared
emulator (EMU+NV), both from the functions below. PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" (sec. 9.7.14.5.8): with
groupID g = lane>>2 and threadID_in_group t = lane%4, a_i is row g+8*((i>>1)&1), col 2t+(i&1)+8*(i>>2); b_i is row
2t+(i&1)+8*(i>>1), col g; c_i is row g+8*(i>>1), col 2t+(i&1). Lane may be a UOp (codegen) or an int (emulator)."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.renderer import TensorCore

def frag_a(l, i): return l // 4 + 8 * ((i >> 1) & 1), (l % 4) * 2 + (i & 1) + 8 * (i >> 2)
def frag_b(l, i): return (l % 4) * 2 + (i & 1) + 8 * (i >> 1), l // 4
def frag_c(l, i): return l // 4 + 8 * (i >> 1), (l % 4) * 2 + (i & 1)
INPUTS = (dtypes.float16, dtypes.bfloat16)   # -> float32 accumulation
# mma.m16n8k8 .tf32 (sec. 9.7.14.5.7): a_i is row g+8*(i&1), col t+4*(i>>1); b_i is row t+4*i, col g; c as above.
# fp32 operands are rounded to TF32 (10-bit mantissa, cvt.rna): codegen uses it only under ALLOW_TF32=1 (opt_tc.py)
def frag_a_tf32(l, i): return l // 4 + 8 * (i & 1), l % 4 + 4 * (i >> 1)
def frag_b_tf32(l, i): return l % 4 + 4 * i, l // 4
TF32 = "mma_m16n8k8_tf32_float"

# mma.m16n8k32 with 8-bit operands (sec. 9.7.14.5.10, "Matrix Fragments for mma.m16n8k32"; .e4m3/.e5m2 from sm_89):
# four .b32 registers of A (16 bytes), two of B, four bytes each, low byte first. a_i is row g+8*((i>>2)&1), col
# 4t+(i&3)+16*(i>>3); b_i is row 4t+(i&3)+16*(i>>2), col g; c as above. Byte for byte the registers are m16n8k16's
# 16-bit ones, so ldmatrix's .b16 rows (16 bytes, 4 to a lane) give A's and (n-major) B's fragments.
def frag_a_fp8(l, i): return l // 4 + 8 * ((i >> 2) & 1), (l % 4) * 4 + (i & 3) + 16 * (i >> 3)
def frag_b_fp8(l, i): return (l % 4) * 4 + (i & 3) + 16 * (i >> 2), l // 4
FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)
PTX_TYPE = {dtypes.float16: "f16", dtypes.bfloat16: "bf16", dtypes.fp8e4m3: "e4m3", dtypes.fp8e5m2: "e5m2"}

def _sm(arch: str) -> int: return int(arch[3:].rstrip("af"))
def has_mma(arch: str) -> bool: return _sm(arch) >= 80
def has_fp8_mma(arch: str) -> bool: return _sm(arch) >= 89   # Ada, Hopper and later; sm_80/86 keep fp8 emulated
def fp8_name(di) -> str: return f"mma_m16n8k32_{di.name}_float"

def tensor_cores(arch: str) -> list[TensorCore]:
  """What the CUDA and PTX renderers declare for `arch` (sm_XX)."""
  if not has_mma(arch): return []
  return [TensorCore((16, 8, 16), di, dtypes.float32, 32, (8, 4, 4), f"mma_m16n8k16_{di.name}_float", (frag_a, frag_b, frag_c)) for di in INPUTS] \
    + [TensorCore((16, 8, 8), dtypes.float32, dtypes.float32, 32, (4, 2, 4), TF32, (frag_a_tf32, frag_b_tf32, frag_c))] \
    + [TensorCore((16, 8, 32), di, dtypes.float32, 32, (16, 8, 4), fp8_name(di), (frag_a_fp8, frag_b_fp8, frag_c)) for di in FP8 if has_fp8_mma(arch)]

def round_tf32(x):
  """float32 -> the nearest TF32 value, ties away from zero (cvt.rna.tf32.f32), on a numpy array; inf/nan unchanged."""
  import numpy as np
  b = np.asarray(x, np.float32).view(np.uint32)
  r = np.where((b & 0x7f800000) == 0x7f800000, b, (b + np.uint32(0x1000)) & np.uint32(0xffffe000))
  return r.astype(np.uint32).view(np.float32)

def layouts(arch: str) -> tuple:
  """The emulator's per-lane tables for the same instructions (names match the renderers' WMMA args)."""
  from tinycore.emulator.model import TCLayout, layout
  if not has_mma(arch): return ()
  return tuple(TCLayout(f"mma_m16n8k16_{di.name}_{dtypes.float32.name}", (16, 8, 16), di, dtypes.float32, 32,
                        layout(32, 8, frag_a), layout(32, 4, frag_b), layout(32, 4, frag_c)) for di in INPUTS) \
    + (TCLayout(TF32, (16, 8, 8), dtypes.float32, dtypes.float32, 32, layout(32, 4, frag_a_tf32), layout(32, 2, frag_b_tf32),
                layout(32, 4, frag_c), round_inputs=round_tf32),) \
    + tuple(TCLayout(fp8_name(di), (16, 8, 32), di, dtypes.float32, 32, layout(32, 16, frag_a_fp8), layout(32, 8, frag_b_fp8),
                     layout(32, 4, frag_c)) for di in FP8 if has_fp8_mma(arch))
