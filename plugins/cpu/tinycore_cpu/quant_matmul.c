/* Quantized matmul for the LLM runner: out[t, r] = sum_k W[r, k] * xq[t, k], where W stays in its ggml block format and
   the activations x are quantized per 32 elements to int8 with a float scale (ggml's Q8_0), so each block's dot product
   is an integer dot of bytes: one VNNI instruction (vpdpbusd) per 32 elements where the CPU has it, AVX2's
   maddubs/madd pair otherwise, plain C as the last resort. The generated kernels decode every weight to float32 first,
   which is 3-5x more instructions per byte than the memory can deliver.

   Variants (one function each, named qmm_<kind>[_norm][_swiglu][_res]):
     norm:   x is first RMS-normalized per token and scaled by g (the layer's norm weight): the norm costs no kernel of its own
     swiglu: two weights, gate and up; out = silu(gate . x) * (up . x)
     res:    out = res + W . x (the residual add)
   Arguments: out, x, w[, w_up][, g][, res], then K (inner size), T (tokens), N (output rows), eps (float bits), and the
   row range [start, end) this thread computes (the runtime splits the rows between threads). Every thread quantizes
   the activations itself (T*K elements, small next to the N*K weight): no second kernel and no shared scratch.
   Sizes were checked by the caller (tinycore/llm/quant_linear.py) against the buffers before this is called. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* per token: K int8, K/32 scales, K/16 sums of q, and those sums times their block's scale (K/16 floats) */
typedef struct { int8_t *q; float *d; int32_t *s16; float *u; } act_t;

static inline float f16_to_f32(const uint8_t *p) {
  uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  uint32_t s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), (int)e - 25);
  return s ? -v : v;
#endif
}

/* x (K floats, optionally RMS-normed and scaled by g) -> int8 blocks of 32: d = max|x| / 127, q = round(x / d), the
   rounding of ggml's reference quantize_row_q8_0 (half away from zero) */
static void quantize_act(const float *x, const float *g, float eps, int K, act_t a) {
  float r = 1.0f;
  if (g) {
    float ss = 0.0f;
    for (int k = 0; k < K; k++) ss += x[k] * x[k];
    r = 1.0f / sqrtf(ss / (float)K + eps);
  }
  for (int b = 0; b < K / 32; b++) {
    float v[32], amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < 32; i++) {
      v[i] = g ? x[b * 32 + i] * r * g[b * 32 + i] : x[b * 32 + i];
      float av = fabsf(v[i]);
      finite &= av <= 3.4028235e38f;   /* false for inf and nan */
      amax = av > amax ? av : amax;
    }
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!finite) { d = NAN; id = 0.0f; }   /* a nan or inf activation makes the block's products nan, as a float dot would */
    a.d[b] = d;
    int32_t s0 = 0, s1 = 0;
    for (int i = 0; i < 32; i++) {
      int q = (int)roundf(v[i] * id);
      a.q[b * 32 + i] = (int8_t)q;
      if (i < 16) s0 += q; else s1 += q;
    }
    a.s16[2 * b] = s0; a.s16[2 * b + 1] = s1;
    a.u[2 * b] = d * (float)s0; a.u[2 * b + 1] = d * (float)s1;
  }
}

/* ---- integer dot products of 32 bytes: unsigned weights (0..255) x signed activations -> 8 int32 lanes (AVX2) */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define DOT_U8S8(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s))
#elif defined(__AVXVNNI__)
#define DOT_U8S8(u, s) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), (u), (s))
#elif defined(__AVX2__)
/* maddubs saturates at 16 bits: fine here, the weights are at most 6 bits (Q8_0 goes through sign() and |w| <= 128,
   |x| <= 127: 2 * 128 * 127 < 32767) */
#define DOT_U8S8(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1))
#endif

#if defined(__AVX2__)
static inline float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
#define PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define PREFETCH(p) ((void)0)
#endif

/* Q4_0: 18 bytes per 32: f16 d, 16 bytes of nibbles (low nibbles are elements 0..15, high 16..31); w = d * (q - 8) */
static float dot_q4_0(const uint8_t *row, act_t a, int K) {
  float corr = 0.0f;
  int b = 0, nb = K / 32;
#if defined(DOT_U8S8)
  /* two blocks a step into two accumulators: one fma chain would stall on its latency every block */
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15);
  for (; b + 1 < nb; b += 2) {
    const uint8_t *b0 = row + b * 18, *b1 = b0 + 18;
    PREFETCH(b0 + 1024);
    float d0 = f16_to_f32(b0) * a.d[b], d1 = f16_to_f32(b1) * a.d[b + 1];
    __m128i q0 = _mm_loadu_si128((const __m128i *)(b0 + 2)), q1 = _mm_loadu_si128((const __m128i *)(b1 + 2));
    __m256i w0 = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q0, 4), q0), m4);
    __m256i w1 = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q1, 4), q1), m4);
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT_U8S8(w0, _mm256_loadu_si256((const __m256i *)(a.q + b * 32)))), _mm256_set1_ps(d0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT_U8S8(w1, _mm256_loadu_si256((const __m256i *)(a.q + b * 32 + 32)))), _mm256_set1_ps(d1), acc1);
    corr += d0 * (float)(a.s16[2 * b] + a.s16[2 * b + 1]) + d1 * (float)(a.s16[2 * b + 2] + a.s16[2 * b + 3]);
  }
  float acc = hsum8(_mm256_add_ps(acc0, acc1));
#else
  float acc = 0.0f;
#endif
  for (; b < nb; b++) {   /* what the vector loop left (all of it without one) */
    const uint8_t *blk = row + b * 18;
    float d = f16_to_f32(blk) * a.d[b];
    int32_t s = 0;
    for (int i = 0; i < 16; i++) s += (blk[2 + i] & 15) * a.q[b * 32 + i] + (blk[2 + i] >> 4) * a.q[b * 32 + 16 + i];
    acc += d * (float)s;
    corr += d * (float)(a.s16[2 * b] + a.s16[2 * b + 1]);
  }
  return acc - 8.0f * corr;
}

/* sum of w[i] * x[i] over signed bytes, never auto-vectorized: gcc 12 turns this loop into vpdpbusd where VNNI exists,
   an unsigned x signed instruction, and gets negative weights wrong */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
static int32_t isum_s8(const int8_t *w, const int8_t *x, int n) {
  int32_t s = 0;
  for (int i = 0; i < n; i++) s += (int32_t)w[i] * (int32_t)x[i];
  return s;
}

/* Q8_0: 34 bytes per 32: f16 d, 32 int8; w = d * q */
static float dot_q8_0(const uint8_t *row, act_t a, int K) {
  int b = 0, nb = K / 32;
#if defined(DOT_U8S8)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (; b + 1 < nb; b += 2) {
    const uint8_t *b0 = row + b * 34, *b1 = b0 + 34;
    PREFETCH(b0 + 1024);
    __m256i w0 = _mm256_loadu_si256((const __m256i *)(b0 + 2)), w1 = _mm256_loadu_si256((const __m256i *)(b1 + 2));
    __m256i x0 = _mm256_loadu_si256((const __m256i *)(a.q + b * 32)), x1 = _mm256_loadu_si256((const __m256i *)(a.q + b * 32 + 32));
    /* signed x signed as |w| x (x with w's sign): the unsigned operand must be the weight's magnitude */
    __m256i s0 = DOT_U8S8(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(x0, w0)), s1 = DOT_U8S8(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(x1, w1));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(f16_to_f32(b0) * a.d[b]), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_set1_ps(f16_to_f32(b1) * a.d[b + 1]), acc1);
  }
  float acc = hsum8(_mm256_add_ps(acc0, acc1));
#else
  float acc = 0.0f;
#endif
  for (; b < nb; b++) {
    const uint8_t *blk = row + b * 34;
    acc += f16_to_f32(blk) * a.d[b] * (float)isum_s8((const int8_t *)blk + 2, a.q + b * 32, 32);
  }
  return acc;
}

/* Q4_K: 144 bytes per 256: f16 d, f16 dmin, 12 bytes of eight 6-bit (scale, min) pairs, 128 bytes of nibbles: bytes
   32j..32j+31 hold sub-block 2j (low nibbles) and 2j+1 (high); w = d * sc * q - dmin * m */
static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
  if (j < 4) { *sc = q[j] & 63; *m = q[j + 4] & 63; }
  else { *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}
static float dot_q4_k(const uint8_t *row, act_t a, int K) {
  float acc_s = 0.0f, corr = 0.0f;
#if defined(DOT_U8S8)
  __m256 acc = _mm256_setzero_ps();
#endif
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 144;
    PREFETCH(blk + 1024);
    float d = f16_to_f32(blk), dmin = f16_to_f32(blk + 2);
    for (int j = 0; j < 4; j++) {
      const uint8_t *qs = blk + 16 + 32 * j;
#if defined(DOT_U8S8)
      __m256i q = _mm256_loadu_si256((const __m256i *)qs);
      __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(15)), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(15));
#endif
      for (int h = 0; h < 2; h++) {
        int sub = 2 * j + h, b = sb * 8 + sub, sc, m;
        scale_min_k4(sub, blk + 4, &sc, &m);
        float dx = a.d[b];
#if defined(DOT_U8S8)
        __m256i s = DOT_U8S8(h ? hi : lo, _mm256_loadu_si256((const __m256i *)(a.q + b * 32)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * (float)sc * dx), acc);
#else
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += (h ? qs[i] >> 4 : qs[i] & 15) * a.q[b * 32 + i];
        acc_s += d * (float)sc * dx * (float)s;
#endif
        corr += dmin * (float)m * dx * (float)(a.s16[2 * b] + a.s16[2 * b + 1]);
      }
    }
  }
#if defined(DOT_U8S8)
  acc_s = hsum8(acc);
#endif
  return acc_s - corr;
}

/* Q6_K: 210 bytes per 256: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales, f16 d; each half of
   128 elements is four runs of 32: ql[l] low / ql[l+32] low / ql[l] high / ql[l+32] high nibbles with qh[l] bit pairs
   0-1 / 2-3 / 4-5 / 6-7; one scale per 16 elements; w = d * sc * (q - 32) */
static float dot_q6_k(const uint8_t *row, act_t a, int K) {
  float acc_s = 0.0f, corr = 0.0f;
#if defined(DOT_U8S8)
  __m256 acc = _mm256_setzero_ps();
#endif
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 210;
    PREFETCH(blk + 1024);
    float d = f16_to_f32(blk + 208);
    const int8_t *scl = (const int8_t *)(blk + 192);
    for (int half = 0; half < 2; half++) {
      const uint8_t *ql = blk + 64 * half, *qh = blk + 128 + 32 * half;
#if defined(DOT_U8S8)
      __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
      __m256i hb = _mm256_loadu_si256((const __m256i *)qh), m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
      __m256i qv[4] = {
        _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4)),
        _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4))};
#endif
      for (int run = 0; run < 4; run++) {
        int b = sb * 8 + half * 4 + run;   /* the 32-element activation block */
        float dx = a.d[b];
        float s0 = d * (float)scl[8 * half + 2 * run] * dx, s1 = d * (float)scl[8 * half + 2 * run + 1] * dx;
#if defined(DOT_U8S8)
        __m256i s = DOT_U8S8(qv[run], _mm256_loadu_si256((const __m256i *)(a.q + b * 32)));
        /* int32 lanes 0-3 cover elements 0..15 (scale s0), lanes 4-7 elements 16..31 (scale s1) */
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_setr_ps(s0, s0, s0, s0, s1, s1, s1, s1), acc);
#else
        int32_t i0 = 0, i1 = 0;
        for (int l = 0; l < 32; l++) {
          const uint8_t *lb = ql + (run & 1 ? 32 : 0);
          int q = ((run < 2 ? lb[l] & 15 : lb[l] >> 4) | (((qh[l] >> (2 * run)) & 3) << 4));
          if (l < 16) i0 += q * a.q[b * 32 + l]; else i1 += q * a.q[b * 32 + l];
        }
        acc_s += s0 * (float)i0 + s1 * (float)i1;
#endif
        corr += 32.0f * (s0 * (float)a.s16[2 * b] + s1 * (float)a.s16[2 * b + 1]);
      }
    }
  }
#if defined(DOT_U8S8)
  acc_s = hsum8(acc);
#endif
  return acc_s - corr;
}

/* the 32 fifth bits of a Q5 block (bit j of the little-endian u32 at p is element j's) as 16 or 0 per byte */
#if defined(DOT_U8S8)
static inline __m256i fifth_bits(const uint8_t *p) {
  uint32_t bits; memcpy(&bits, p, 4);
  /* byte j takes byte j / 8 of the word, then keeps bit j % 8 */
  __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                                     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}
#endif

/* Q4_1 (20 bytes: f16 d, f16 m, 16 bytes of nibbles; w = d * q + m), Q5_0 (22: f16 d, u32 fifth bits, nibbles;
   w = d * (q - 16)) and Q5_1 (24: f16 d, f16 m, u32 fifth bits, nibbles; w = d * q + m): `at` is where the nibbles
   start, `hb` where the fifth bits are (-1: none), `mn` where the min is (-1: none, offset `off` instead) */
static inline float dot_q4q5(const uint8_t *row, act_t a, int K, int bb, int at, int hb, int mn, float off) {
  float acc = 0.0f, corr = 0.0f;
  int b = 0, nb = K / 32;
#if defined(DOT_U8S8)
  __m256 acc0 = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15);
  for (; b < nb; b++) {
    const uint8_t *blk = row + b * bb;
    PREFETCH(blk + 1024);
    float d = f16_to_f32(blk) * a.d[b];
    __m128i q = _mm_loadu_si128((const __m128i *)(blk + at));
    __m256i w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4);
    if (hb >= 0) w = _mm256_or_si256(w, fifth_bits(blk + hb));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT_U8S8(w, _mm256_loadu_si256((const __m256i *)(a.q + b * 32)))), _mm256_set1_ps(d), acc0);
    float xs = (float)(a.s16[2 * b] + a.s16[2 * b + 1]);
    corr += mn >= 0 ? -f16_to_f32(blk + mn) * a.d[b] * xs : off * d * xs;
  }
  acc = hsum8(acc0);
#endif
  for (; b < nb; b++) {
    const uint8_t *blk = row + b * bb;
    float d = f16_to_f32(blk) * a.d[b];
    uint32_t bits = 0;
    if (hb >= 0) memcpy(&bits, blk + hb, 4);
    int32_t s = 0;
    for (int i = 0; i < 16; i++) {
      int lo = (blk[at + i] & 15) | (((bits >> i) & 1) << 4), hi = (blk[at + i] >> 4) | (((bits >> (i + 16)) & 1) << 4);
      s += lo * a.q[b * 32 + i] + hi * a.q[b * 32 + 16 + i];
    }
    acc += d * (float)s;
    float xs = (float)(a.s16[2 * b] + a.s16[2 * b + 1]);
    corr += mn >= 0 ? -f16_to_f32(blk + mn) * a.d[b] * xs : off * d * xs;
  }
  return acc - corr;
}
static float dot_q4_1(const uint8_t *row, act_t a, int K) { return dot_q4q5(row, a, K, 20, 4, -1, 2, 0.0f); }
static float dot_q5_0(const uint8_t *row, act_t a, int K) { return dot_q4q5(row, a, K, 22, 6, 2, -1, 16.0f); }
static float dot_q5_1(const uint8_t *row, act_t a, int K) { return dot_q4q5(row, a, K, 24, 8, 4, 2, 0.0f); }

/* Q5_K: 176 bytes per 256: f16 d, f16 dmin, 12 scale bytes as Q4_K, 32 bytes of fifth bits (bit k of byte i: sub-block
   k, element i), 128 bytes of nibbles laid out as Q4_K's; w = d * sc * q - dmin * m */
static float dot_q5_k(const uint8_t *row, act_t a, int K) {
  float acc_s = 0.0f, corr = 0.0f;
#if defined(DOT_U8S8)
  __m256 acc = _mm256_setzero_ps();
#endif
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 176, *qh = blk + 16;
    PREFETCH(blk + 1024);
    float d = f16_to_f32(blk), dmin = f16_to_f32(blk + 2);
#if defined(DOT_U8S8)
    __m256i hbits = _mm256_loadu_si256((const __m256i *)qh);
#endif
    for (int j = 0; j < 4; j++) {
      const uint8_t *qs = blk + 48 + 32 * j;
#if defined(DOT_U8S8)
      __m256i q = _mm256_loadu_si256((const __m256i *)qs);
      __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(15)), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(15));
#endif
      for (int h = 0; h < 2; h++) {
        int sub = 2 * j + h, b = sb * 8 + sub, sc, m;
        scale_min_k4(sub, blk + 4, &sc, &m);
        float dx = a.d[b];
#if defined(DOT_U8S8)
        __m256i fifth = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(sub)), _mm256_set1_epi8(1)), 4);
        __m256i s = DOT_U8S8(_mm256_or_si256(h ? hi : lo, fifth), _mm256_loadu_si256((const __m256i *)(a.q + b * 32)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * (float)sc * dx), acc);
#else
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += ((h ? qs[i] >> 4 : qs[i] & 15) | (((qh[i] >> sub) & 1) << 4)) * a.q[b * 32 + i];
        acc_s += d * (float)sc * dx * (float)s;
#endif
        corr += dmin * (float)m * dx * (float)(a.s16[2 * b] + a.s16[2 * b + 1]);
      }
    }
  }
#if defined(DOT_U8S8)
  acc_s = hsum8(acc);
#endif
  return acc_s - corr;
}

/* bytes of one weight row of K elements */
#define ROW_Q4_0(K) ((K) / 32 * 18)
#define ROW_Q8_0(K) ((K) / 32 * 34)
#define ROW_Q4_K(K) ((K) / 256 * 144)
#define ROW_Q6_K(K) ((K) / 256 * 210)
#define ROW_Q4_1(K) ((K) / 32 * 20)
#define ROW_Q5_0(K) ((K) / 32 * 22)
#define ROW_Q5_1(K) ((K) / 32 * 24)
#define ROW_Q5_K(K) ((K) / 256 * 176)

static inline float silu(float v) { return v / (1.0f + expf(-v)); }

/* ---- several tokens (prefill): a weight row is unpacked once into 32 unsigned bytes per block plus four floats
   (scale of elements 0..15, of 16..31, offset per activation sum of each half), then each token costs one integer dot
   per block. Block b of a row contributes dx * (sl * q[0:16].x + sh * q[16:32].x + ol * sum(x[0:16]) + oh * sum(x[16:32])). */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__) || defined(__AVXVNNI__)
#define TILED 1   /* vpdpbusd: unsigned bytes up to 255 never saturate (AVX2's maddubs would, with Q8_0's w + 128) */
typedef void (*unpack_fn)(const uint8_t *row, int b, uint8_t *q, float *sc, float *off);
static inline void set4(float *sc, float *off, float sl, float sh, float ol, float oh) { sc[0] = sl; sc[1] = sh; off[0] = ol; off[1] = oh; }
static void unpack_q4_0(const uint8_t *row, int b, uint8_t *q, float *sc_, float *off_) {
  const uint8_t *blk = row + b * 18; float d = f16_to_f32(blk);
  for (int i = 0; i < 16; i++) { q[i] = blk[2 + i] & 15; q[16 + i] = blk[2 + i] >> 4; }
  set4(sc_, off_, d, d, -8.0f * d, -8.0f * d);
}
static inline void unpack_q4q5(const uint8_t *blk, int at, int hb, uint8_t *q) {
  uint32_t bits = 0;
  if (hb >= 0) memcpy(&bits, blk + hb, 4);
  for (int i = 0; i < 16; i++) {
    q[i] = (uint8_t)((blk[at + i] & 15) | (((bits >> i) & 1) << 4));
    q[16 + i] = (uint8_t)((blk[at + i] >> 4) | (((bits >> (i + 16)) & 1) << 4));
  }
}
static void unpack_q4_1(const uint8_t *row, int b, uint8_t *q, float *sc_, float *off_) {
  const uint8_t *blk = row + b * 20; float d = f16_to_f32(blk), m = f16_to_f32(blk + 2);
  unpack_q4q5(blk, 4, -1, q); set4(sc_, off_, d, d, m, m);
}
static void unpack_q5_0(const uint8_t *row, int b, uint8_t *q, float *sc_, float *off_) {
  const uint8_t *blk = row + b * 22; float d = f16_to_f32(blk);
  unpack_q4q5(blk, 6, 2, q); set4(sc_, off_, d, d, -16.0f * d, -16.0f * d);
}
static void unpack_q5_1(const uint8_t *row, int b, uint8_t *q, float *sc_, float *off_) {
  const uint8_t *blk = row + b * 24; float d = f16_to_f32(blk), m = f16_to_f32(blk + 2);
  unpack_q4q5(blk, 8, 4, q); set4(sc_, off_, d, d, m, m);
}
static void unpack_q8_0(const uint8_t *row, int b, uint8_t *q, float *sc_, float *off_) {   /* w + 128: unsigned for the dot */
  const uint8_t *blk = row + b * 34; float d = f16_to_f32(blk);
  for (int i = 0; i < 32; i++) q[i] = blk[2 + i] ^ 0x80;
  set4(sc_, off_, d, d, -128.0f * d, -128.0f * d);
}
static void unpack_q4_k(const uint8_t *row, int b, uint8_t *q, float *sc_, float *off_) {
  const uint8_t *blk = row + (b / 8) * 144, *qs = blk + 16 + 32 * ((b % 8) / 2);
  int sub = b % 8, sc, m;
  scale_min_k4(sub, blk + 4, &sc, &m);
  for (int i = 0; i < 32; i++) q[i] = sub & 1 ? qs[i] >> 4 : qs[i] & 15;
  float s = f16_to_f32(blk) * (float)sc, o = -f16_to_f32(blk + 2) * (float)m;
  set4(sc_, off_, s, s, o, o);
}
static void unpack_q5_k(const uint8_t *row, int b, uint8_t *q, float *sc_, float *off_) {
  const uint8_t *blk = row + (b / 8) * 176, *qh = blk + 16, *qs = blk + 48 + 32 * ((b % 8) / 2);
  int sub = b % 8, sc, m;
  scale_min_k4(sub, blk + 4, &sc, &m);
  for (int i = 0; i < 32; i++) q[i] = (uint8_t)((sub & 1 ? qs[i] >> 4 : qs[i] & 15) | (((qh[i] >> sub) & 1) << 4));
  float s = f16_to_f32(blk) * (float)sc, o = -f16_to_f32(blk + 2) * (float)m;
  set4(sc_, off_, s, s, o, o);
}
static void unpack_q6_k(const uint8_t *row, int b, uint8_t *q, float *sc_, float *off_) {
  const uint8_t *blk = row + (b / 8) * 210;
  int half = (b % 8) / 4, run = b % 4;
  const uint8_t *lb = blk + 64 * half + (run & 1 ? 32 : 0), *qh = blk + 128 + 32 * half;
  for (int l = 0; l < 32; l++) q[l] = (uint8_t)((run < 2 ? lb[l] & 15 : lb[l] >> 4) | (((qh[l] >> (2 * run)) & 3) << 4));
  const int8_t *scl = (const int8_t *)(blk + 192);
  float d = f16_to_f32(blk + 208), s0 = d * (float)scl[8 * half + 2 * run], s1 = d * (float)scl[8 * half + 2 * run + 1];
  set4(sc_, off_, s0, s1, -32.0f * s0, -32.0f * s1);
}

/* f: K/16 scales (two per block), then K/16 offsets */
static void unpack_row(unpack_fn fn, const uint8_t *row, int K, uint8_t *q, float *f) {
  for (int b = 0; b < K / 32; b++) fn(row, b, q + 32 * b, f + 2 * b, f + K / 16 + 2 * b);
}

/* tokens a[0..NT) against one unpacked row: y[t] */
#define TILE(NT)                                                                                                          \
  static void tile##NT(const uint8_t *q, const float *f, const act_t *a, int K, float *y) {                                \
    __m256 acc[NT];                                                                                                       \
    const int8_t *xq[NT]; const float *xd[NT];   /* hoisted: read through `a` each step, they were reloaded each step */  \
    _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) { acc[t] = _mm256_setzero_ps(); xq[t] = a[t].q; xd[t] = a[t].d; } \
    for (int b = 0; b < K / 32; b++) {                                                                                    \
      __m256i w = _mm256_loadu_si256((const __m256i *)(q + 32 * b));                                                     \
      __m256 sc = _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(f + 2 * b)));   /* lanes sl, sh, sl, sh, ... */  \
      sc = _mm256_permutevar8x32_ps(sc, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));                                      \
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                              \
        __m256i s = DOT_U8S8(w, _mm256_loadu_si256((const __m256i *)(xq[t] + 32 * b)));                                   \
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(sc, _mm256_broadcast_ss(xd[t] + b)), acc[t]);       \
      }                                                                                                                   \
    }                                                                                                                     \
    /* the offsets: one dot of the row's K/16 offsets with the token's K/16 scaled sums */                               \
    const float *off = f + K / 16;                                                                                        \
    for (int t = 0; t < NT; t++) {                                                                                        \
      __m256 c = _mm256_setzero_ps();                                                                                     \
      int j = 0;                                                                                                          \
      for (; j + 8 <= K / 16; j += 8) c = _mm256_fmadd_ps(_mm256_loadu_ps(off + j), _mm256_loadu_ps(a[t].u + j), c);      \
      float corr = hsum8(c);                                                                                              \
      for (; j < K / 16; j++) corr += off[j] * a[t].u[j];                                                                 \
      y[t] = hsum8(acc[t]) + corr;                                                                                        \
    }                                                                                                                     \
  }
TILE(1)
TILE(4)
/* row r for every token: unpacked once into q/f, then four tokens at a time */
static void row_all_tokens(unpack_fn fn, const uint8_t *row, int K, int T, const act_t *acts, uint8_t *q, float *f, float *y) {
  unpack_row(fn, row, K, q, f);
  int t = 0;
  for (; t + 4 <= T; t += 4) tile4(q, f, acts + t, K, y + t);
  for (; t < T; t++) tile1(q, f, acts + t, K, y + t);
}
#else
#define TILED 0
#endif

/* one thread's share: rows [start, end) for every token. The weight rows are the outer loop so each is read from memory
   once and stays in L1 for all T tokens; with several tokens (and VNNI) a row is unpacked once for all of them. */
#define KERNEL(kind, DOT, ROW, NORM, SWIGLU, RES, suffix)                                                                \
  void qmm_##kind##suffix(float *restrict out, const float *restrict x, const uint8_t *restrict w,                      \
                          SWIGLU_ARG##SWIGLU NORM_ARG##NORM RES_ARG##RES                                               \
                          long long K_, long long T_, long long N_, long long eps_bits, long long start, long long end) { \
    int K = (int)K_, T = (int)T_, N = (int)N_;                                                                          \
    float eps; uint32_t eb = (uint32_t)eps_bits; memcpy(&eps, &eb, 4);                                                  \
    size_t act_bytes = (size_t)T * K + (size_t)T * (K / 32) * sizeof(float) + (size_t)T * (K / 16) * 8;                \
    /* activations, then per token its act_t, then two unpacked rows (gate and up) and their block floats, 2T outputs */ \
    size_t row_bytes = (size_t)K + (size_t)(K / 16) * 2 * sizeof(float);                                                \
    char *mem = (char *)malloc(act_bytes + (size_t)T * sizeof(act_t) + 2 * row_bytes + 2 * (size_t)T * sizeof(float) + 64); \
    if (!mem) { /* out of memory: NaN rows, never stale ones */                                                       \
      for (long long r = start; r < end; r++) for (int t = 0; t < T; t++) out[(size_t)t * N + r] = NAN;                  \
      return;                                                                                                           \
    }                                                                                                                   \
    int8_t *qbuf = (int8_t *)mem;                                                                                       \
    float *dbuf = (float *)(qbuf + (size_t)T * K);                                                                      \
    int32_t *sbuf = (int32_t *)(dbuf + (size_t)T * (K / 32));                                                           \
    float *ubuf = (float *)(sbuf + (size_t)T * (K / 16));                                                               \
    act_t *acts = (act_t *)(((uintptr_t)(mem + act_bytes) + 15) & ~(uintptr_t)15);                                      \
    float *rowf = (float *)(acts + T), *rowf_up = rowf + (K / 16) * 2, *ys = rowf_up + (K / 16) * 2, *ys_up = ys + T;    \
    uint8_t *rowq = (uint8_t *)(ys_up + T), *rowq_up = rowq + K;                                                        \
    for (int t = 0; t < T; t++) {                                                                                       \
      act_t a = {qbuf + (size_t)t * K, dbuf + (size_t)t * (K / 32), sbuf + (size_t)t * (K / 16), ubuf + (size_t)t * (K / 16)}; \
      acts[t] = a;                                                                                                      \
      quantize_act(x + (size_t)t * K, NORM_G##NORM, eps, K, a);                                                         \
    }                                                                                                                   \
    (void)rowq; (void)rowq_up; (void)rowf; (void)rowf_up; (void)ys_up;                                                  \
    for (long long r = start; r < end; r++) {                                                                           \
      const uint8_t *row = w + (size_t)r * ROW(K);                                                                      \
      if (TILED && T >= 4) {                                                                                            \
        TILED_ROWS##SWIGLU(kind, ROW)                                                                                   \
      } else {                                                                                                          \
        for (int t = 0; t < T; t++) {                                                                                   \
          ys[t] = DOT(row, acts[t], K);                                                                                 \
          SWIGLU_EPI##SWIGLU(DOT, ROW)                                                                                  \
        }                                                                                                               \
      }                                                                                                                 \
      for (int t = 0; t < T; t++) {                                                                                     \
        float y = ys[t];                                                                                                \
        RES_EPI##RES                                                                                                    \
        out[(size_t)t * N + r] = y;                                                                                     \
      }                                                                                                                 \
    }                                                                                                                   \
    free(mem);                                                                                                          \
  }
#if TILED
#define TILED_ROWS0(kind, ROW) row_all_tokens(unpack_##kind, row, K, T, acts, rowq, rowf, ys);
#define TILED_ROWS1(kind, ROW) row_all_tokens(unpack_##kind, row, K, T, acts, rowq, rowf, ys);                           \
  row_all_tokens(unpack_##kind, w_up + (size_t)r * ROW(K), K, T, acts, rowq_up, rowf_up, ys_up);                        \
  for (int t = 0; t < T; t++) ys[t] = silu(ys[t]) * ys_up[t];
#else
#define TILED_ROWS0(kind, ROW)
#define TILED_ROWS1(kind, ROW)
#endif
#define SWIGLU_ARG0
#define SWIGLU_ARG1 const uint8_t *restrict w_up,
#define NORM_ARG0
#define NORM_ARG1 const float *restrict g,
#define RES_ARG0
#define RES_ARG1 const float *restrict res,
#define NORM_G0 NULL
#define NORM_G1 g
#define SWIGLU_EPI0(DOT, ROW)
#define SWIGLU_EPI1(DOT, ROW) ys[t] = silu(ys[t]) * DOT(w_up + (size_t)r * ROW(K), acts[t], K);
#define RES_EPI0
#define RES_EPI1 y += res[(size_t)t * N + r];

#define VARIANTS(kind, DOT, ROW)                          \
  KERNEL(kind, DOT, ROW, 0, 0, 0, )                       \
  KERNEL(kind, DOT, ROW, 1, 0, 0, _norm)                  \
  KERNEL(kind, DOT, ROW, 1, 1, 0, _norm_swiglu)           \
  KERNEL(kind, DOT, ROW, 0, 1, 0, _swiglu)                \
  KERNEL(kind, DOT, ROW, 0, 0, 1, _res)                   \
  KERNEL(kind, DOT, ROW, 1, 0, 1, _norm_res)

VARIANTS(q4_0, dot_q4_0, ROW_Q4_0)
VARIANTS(q8_0, dot_q8_0, ROW_Q8_0)
VARIANTS(q4_k, dot_q4_k, ROW_Q4_K)
VARIANTS(q6_k, dot_q6_k, ROW_Q6_K)
VARIANTS(q4_1, dot_q4_1, ROW_Q4_1)
VARIANTS(q5_0, dot_q5_0, ROW_Q5_0)
VARIANTS(q5_1, dot_q5_1, ROW_Q5_1)
VARIANTS(q5_k, dot_q5_k, ROW_Q5_K)
