"""fp8 (e4m3fn, e5m2) in software for the C-family dialects: float in registers, the byte in memory.

One text for C, CUDA, Metal and OpenCL C, so the formats round and saturate the same way on every device; a dialect
passes its spelling of a function qualifier, the byte type and two math functions. The decoder follows the OCP fp8
definitions (e4m3fn: no inf, 0x7f/0xff are NaN; e5m2: IEEE-like inf and NaN). The encoder picks the nearest finite
code with ties to even by trying all 128 magnitudes: short and obviously right; a dialect that needs speed can render
its own closed form (AMD's HIP renderer does). It avoids isnan/isinf, which not every dialect declares the same way."""

_TEXT = """/* fp8 in software: float in registers, the byte in memory */
{q} float __tc_fp8_decode({u8} x, int e, int m, int fn) {{
  int bias = (1 << (e - 1)) - 1, ex = (x >> m) & ((1 << e) - 1), mant = x & ((1 << m) - 1); float s = (x & 0x80) ? -1.0f : 1.0f;
  if (fn && (x & 0x7f) == 0x7f) return NAN;
  if (!fn && ex == (1 << e) - 1) return mant ? NAN : s * INFINITY;
  return s * {ldexp}(ex ? 1.0f + (float)mant / (float)(1 << m) : (float)mant / (float)(1 << m), (ex ? ex : 1) - bias); }}
/* nearest code, ties to even; NaN -> 0x7f; e4m3fn has no inf and saturates it to +-448 like the reference, e5m2 keeps inf */
{q} {u8} __tc_fp8_encode(float f, int e, int m, int fn) {{
  if (f != f) return ({u8})0x7f;
  if ({fabs}(f) == INFINITY) return ({u8})(fn ? (f > 0 ? 0x7e : 0xfe) : (f > 0 ? 0x7c : 0xfc));
  /* clamp to the largest finite first: past ~2^40 every distance below rounds to the same float and the tie-break
     would pick the last even code (49152 for e5m2) */
  float top = __tc_fp8_decode(({u8})(fn ? 0x7e : (((1 << e) - 1) << m) - 1), e, m, fn), a = {fabs}(f) < top ? {fabs}(f) : top;
  {u8} best = 0; float bd = INFINITY;
  for (int c = 0; c < 128; c++) {{ float v = __tc_fp8_decode(({u8})c, e, m, fn); if (v != v || {fabs}(v) == INFINITY) continue;
    float d = {fabs}(v - a); if (d < bd || (d == bd && !(c & 1))) {{ bd = d; best = ({u8})c; }} }}
  return ({u8})(best | (signbit(f) ? 0x80 : 0));   /* magnitude codes only, then the sign: +0.0 is code 0, -0.0 is 0x80 */ }}
{q} float __tc_from_fp8e4m3({u8} x) {{ return __tc_fp8_decode(x, 4, 3, 1); }}
{q} {u8} __tc_to_fp8e4m3(float f) {{ {enc_e4m3} }}
{q} float __tc_round_fp8e4m3(float f) {{ return __tc_from_fp8e4m3(__tc_to_fp8e4m3(f)); }}
{q} float __tc_from_fp8e5m2({u8} x) {{ return __tc_fp8_decode(x, 5, 2, 0); }}
{q} {u8} __tc_to_fp8e5m2(float f) {{ {enc_e5m2} }}
{q} float __tc_round_fp8e5m2(float f) {{ return __tc_from_fp8e5m2(__tc_to_fp8e5m2(f)); }}
"""

def fp8_helpers(qualifier: str, byte: str = "unsigned char", ldexp: str = "ldexpf", fabs: str = "fabsf",
                encoders: dict[str, str] | None = None) -> str:
  """The helpers the C-style renderers call for fp8 loads, stores and casts (__tc_from_/__tc_to_/__tc_round_fp8e4m3 and
  fp8e5m2), in a dialect: `qualifier` goes before each function (`static inline`, a `__device__` macro), `byte` is its
  unsigned 8-bit type, `ldexp`/`fabs` its float32 spellings. The dialect must define NAN, INFINITY and signbit.
  `encoders` ("fp8e4m3"/"fp8e5m2" -> a function body of float `f`) replaces the software encoder where the hardware
  has a conversion that rounds the same way (it must give the same byte for every float, NaN and inf included)."""
  enc = {"fp8e4m3": "return __tc_fp8_encode(f, 4, 3, 1);", "fp8e5m2": "return __tc_fp8_encode(f, 5, 2, 0);", **(encoders or {})}
  return _TEXT.format(q=qualifier, u8=byte, ldexp=ldexp, fabs=fabs, enc_e4m3=enc["fp8e4m3"], enc_e5m2=enc["fp8e5m2"])
