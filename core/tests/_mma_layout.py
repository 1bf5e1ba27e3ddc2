"""A realistic tensor-core layout for core's own tests (the toy GPU devices there): NVIDIA's mma.m16n8k16, written
out here because core ships no device's layout (the NV plugin owns the real one, tinycore_nv/tensor_cores.py)."""
from tinycore.dtype import dtypes
from tinycore.emulator import TCLayout, layout

def frag_a(l, i): return l // 4 + 8 * ((i >> 1) & 1), (l % 4) * 2 + (i & 1) + 8 * (i >> 2)
def frag_b(l, i): return (l % 4) * 2 + (i & 1) + 8 * (i >> 1), l // 4
def frag_c(l, i): return l // 4 + 8 * (i >> 1), (l % 4) * 2 + (i & 1)
MMA_M16N8K16 = (frag_a, frag_b, frag_c)

def mma_m16n8k16(dtype_in=dtypes.float16, dtype_out=dtypes.float32) -> TCLayout:
  return TCLayout(f"mma_m16n8k16_{dtype_in.name}_{dtype_out.name}", (16, 8, 16), dtype_in, dtype_out, 32,
                  layout(32, 8, frag_a), layout(32, 4, frag_b), layout(32, 4, frag_c))
