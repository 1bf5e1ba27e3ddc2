"""C for the host CPU: the outermost global loop is split across threads by the runtime (core_start/core_end)."""
from __future__ import annotations
from tinycore.renderer.cstyle import CStyleRenderer
from tinycore.renderer.fp8 import fp8_helpers
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes

# helper functions, each emitted only when a kernel uses it: headers like immintrin.h cost ~0.1 s of compile time
_HEADER = """#include <math.h>
#include <string.h>
"""
_PRELUDE_PARTS = {
"bfloat16": """static inline float __tc_from_bfloat16(unsigned short x) { unsigned int u = (unsigned int)x << 16; float f; memcpy(&f, &u, 4); return f; }
static inline unsigned short __tc_to_bfloat16(float f) { unsigned int u; memcpy(&u, &f, 4); if (f != f) return 0x7fc0; return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
static inline float __tc_round_bfloat16(float f) { return __tc_from_bfloat16(__tc_to_bfloat16(f)); }
""",
"_half": """#if defined(__F16C__)
#include <immintrin.h>
static inline float __tc_from_half(unsigned short x) { return _cvtsh_ss(x); }
static inline unsigned short __tc_to_half(float f) { return _cvtss_sh(f, 0); }
#else
static inline float __tc_from_half(unsigned short h) { unsigned s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), (int)e - 25); return s ? -v : v; }
static inline unsigned short __tc_to_half(float f) { unsigned int x; memcpy(&x, &f, 4);
  unsigned int sign = (x >> 16) & 0x8000, mant = x & 0x7fffff; int exp = (x >> 23) & 0xff, e = exp - 127 + 15;
  if (exp == 255) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) { if (e < -10) return sign; mant |= 0x800000; int sh = 14 - e; unsigned int hm = mant >> sh, rem = mant & ((1u << sh) - 1), hf = 1u << (sh - 1);
    if (rem > hf || (rem == hf && (hm & 1))) hm++; return sign | hm; }
  unsigned short h = sign | (e << 10) | (mant >> 13); unsigned int rem = mant & 0x1fff; if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; return h; }
#endif
static inline float __tc_round_half(float f) { return __tc_from_half(__tc_to_half(f)); }
""",
"__tc_exp2": """/* 2^x without a libm call, so loops over it vectorize: 2^n * p(f) with n = round(x), |f| <= 0.5, p the degree-6 Taylor
   polynomial of 2^f (relative error < 2e-7, about 1-2 ulp). The scale is built as 2^(n-1) so n = 128 stays finite
   until p(f)*2 overflows; results below 2^-126 flush to 0 (no denormals); nan stays nan. */
static inline float __tc_exp2(float x) {
  float xc = fminf(fmaxf(x, -127.0f), 128.0f), n = floorf(xc + 0.5f), f = xc - n;
  float p = 1.5403530393381606e-4f; p = p*f + 1.3333558146428441e-3f; p = p*f + 9.618129107628477e-3f;
  p = p*f + 5.5504108664821576e-2f; p = p*f + 0.2402265069591007f; p = p*f + 0.6931471805599453f; p = p*f + 1.0f;
  int e = (int)n + 126; int bits = (e < 1 ? 1 : e) << 23; float sc; memcpy(&sc, &bits, 4);
  return x != x ? x : x < -126.0f ? 0.0f : (p * 2.0f) * sc; }
""",
"fp8": fp8_helpers("static inline"),
"__tc_maxsel_v16": """/* a < b ? b : a on 16 lanes (fused attention's running max): one vmaxps, which returns its second operand a when
   either is nan, as the select does */
#if defined(__AVX512F__)
#include <immintrin.h>
static inline tc_float_16 __tc_maxsel_v16(tc_float_16 b, tc_float_16 a) { return (tc_float_16)_mm512_max_ps((__m512)b, (__m512)a); }
#else
static inline tc_float_16 __tc_maxsel_v16(tc_float_16 b, tc_float_16 a) { tc_mask_16 m = a < b; return (tc_float_16)((m & (tc_mask_16)b) | (~m & (tc_mask_16)a)); }
#endif
""",
"__tc_t8x16": """/* 8 vectors of 16 lanes (a conv tile's 8 pixels x 16 output channels) -> 16 vectors of 8 (each channel's 8 pixels),
   in three rounds of two-source shuffles: lane pairs, then quads, then 8-wide halves. Written out without arrays or
   loops: at -O2 GCC keeps those on the stack. */
#define __TC_SH __builtin_shufflevector
#define __TC_EVEN(x, y) __TC_SH(x, y, 0,16,2,18,4,20,6,22,8,24,10,26,12,28,14,30)
#define __TC_ODD(x, y) __TC_SH(x, y, 1,17,3,19,5,21,7,23,9,25,11,27,13,29,15,31)
#define __TC_Q0(x, y) __TC_SH(x, y, 0,1,16,17,4,5,20,21,8,9,24,25,12,13,28,29)
#define __TC_Q2(x, y) __TC_SH(x, y, 2,3,18,19,6,7,22,23,10,11,26,27,14,15,30,31)
#define __TC_LO(x, y) __TC_SH(x, y, 0,1,2,3,16,17,18,19,4,5,6,7,20,21,22,23)
#define __TC_HI(x, y) __TC_SH(x, y, 8,9,10,11,24,25,26,27,12,13,14,15,28,29,30,31)
#define __TC_OUT(m, x, y) { tc_float_16 lo = __TC_LO(x, y), hi = __TC_HI(x, y); \
  o[m] = __TC_SH(lo, lo, 0,1,2,3,4,5,6,7); o[m + 4] = __TC_SH(lo, lo, 8,9,10,11,12,13,14,15); \
  o[m + 8] = __TC_SH(hi, hi, 0,1,2,3,4,5,6,7); o[m + 12] = __TC_SH(hi, hi, 8,9,10,11,12,13,14,15); }
static inline void __tc_t8x16(tc_float_16 a0, tc_float_16 a1, tc_float_16 a2, tc_float_16 a3, tc_float_16 a4, tc_float_16 a5,
                              tc_float_16 a6, tc_float_16 a7, tc_float_8* o) {
  tc_float_16 b0 = __TC_EVEN(a0, a1), b1 = __TC_ODD(a0, a1), b2 = __TC_EVEN(a2, a3), b3 = __TC_ODD(a2, a3);
  tc_float_16 b4 = __TC_EVEN(a4, a5), b5 = __TC_ODD(a4, a5), b6 = __TC_EVEN(a6, a7), b7 = __TC_ODD(a6, a7);
  /* cN / eN: rows 0-3 / 4-7 of the lanes l = N (mod 4) */
  tc_float_16 c0 = __TC_Q0(b0, b2), c2 = __TC_Q2(b0, b2), c1 = __TC_Q0(b1, b3), c3 = __TC_Q2(b1, b3);
  tc_float_16 e0 = __TC_Q0(b4, b6), e2 = __TC_Q2(b4, b6), e1 = __TC_Q0(b5, b7), e3 = __TC_Q2(b5, b7);
  __TC_OUT(0, c0, e0) __TC_OUT(1, c1, e1) __TC_OUT(2, c2, e2) __TC_OUT(3, c3, e3) }
""",
}

_EXP2_COEF = ["1.5403530393381606e-4f", "1.3333558146428441e-3f", "9.618129107628477e-3f", "5.5504108664821576e-2f", "0.2402265069591007f",
              "0.6931471805599453f", "1.0f"]

def _exp2_avx512() -> str:
  """__tc_exp2_v16 with AVX-512's own instructions: n = round(x) in one vrndscaleps and 2^n * p(f) in one vscalefps
  (which takes any exponent and overflows to inf itself), ~13 instructions instead of ~28 for the integer exponent
  assembly; fused attention evaluates one per score. Same polynomial, same results at the edges (below -126: 0, above
  128: inf, nan stays nan: vmaxps/vminps return their second operand when one is nan)."""
  poly = "".join(f" p = _mm512_fmadd_ps(p, f, _mm512_set1_ps({c}));" for c in _EXP2_COEF[1:])
  return f"""static inline tc_float_16 __tc_exp2_v16(tc_float_16 x) {{
  __m512 v = (__m512)x, xc = _mm512_min_ps(_mm512_set1_ps(128.0f), _mm512_max_ps(_mm512_set1_ps(-127.0f), v));
  __m512 n = _mm512_roundscale_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), f = _mm512_sub_ps(xc, n);
  __m512 p = _mm512_set1_ps({_EXP2_COEF[0]});{poly}
  return (tc_float_16)_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(-126.0f), _CMP_NLT_UQ), _mm512_scalef_ps(p, n)); }}
"""

def _exp2_vec(n: int) -> str:
  """__tc_exp2 on n lanes with vector extensions: the same polynomial, floor and exponent bits done lane-wise."""
  if n == 16: return f"#if defined(__AVX512F__)\n#include <immintrin.h>\n{_exp2_avx512()}#else\n{_exp2_generic(n)}#endif\n"
  return _exp2_generic(n)

def _exp2_generic(n: int) -> str:
  F, M = f"tc_float_{n}", f"tc_mask_{n}"
  coef = _EXP2_COEF
  poly = f"{F} p = z + {coef[0]};" + "".join(f" p = p*f + {c};" for c in coef[1:])
  return f"""static inline {F} __tc_exp2_v{n}({F} x) {{
  {F} z = ({F}){{0}};
  {M} lo = x < -127.0f, hi = x > 128.0f;
  {F} xc = ({F})((lo & ({M})(z - 127.0f)) | (~lo & ({M})x)); xc = ({F})((hi & ({M})(z + 128.0f)) | (~hi & ({M})xc));
  {F} t = xc + 0.5f; {M} ti = __builtin_convertvector(t, {M}); {F} nf = __builtin_convertvector(ti, {F});
  ti = ti + (nf > t); nf = __builtin_convertvector(ti, {F});   /* truncation to floor: lanes where it went up get -1 */
  {F} f = xc - nf; {poly}
  {M} e = ti + 126; {M} small = e < 1; e = (small & 1) | (~small & e);
  {F} r = (p * 2.0f) * ({F})(e << 23);
  {M} under = x < -126.0f, nan = x != x;
  r = ({F})(~under & ({M})r);
  return ({F})((nan & ({M})x) | (~nan & ({M})r)); }}
"""

class CRenderer(CStyleRenderer):
  name = "C"
  device = "CPU"
  prelude = _HEADER
  vector_types = True   # GCC/clang vector extensions: codegen may emit float.vec(n) loads, math and stores
  def matmul_panels(self, M: int, K: int, N: int, transposed: bool) -> int:
    # panels as wide as the register block (tiling.py): each k step of the microkernel reads one 128-byte row of its
    # panel, and the panel stays in L2 while the rows of x stream past it. Measured on one core of a 2-core AVX-512 x86
    # (pack + matmul against the plain matmul): a transposed operand (x @ W.T) gathers strided floats every step, so the
    # copy pays from 64 rows of x (256x512x512: 118 -> 162 GFLOP/s, 64x1024x1024: 55 -> 106); a row-major one once it
    # outgrows half of L2: its rows, a power-of-two stride apart, then evict each other (256x784x512: 109 -> 144,
    # 256x1024x1024: 59 -> 153; at 1 MB and under the plain walk is as fast). Never under 64 rows (decode matvecs would
    # copy weights every token), nor into fewer than 4 panels (codegen/split.py leaves those unsplit: no vector axis).
    # A short reduce too (a 10-class head's g @ W.T: 256x10x512 35 -> 125, 256x16x512 8.5 -> 127), once the output is
    # big enough that the tile's loop runs a while (64x10x128 is faster plain)
    # From half of L2 on, not over it: on a Zen 4 core (1 MB L2) the MLP step's weight gradients x.T @ g (784x256 @
    # 256x512, g 512 KB) and h1.T @ g2 (512x256 @ 256x512), one thread, CPU time, 3 interleaved runs at load ~8: both
    # kernels 3087/3247/3302 us plain, 3056/3068/3085 with g packed (two copies of ~11 us included), the plain walk of
    # g's 2 KB-strided rows the one that suffers when other processes share the caches
    w = self.tiling.panel_width(K)
    if K < 8 or M < 64 or not w or N < 4 * w: return 0
    if transposed: return w if K >= 64 or M * N >= (1 << 16) else 0
    return w if K * N * 4 >= self.tiling.caches.l2 // 2 else 0
  def matmul_padded_panels(self, M: int, K: int, N: int, transposed: bool) -> int:
    # N not a multiple of the panel: unpacked, a row-major operand runs the tile at the widest vector dividing N (1000:
    # 8 floats; 300: 4) and a transposed one gathers. One core, GFLOP/s before -> after (the pad, the copy and the shrink
    # included): 1000^3 32 -> 102, 1000^3 a @ b.T 44 -> 85, 2000^3 a @ b.T 44 -> 111, 512x512x300 7.8 -> 48,
    # 256x1024x1000 21 -> 51, 1024x768x3000 47 -> 69. Small products lose to the two extra kernels (64x64x200 5.3 ->
    # 3.4), and a transposed operand with few rows or a wide pad gathers about as fast (512x512x300 a @ b.T 64 -> 54)
    w = self.tiling.panel_width(K)
    if not w: return 0
    # no whole vector divides N (255, 257; 36, 100: 4-lane scalar unrolls; 40, 120: half-width vectors): unpadded each
    # output row is scalar accumulators or half vectors (one core: 255^3 27.7 -> 1.5 ms, 512x512x1023 258 -> 9.2,
    # 1000x1000x36 19.2 -> 1.9, x100 31.3 -> 3.6, x40 6.0 -> 1.8, a batch 16x77x64x77 3.2 -> 0.44, 32x33x65x17 1.5 ->
    # 0.17), so pad whatever the waste, from a million multiply-adds (M counts a batch's rows: a batch of small products
    # pays for the two extra kernels together)
    if N % (self.tiling.cols // 2): return w if M >= 16 and K >= 16 and N >= 16 and M * K * N >= (1 << 20) else 0
    if K < 64 or M < 64 or N < 4 * w or M * K * N < (1 << 24): return 0
    if not (waste := -N % w): return 0   # whole panels: matmul_panels' call
    if transposed: return w if M >= 192 and waste * 16 <= N and self.matmul_panels(M, K, N, True) else 0
    return w if waste * 8 <= N and (N % 16 or self.matmul_panels(M, K, N, False)) else 0
  def matmul_panel_group(self, panel_bytes: int, panels: int) -> int:
    # the matmul kernel alone on one core, GFLOP per CPU-second, interleaved runs at load ~7: 1024^3 (128 KB panels)
    # 186 ungrouped, 194 in groups of 8, 196 in groups of 4 (the L1-resident 8x32 microkernel's ceiling is ~212)
    return self.tiling.panel_group(panel_bytes, panels)
  def matmul_tile_rows(self, M: int, K: int = 0) -> int:
    return self.tiling.tile_rows(M, K)
  def matmul_narrow_transpose(self, M: int, K: int, N: int) -> bool:
    # fewer columns than a vector (a 10-class head): without the copy each output row is N scalar accumulators fed by
    # scalar loads of both operands; transposed, 16 reduce steps go in one vector FMA. One core, 256x512 @ 512x10 + relu:
    # 235 -> 46 us with the copy. Small heads (64x96 @ 96x10) keep the unrolled scalar columns: the copy is a kernel more
    return 1 < N < 16 and K >= 128 and M >= 128
  def winograd_tile(self, bs: int, cin: int, cout: int, out_h: int, out_w: int) -> int:
    # F(4,3) where it beat the direct conv in interleaved runs (process CPU time, 2 cores, loaded machine; the branch's
    # report has the table). Under 32 channels the GEMM per transform point is too short to pay for the transforms
    # (16x16x56x56: 2.3 direct, 2.8 ms F(4,3)). The weight transform costs the same per weight element whatever the batch,
    # so few tiles lose: 1x256x14x14 (16 tiles) 2.1 against 3.5 ms, 16x512x7x7 (64) and 4x256x14x14 (64) no better;
    # 4x128x28x28 (196) 7.7 -> 4.3, 1x64x28x28 (49, a small weight) 0.8 -> 0.3
    tiles = bs * -(-out_h // 4) * -(-out_w // 4)
    if min(cin, cout) < 32 or tiles < 48 or (tiles < 128 and cin * cout > 128 * 128): return 0
    return 4
  def matmul_row_panels(self, M: int, K: int, N: int) -> int:
    # the register block's rows: the microkernel broadcasts them from one 32-byte piece of a panel row. Measured on one
    # core (the matmul kernel, the copy is ~3% more): 784x256 @ 256x512 130 -> 169, 1024^3 72 -> 166, 64x512 @ 512x512
    # 148 -> 176 GFLOP/s. At least 4 panels: the panel axis is the loop the threads split (codegen/split.py)
    rows = self.tiling.rows
    return rows if K >= 64 and N >= 64 and M % rows == 0 and M // rows >= 4 else 0
  # half too is held as float: clang on x86 has no _Float16 arithmetic without AVX512-FP16; F16C converts in hardware
  emulated = {**CStyleRenderer.emulated, dtypes.float16: dtypes.uint16}
  var_prologue: list[str] = []
  def __init__(self, compiler=None):
    from tinycore_cpu.compiler_c import CCompiler
    from tinycore_cpu.tiling import host_tiling
    self.compiler = compiler or CCompiler()
    # the matmul microkernel this machine's vector registers hold (8x32 floats with AVX-512), and its caches
    self.tiling = host_tiling()
    self.register_block = (self.tiling.rows, self.tiling.cols)
    self.matmul_tall_rows = self.tiling.tall_rows   # 12 with AVX-512: BEAM's tall tile (tile_rows: the heuristic's)
    # fused attention's register tiles: 16-float vectors and 32 registers with AVX-512, else 8 and 16 (AVX2, NEON)
    self.attention_vector = (16, 32) if self.tiling.cols >= 32 else (8, 16)
  def render(self, name: str, uops: list[UOp]) -> str:
    self._transposed: dict[tuple[UOp, ...], str] = {}
    self._loops: list[UOp] = []   # the RANGEs open at the uop being rendered, innermost last
    self._prefetched = self._gated = 0
    # only in the kernels the optimizer tiles (r_...): a fused program (attention) schedules its own loads
    self._may_prefetch = name.startswith("r_")
    return super().render(name, uops)
  # a vector load that moves 128 to 512 bytes per step of its reduce loop (a packed panel's rows, 32 or 64 floats; not a
  # row-major stream of 64 bytes, which the hardware prefetcher follows, nor a matrix row a step of a matrix-vector
  # product) gets a software prefetch about PREFETCH_AHEAD bytes ahead. One core, 1024^3 with panels in groups of 4:
  # C model of the kernel 195-199 -> 207-215 GFLOP per CPU-second (8 to 32 steps ahead alike), the generated kernel
  # 201-203 -> 206-207 in interleaved runs at load ~6; 2048^3 and the Winograd conv's GEMM unchanged
  PREFETCH_MIN_STEP, PREFETCH_MAX_STEP, PREFETCH_AHEAD = 128, 512, 2048
  def _prefetch(self, u: UOp, r: dict) -> list[str]:
    """A prefetch line for vector load `u` when it streams through its innermost (reduce) loop in big steps, else []."""
    if not self._may_prefetch or not self._loops or self._loops[-1].arg[0] != "r" or u.dtype.count < 16: return []
    from tinycore.rewrite import graph_rewrite
    from tinycore.symbolic import symbolic
    ind, rng = u.src[0], self._loops[-1]
    step = graph_rewrite(ind.src[1].substitute({rng: rng + 1}) - ind.src[1], symbolic)
    if step.op is not Ops.CONST or not isinstance(step.arg, int): return []
    nbytes = step.arg * ind.src[0].dtype.base.itemsize
    if not self.PREFETCH_MIN_STEP <= nbytes <= self.PREFETCH_MAX_STEP: return []
    ahead = max(1, self.PREFETCH_AHEAD // nbytes) * step.arg
    return [f"__builtin_prefetch({r[ind.src[0]]}+{r[ind.src[1]]}+{ahead});"]
  def render_extra(self, u: UOp, r: dict) -> list[str] | None:
    # (loops are only tracked here: the base renders them)
    if u.op is Ops.RANGE: self._loops.append(u)
    elif u.op is Ops.END and self._loops: self._loops.pop()
    if u.op is Ops.LOAD and u.src[0].arg is not None and len(u.src[0].src) > 2:
      # one gate for every lane (an elementwise copy's pad along another axis than the lanes, codegen/opt.py
      # shared_gates): the vector is read, or zeros where the gate is off
      ind = u.src[0]
      r[u] = f"gl{self._gated}"
      self._gated += 1
      vec = self.vload(f"({r[ind.src[0]]}+{r[ind.src[1]]})", ind.src[0].dtype.base, u.dtype)
      return [f"{self.ctype(u.dtype)} {r[u]} = ({r[ind.src[2]]}?{vec}:{self.splat(self.literal(0, u.dtype.scalar()), u.dtype)});"]
    if u.op is Ops.LOAD and u.src[0].arg is not None and u.dtype.scalar() == dtypes.float32 and \
       u.src[0].src[0].dtype.base == dtypes.float32 and (pf := self._prefetch(u, r)):
      # the load itself as the base would write it, after its prefetch
      r[u] = f"pf{self._prefetched}"
      self._prefetched += 1
      return pf + [f"{self.ctype(u.dtype)} {r[u]} = {self.vload(f'({r[u.src[0].src[0]]}+{r[u.src[0].src[1]]})', dtypes.float32, u.dtype)};"]
    if u.op is Ops.VECTORIZE and not any(s.op is Ops.WMMA for s in u.src):
      if (lanes := self._lane_of_8x16(u)) is not None:
        # one lane of 8 16-lane vectors (codegen/lane_stores.py): all 16 lanes come out of one shuffle transpose
        vecs, lane = lanes
        lines = []
        if vecs not in self._transposed:
          self._transposed[vecs] = name = f"tr{len(self._transposed)}"
          lines = [f"tc_float_8 {name}[16];", f"__tc_t8x16({', '.join(r[v] for v in vecs)}, {name});"]
        r[u] = f"{self._transposed[vecs]}[{lane}]"
        return lines
      # lanes gathered into a vector (fused attention's lane numbers): a compound literal, no statement
      r[u] = f"(({self.ctype(u.dtype)}){{{', '.join(r[s] for s in u.src)}}})"
      return []
    if u.op is Ops.BARRIER:
      # one thread's scratch array is read back through memory after this (a compiler barrier): without it gcc forwards
      # fused attention's stored p vectors to the scalar loads after them as lane shuffles, the port the FMAs need
      return ['__asm__ volatile("" ::: "memory");']
    # lanes of one vector permuted (fused attention's butterfly row max): one shuffle (gcc >= 12, clang)
    if u.op is Ops.GEP and len(u.arg) > 1 and u.src[0].op is not Ops.WMMA:
      r[u] = f"__builtin_shufflevector({r[u.src[0]]}, {r[u.src[0]]}, {', '.join(str(i) for i in u.arg)})"
      return []
    return None
  @staticmethod
  def _lane_of_8x16(u: UOp) -> tuple[tuple[UOp, ...], int] | None:
    """(the 8 vectors, the lane) when `u` is VECTORIZE(v0[l], ..., v7[l]) of 8 distinct float vectors of 16 lanes."""
    if u.dtype != dtypes.float32.vec(8) or any(s.op is not Ops.GEP or len(s.arg) != 1 for s in u.src): return None
    vecs = tuple(s.src[0] for s in u.src)
    if len(set(vecs)) != 8 or any(v.dtype != dtypes.float32.vec(16) for v in vecs) or len({s.arg[0] for s in u.src}) != 1: return None
    return vecs, u.src[0].arg[0]
  def quant_matmul(self, kind: str, norm: bool = False, swiglu: bool = False, res: bool = False):
    """A hand-written kernel for ggml block weights times int8-quantized activations (tinycore_cpu/quant_matmul.py), or None."""
    from tinycore_cpu.quant_matmul import quant_matmul
    return quant_matmul(self.compiler, kind, norm, swiglu, res)
  def attention_decode(self):
    """A hand-written kernel for one decode step's KV-cache write and attention (tinycore_cpu/attention_decode.py)."""
    from tinycore_cpu.attention_decode import attention_decode
    return attention_decode(self.compiler)
  def render_kernel(self, name: str, body: list[str], params: list[str]) -> str:
    text = "\n".join(self.var_prologue + body)
    parts = "".join(code for trigger, code in _PRELUDE_PARTS.items() if trigger in text)
    parts += "".join(_exp2_vec(n) for n in (4, 8, 16) if f"__tc_exp2_v{n}(" in text)
    for dt, st in self.emulated.items():
      for n in (2, 4, 8, 16):
        used = [f for f in (f"__tc_from_{dt.name}_v{n}(", f"__tc_to_{dt.name}_v{n}(") if f in text]
        if not used: continue
        # fixed-count loops of scalar conversions over the buffer's own element type (F16C: one vector convert); the
        # scalar helpers came in with _PRELUDE_PARTS (their names contain its trigger)
        ct = self.type_map[st]
        if used[0].startswith("__tc_from"):
          parts += (f"static inline tc_float_{n} __tc_from_{dt.name}_v{n}(const {ct}* p) {{ tc_float_{n} r; "
                    f"for (int i = 0; i < {n}; i++) r[i] = __tc_from_{dt.name}(p[i]); return r; }}\n")
        if any(f.startswith("__tc_to") for f in used):
          parts += (f"static inline void __tc_to_{dt.name}_v{n}({ct}* p, tc_float_{n} v) {{ "
                    f"for (int i = 0; i < {n}; i++) p[i] = __tc_to_{dt.name}(v[i]); }}\n")
    return self.prelude + self.typedefs + parts + f"void {name}({', '.join(params)}) {{\n" + text + "\n}\n"
  def vec_select(self, op: Ops, u: UOp, a: list[str]) -> str:
    # WHERE(a < b, b, a): a max of 16 float lanes in one instruction (the generic mask select is a compare and a blend)
    if op is Ops.WHERE and u.dtype == dtypes.float32.vec(16) and u.src[0].op is Ops.CMPLT and u.src[0].src == (u.src[2], u.src[1]) \
       and u.src[1].dtype == u.src[2].dtype == u.dtype:
      return f"__tc_maxsel_v16({a[1]}, {a[2]})"
    return super().vec_select(op, u, a)
  def cast(self, x: str, src, dt) -> str:
    # a C cast between vector types reinterprets bits: int8 lanes -> float lanes need a lane-wise conversion
    if dt.count > 1 and src.count > 1 and src.scalar() not in self.emulated and src.scalar() != dt.scalar() and dt.scalar() != dtypes.bool:
      return f"__builtin_convertvector({'-' if src.scalar() == dtypes.bool else ''}({x}), {self.ctype(dt)})"   # -1/0 mask lanes -> 1/0
    return super().cast(x, src, dt)
  def math(self, fn: str, dt, *a: str) -> str:
    if fn == "exp2" and dt.count > 1 and dt.scalar() == dtypes.float32: return f"__tc_exp2_v{dt.count}({a[0]})"
    if fn == "exp2" and dt in (dtypes.float32, *self.emulated): return f"__tc_exp2({a[0]})"
    return super().math(fn, dt, *a)
  # the ABI is fixed whatever the kernel's index width: every Variable and the thread split (core_start/core_end) arrive
  # as 64-bit ints (the runtime passes c_int64), and a 32-bit kernel narrows them once at the top of its body
  var_arg_bits = 64
  def render_range(self, u: UOp, name: str, bound: str, first_global: bool) -> str:
    ct = self.ctype(dtypes.index)
    if first_global: return f"for ({ct} {name} = ({ct})core_start; {name} < ({ct})core_end; {name}++) {{"
    return super().render_range(u, name, bound, first_global)
  def kernel_params(self, bufs, vars) -> list[str]:
    ct = self.ctype(dtypes.index)
    self.var_prologue = [f"  const {ct} {n} = ({ct}){n}_arg;" for n, _ in vars]
    return (super().kernel_params(bufs, []) + [f"const long long {n}_arg" for n, _ in vars] +
            ["const long long core_start", "const long long core_end"])
