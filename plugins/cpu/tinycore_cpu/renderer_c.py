"""C for the host CPU: the outermost global loop is split across threads by the runtime (core_start/core_end)."""
from __future__ import annotations
from tinycore.renderer.cstyle import CStyleRenderer
from tinycore.uop import UOp
from tinycore.dtype import dtypes

_PRELUDE = """#include <math.h>
#include <string.h>
static inline float __tc_from_bfloat16(unsigned short x) { unsigned int u = (unsigned int)x << 16; float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short __tc_to_bfloat16(float f) { unsigned int u; memcpy(&u, &f, 4); if (f != f) return 0x7fc0; return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
static inline float __tc_round_bfloat16(float f) { return __tc_from_bfloat16(__tc_to_bfloat16(f)); }
static inline float __tc_fp8_decode(unsigned char x, int e, int m, int fn) {
  int bias = (1 << (e - 1)) - 1, ex = (x >> m) & ((1 << e) - 1), mant = x & ((1 << m) - 1); float s = (x & 0x80) ? -1.0f : 1.0f;
  if (fn && (x & 0x7f) == 0x7f) return NAN;
  if (!fn && ex == (1 << e) - 1) return mant ? NAN : s * INFINITY;
  if (ex == 0) return s * ldexpf((float)mant / (1 << m), 1 - bias);
  return s * ldexpf(1.0f + (float)mant / (1 << m), ex - bias); }
static inline unsigned char __tc_fp8_encode(float f, int e, int m, int fn) {
  if (f != f) return 0x7f;
  unsigned char best = 0; float bd = INFINITY;
  for (int c = 0; c < 256; c++) { float v = __tc_fp8_decode((unsigned char)c, e, m, fn); if (v != v || isinf(v)) continue;
    float d = fabsf(v - f); if (d < bd || (d == bd && !(c & 1))) { bd = d; best = (unsigned char)c; } }
  if (!fn && isinf(f)) return f > 0 ? 0x7c : 0xfc;
  return best; }
static inline float __tc_from_fp8e4m3(unsigned char x) { return __tc_fp8_decode(x, 4, 3, 1); }
static inline unsigned char __tc_to_fp8e4m3(float f) { return __tc_fp8_encode(f, 4, 3, 1); }
static inline float __tc_round_fp8e4m3(float f) { return __tc_from_fp8e4m3(__tc_to_fp8e4m3(f)); }
static inline float __tc_from_fp8e5m2(unsigned char x) { return __tc_fp8_decode(x, 5, 2, 0); }
static inline unsigned char __tc_to_fp8e5m2(float f) { return __tc_fp8_encode(f, 5, 2, 0); }
static inline float __tc_round_fp8e5m2(float f) { return __tc_from_fp8e5m2(__tc_to_fp8e5m2(f)); }
"""

class CRenderer(CStyleRenderer):
  name = "C"
  device = "CPU"
  prelude = _PRELUDE
  def __init__(self, compiler=None):
    from tinycore_cpu.compiler_c import CCompiler
    self.compiler = compiler or CCompiler()
  def render_range(self, u: UOp, name: str, bound: str, first_global: bool) -> str:
    if first_global: return f"for (int {name} = core_start; {name} < core_end; {name}++) {{"
    return super().render_range(u, name, bound, first_global)
  def kernel_params(self, bufs, vars) -> list[str]: return super().kernel_params(bufs, vars) + ["const int core_start", "const int core_end"]
