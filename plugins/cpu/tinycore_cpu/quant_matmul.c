/* Quantized matmul for the LLM runner: out[t, r] = sum_k W[r, k] * xq[t, k], where W stays in its ggml block format and
   the activations x are quantized per 32 elements to int8 with a float scale (ggml's Q8_0), so each block's dot product
   is an integer dot of bytes: one VNNI instruction (vpdpbusd) per 32 elements where the CPU has it, AVX2's
   maddubs/madd pair otherwise, plain C as the last resort. The generated kernels decode every weight to float32 first,
   which is 3-5x more instructions per byte than the memory can deliver.

   A format is one block decoder (dec_<kind>: a 32-element group of a row -> 32 unsigned bytes q and, per half of 16,
   a scale s and an offset o, w = s * q + o) plus a format_t row naming it. Two loop shapes use it:
     decode (few tokens): a dot product per weight row and token, walking the row's blocks (gen_dot over the decoder,
       or a hand-tuned dot_<kind> for the formats decode is most often run with);
     prefill (VNNI): a panel of output columns is decoded once into a VNNI layout (4 bytes of each column side by side)
       and reused for every token, 4 tokens x 2 vectors of columns per step of the register-blocked micro kernel.

   Variants (one exported function each, named qmm_<kind>[_norm][_swiglu][_res]):
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

/* per token: K int8, K/32 scales d, the same per 16 (d16), K/16 sums of q (s16), those sums times their block's scale
   (u, per 16) and per 32 (u32): the offset terms of a group are o * u; and per block of 32, eight int32 lanes of
   -8 * (the sum of 4 consecutive q) (neg8): what an offset of -8 on every weight adds to each lane of a 32-byte integer
   dot, so Q4_0's dot starts its accumulator there instead of correcting in scalar code per block */
typedef struct { int8_t *q; float *d, *d16; int32_t *s16; float *u, *u32; int32_t *neg8; } act_t;
/* bytes of act_t storage per token */
#define ACT_BYTES(K) ((size_t)(K) * 2 + (size_t)((K) / 32) * 8 + (size_t)((K) / 16) * 12)

static act_t act_at(char *mem, int K, int t) {
  char *p = mem + (size_t)t * ACT_BYTES(K);
  act_t a;
  a.d = (float *)p; a.u32 = a.d + K / 32; a.d16 = a.u32 + K / 32; a.u = a.d16 + K / 16; a.s16 = (int32_t *)(a.u + K / 16);
  a.neg8 = a.s16 + K / 16; a.q = (int8_t *)(a.neg8 + K / 4);   /* 4-byte arrays first: every array stays aligned */
  return a;
}

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
    int32_t s0 = 0, s1 = 0;
    float d;
#if defined(__AVX2__)
    /* the same arithmetic 8 lanes at a time (prefill quantizes T*K values per call: ~4 ns each in the scalar loop) */
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], amax8 = _mm256_setzero_ps();
    int finite = 1;
    for (int j = 0; j < 4; j++) {
      v[j] = _mm256_loadu_ps(x + b * 32 + 8 * j);
      if (g) v[j] = _mm256_mul_ps(_mm256_mul_ps(v[j], _mm256_set1_ps(r)), _mm256_loadu_ps(g + b * 32 + 8 * j));
      __m256 av = _mm256_andnot_ps(sign, v[j]);
      finite &= _mm256_movemask_ps(_mm256_cmp_ps(av, _mm256_set1_ps(3.4028235e38f), _CMP_LE_OQ)) == 0xFF;
      amax8 = _mm256_max_ps(amax8, av);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!finite) { d = NAN; id = 0.0f; }
    __m256i qi[4];
    for (int j = 0; j < 4; j++) {
      /* roundf: half away from zero, as trunc(|p|) + (frac >= 0.5) with the sign put back (frac is exact) */
      __m256 p = _mm256_mul_ps(v[j], _mm256_set1_ps(id)), ap = _mm256_andnot_ps(sign, p);
      __m256 t = _mm256_round_ps(ap, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(ap, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ), _mm256_set1_ps(1.0f)));
      qi[j] = _mm256_cvttps_epi32(_mm256_or_ps(t, _mm256_and_ps(p, sign)));
    }
    __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    _mm256_storeu_si256((__m256i *)(a.q + b * 32), _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    int32_t lanes[8];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi32(qi[0], qi[1]));
    for (int i = 0; i < 8; i++) s0 += lanes[i];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi32(qi[2], qi[3]));
    for (int i = 0; i < 8; i++) s1 += lanes[i];
#else
    float v[32], amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < 32; i++) {
      v[i] = g ? x[b * 32 + i] * r * g[b * 32 + i] : x[b * 32 + i];
      float av = fabsf(v[i]);
      finite &= av <= 3.4028235e38f;   /* false for inf and nan */
      amax = av > amax ? av : amax;
    }
    d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!finite) { d = NAN; id = 0.0f; }   /* a nan or inf activation makes the block's products nan, as a float dot would */
    for (int i = 0; i < 32; i++) {
      int q = (int)roundf(v[i] * id);
      a.q[b * 32 + i] = (int8_t)q;
      if (i < 16) s0 += q; else s1 += q;
    }
#endif
    a.d[b] = a.d16[2 * b] = a.d16[2 * b + 1] = d;
    a.s16[2 * b] = s0; a.s16[2 * b + 1] = s1;
    a.u[2 * b] = d * (float)s0; a.u[2 * b + 1] = d * (float)s1;
    a.u32[b] = d * (float)(s0 + s1);
    for (int j = 0; j < 8; j++) {
      const int8_t *q4 = a.q + b * 32 + 4 * j;
      a.neg8[8 * b + j] = -8 * ((int32_t)q4[0] + q4[1] + q4[2] + q4[3]);
    }
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
/* the same added to int32 lanes `acc` (one instruction with VNNI) */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define DOT_U8S8_ACC(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#elif defined(__AVXVNNI__)
#define DOT_U8S8_ACC(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#elif defined(DOT_U8S8)
#define DOT_U8S8_ACC(acc, u, s) _mm256_add_epi32((acc), DOT_U8S8(u, s))
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

/* Q4_0: 18 bytes per 32: f16 d, 16 bytes of nibbles (low nibbles are elements 0..15, high 16..31); w = d * (q - 8).
   The -8 is in the integer dot: each block's accumulator starts at the activation's neg8 lanes */
static float dot_q4_0(const uint8_t *row, act_t a, int K) {
  float corr = 0.0f;
  int b = 0, nb = K / 32;
#if defined(DOT_U8S8)
  /* two blocks a step into two accumulators: one fma chain would stall on its latency every block */
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  /* the 16 nibble bytes in both halves, the high half shifted down 4: a load and a shift, no cross-lane insert */
  const __m256i m4 = _mm256_set1_epi8(15), hi4 = _mm256_setr_epi64x(0, 0, 4, 4);
  for (; b + 1 < nb; b += 2) {
    const uint8_t *b0 = row + b * 18, *b1 = b0 + 18;
    PREFETCH(b0 + 1024);
    float d0 = f16_to_f32(b0) * a.d[b], d1 = f16_to_f32(b1) * a.d[b + 1];
    __m256i w0 = _mm256_and_si256(_mm256_srlv_epi64(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 2))), hi4), m4);
    __m256i w1 = _mm256_and_si256(_mm256_srlv_epi64(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + 2))), hi4), m4);
    __m256i s0 = DOT_U8S8_ACC(_mm256_loadu_si256((const __m256i *)(a.neg8 + 8 * b)), w0, _mm256_loadu_si256((const __m256i *)(a.q + b * 32)));
    __m256i s1 = DOT_U8S8_ACC(_mm256_loadu_si256((const __m256i *)(a.neg8 + 8 * b + 8)), w1, _mm256_loadu_si256((const __m256i *)(a.q + b * 32 + 32)));
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(d0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_set1_ps(d1), acc1);
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
#if defined(DOT_U8S8)
/* all 8 (scale, min) pairs of scale_min_k4 at once, as floats: with the 12 bytes as words w0, w1, w2, scales 0-3 are
   the low 6 bits of w0's bytes, 4-7 the low nibbles of w2's with w0's top 2 bits above them; mins likewise from w1
   and w2's high nibbles */
static inline void scales_mins_k4(const uint8_t *q, __m256 *sc, __m256 *mn) {
  uint32_t w[3]; memcpy(w, q, 12);
  uint64_t s = (uint64_t)(w[0] & 0x3f3f3f3fu) | (uint64_t)((w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4)) << 32;
  uint64_t m = (uint64_t)(w[1] & 0x3f3f3f3fu) | (uint64_t)(((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4)) << 32;
  *sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)s)));
  *mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m)));
}
/* Q4_K / Q5_K: super-block sb's 8 sub-block factors d * sc * dx into f (stored, then broadcast from memory: a load, not
   a shuffle), and its mins' term dmin * m * (dx * sum x) added to *cacc as one vector fma */
static inline void factors_k4(const uint8_t *blk, act_t a, int sb, float *f, __m256 *cacc) {
  __m256 sc, mn;
  scales_mins_k4(blk + 4, &sc, &mn);
  _mm256_storeu_ps(f, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(f16_to_f32(blk)), sc), _mm256_loadu_ps(a.d + sb * 8)));
  *cacc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(f16_to_f32(blk + 2)), mn), _mm256_loadu_ps(a.u32 + sb * 8), *cacc);
}
/* Q4_K / Q5_K: sub-blocks 2j (unsigned weights `lo`) and 2j+1 (`hi`) against their 32 activations each at x, scaled by
   their factors f[0] and f[1], into one accumulator each */
static inline void dot_k_pair(__m256i lo, __m256i hi, const int8_t *x, const float *f, __m256 *acc0, __m256 *acc1) {
  __m256i slo = DOT_U8S8(lo, _mm256_loadu_si256((const __m256i *)x));
  __m256i shi = DOT_U8S8(hi, _mm256_loadu_si256((const __m256i *)(x + 32)));
  *acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(slo), _mm256_broadcast_ss(f), *acc0);
  *acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(shi), _mm256_broadcast_ss(f + 1), *acc1);
}
#endif
static float dot_q4_k(const uint8_t *row, act_t a, int K) {
#if defined(DOT_U8S8)
  /* per super-block: the 8 sub-block factors and the mins' term (factors_k4); two accumulators against fma latency */
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), cacc = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 144;
    PREFETCH(blk + 1024);
    float f[8];
    factors_k4(blk, a, sb, f, &cacc);
    const int8_t *x = a.q + sb * 256;
    for (int j = 0; j < 4; j++) {
      __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * j));
      __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      dot_k_pair(lo, hi, x + 64 * j, f + 2 * j, &acc0, &acc1);
    }
  }
  return hsum8(_mm256_add_ps(acc0, acc1)) - hsum8(cacc);
#else
  float acc_s = 0.0f, corr = 0.0f;
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 144;
    float d = f16_to_f32(blk), dmin = f16_to_f32(blk + 2);
    for (int j = 0; j < 4; j++) {
      const uint8_t *qs = blk + 16 + 32 * j;
      for (int h = 0; h < 2; h++) {
        int sub = 2 * j + h, b = sb * 8 + sub, sc, m;
        scale_min_k4(sub, blk + 4, &sc, &m);
        float dx = a.d[b];
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += (h ? qs[i] >> 4 : qs[i] & 15) * a.q[b * 32 + i];
        acc_s += d * (float)sc * dx * (float)s;
        corr += dmin * (float)m * dx * (float)(a.s16[2 * b] + a.s16[2 * b + 1]);
      }
    }
  }
  return acc_s - corr;
#endif
}

/* Q6_K: 210 bytes per 256: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales, f16 d; each half of
   128 elements is four runs of 32: ql[l] low / ql[l+32] low / ql[l] high / ql[l+32] high nibbles with qh[l] bit pairs
   0-1 / 2-3 / 4-5 / 6-7; one scale per 16 elements; w = d * sc * (q - 32) */
static float dot_q6_k(const uint8_t *row, act_t a, int K) {
#if defined(DOT_U8S8)
  /* the -32 offset starts each run's integer accumulator (4 x neg8); a half's 8 scales times d and their runs' dx in
     one vector, each run's (s0 x4, s1 x4) then one permute of it */
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), pairs = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 210;
    PREFETCH(blk + 1024);
    __m256 d = _mm256_set1_ps(f16_to_f32(blk + 208));
    for (int half = 0; half < 2; half++) {
      const uint8_t *ql = blk + 64 * half, *qh = blk + 128 + 32 * half;
      int b0 = sb * 8 + half * 4;   /* the first 32-element activation block of this half */
      __m256 dx = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(a.d + b0)), pairs);
      __m256 fac = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 192 + 8 * half)))), d), dx);
      __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
      __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
      __m256i qv[4] = {
        _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4)),
        _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4))};
      for (int run = 0; run < 4; run++) {
        int b = b0 + run;
        __m256i start = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(a.neg8 + 8 * b)), 2);
        __m256i s = DOT_U8S8_ACC(start, qv[run], _mm256_loadu_si256((const __m256i *)(a.q + b * 32)));
        /* int32 lanes 0-3 cover elements 0..15 (scale 2 run), lanes 4-7 elements 16..31 (scale 2 run + 1) */
        __m256 f = _mm256_permutevar8x32_ps(fac, _mm256_setr_epi32(2 * run, 2 * run, 2 * run, 2 * run, 2 * run + 1, 2 * run + 1, 2 * run + 1, 2 * run + 1));
        if (run & 1) acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), f, acc1);
        else acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), f, acc0);
      }
    }
  }
  return hsum8(_mm256_add_ps(acc0, acc1));
#else
  float acc_s = 0.0f, corr = 0.0f;
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 210;
    float d = f16_to_f32(blk + 208);
    const int8_t *scl = (const int8_t *)(blk + 192);
    for (int half = 0; half < 2; half++) {
      const uint8_t *ql = blk + 64 * half, *qh = blk + 128 + 32 * half;
      for (int run = 0; run < 4; run++) {
        int b = sb * 8 + half * 4 + run;   /* the 32-element activation block */
        float dx = a.d[b];
        float s0 = d * (float)scl[8 * half + 2 * run] * dx, s1 = d * (float)scl[8 * half + 2 * run + 1] * dx;
        int32_t i0 = 0, i1 = 0;
        for (int l = 0; l < 32; l++) {
          const uint8_t *lb = ql + (run & 1 ? 32 : 0);
          int q = ((run < 2 ? lb[l] & 15 : lb[l] >> 4) | (((qh[l] >> (2 * run)) & 3) << 4));
          if (l < 16) i0 += q * a.q[b * 32 + l]; else i1 += q * a.q[b * 32 + l];
        }
        acc_s += s0 * (float)i0 + s1 * (float)i1;
        corr += 32.0f * (s0 * (float)a.s16[2 * b] + s1 * (float)a.s16[2 * b + 1]);
      }
    }
  }
  return acc_s - corr;
#endif
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
  const __m256i m4 = _mm256_set1_epi8(15), hi4 = _mm256_setr_epi64x(0, 0, 4, 4);
  for (; b < nb; b++) {
    const uint8_t *blk = row + b * bb;
    PREFETCH(blk + 1024);
    float d = f16_to_f32(blk) * a.d[b];
    __m256i w = _mm256_and_si256(_mm256_srlv_epi64(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + at))), hi4), m4);
    if (hb >= 0) w = _mm256_or_si256(w, fifth_bits(blk + hb));
    __m256i x = _mm256_loadu_si256((const __m256i *)(a.q + b * 32));
    if (mn >= 0) {   /* a float min per block: in scalar code */
      acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT_U8S8(w, x)), _mm256_set1_ps(d), acc0);
      corr -= f16_to_f32(blk + mn) * a.d[b] * (float)(a.s16[2 * b] + a.s16[2 * b + 1]);
    } else {         /* Q5_0's fixed offset, -16 = twice neg8's -8: in the integer accumulator */
      __m256i start = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(a.neg8 + 8 * b)), 1);
      acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DOT_U8S8_ACC(start, w, x)), _mm256_set1_ps(d), acc0);
    }
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
#if defined(DOT_U8S8)
  /* as dot_q4_k, with each sub-block's fifth bits or'd in */
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), cacc = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 176;
    PREFETCH(blk + 1024);
    float f[8];
    factors_k4(blk, a, sb, f, &cacc);
    __m256i hbits = _mm256_loadu_si256((const __m256i *)(blk + 16));
    const int8_t *x = a.q + sb * 256;
    for (int j = 0; j < 4; j++) {
      __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * j));
      /* bit 2j of each qh byte belongs to sub-block 2j (low nibbles), bit 2j+1 to 2j+1 (high) */
      __m256i h = _mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * j));
      __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(_mm256_and_si256(h, one), 4));
      __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 1), one), 4));
      dot_k_pair(lo, hi, x + 64 * j, f + 2 * j, &acc0, &acc1);
    }
  }
  return hsum8(_mm256_add_ps(acc0, acc1)) - hsum8(cacc);
#else
  float acc_s = 0.0f, corr = 0.0f;
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * 176, *qh = blk + 16;
    float d = f16_to_f32(blk), dmin = f16_to_f32(blk + 2);
    for (int j = 0; j < 4; j++) {
      const uint8_t *qs = blk + 48 + 32 * j;
      for (int h = 0; h < 2; h++) {
        int sub = 2 * j + h, b = sb * 8 + sub, sc, m;
        scale_min_k4(sub, blk + 4, &sc, &m);
        float dx = a.d[b];
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += ((h ? qs[i] >> 4 : qs[i] & 15) | (((qh[i] >> sub) & 1) << 4)) * a.q[b * 32 + i];
        acc_s += d * (float)sc * dx * (float)s;
        corr += dmin * (float)m * dx * (float)(a.s16[2 * b] + a.s16[2 * b + 1]);
      }
    }
  }
  return acc_s - corr;
#endif
}

static inline float silu(float v) { return v / (1.0f + expf(-v)); }

/* ---- block decoders: group b (elements 32b..32b+31) of a row -> q[32] unsigned, s[2] and o[2] per half, w = s * q + o.
   Plain loops over a restrict output: gcc vectorizes them. */
typedef void (*decode_fn)(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o);
static inline void set_so(float *s, float *o, float s0, float s1, float o0, float o1) { s[0] = s0; s[1] = s1; o[0] = o0; o[1] = o1; }

/* Q4_0: 18 bytes per 32: f16 d, 16 bytes of nibbles (low: elements 0..15, high: 16..31); w = d * (q - 8) */
static void dec_q4_0(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + b * 18; float d = f16_to_f32(blk);
  for (int i = 0; i < 16; i++) { q[i] = blk[2 + i] & 15; q[16 + i] = blk[2 + i] >> 4; }
  set_so(s, o, d, d, -8.0f * d, -8.0f * d);
}
/* nibbles at `at`, and where hb >= 0 a u32 of fifth bits (bit j: element j) */
static inline void nibbles_fifth(const uint8_t *restrict blk, int at, int hb, uint8_t *restrict q) {
  uint32_t bits = 0;
  if (hb >= 0) memcpy(&bits, blk + hb, 4);
  for (int i = 0; i < 16; i++) {
    q[i] = (uint8_t)((blk[at + i] & 15) | (((bits >> i) & 1) << 4));
    q[16 + i] = (uint8_t)((blk[at + i] >> 4) | (((bits >> (i + 16)) & 1) << 4));
  }
}
/* Q4_1: 20 bytes: f16 d, f16 m, nibbles; w = d * q + m */
static void dec_q4_1(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + b * 20; float d = f16_to_f32(blk), m = f16_to_f32(blk + 2);
  nibbles_fifth(blk, 4, -1, q); set_so(s, o, d, d, m, m);
}
/* Q5_0: 22 bytes: f16 d, u32 fifth bits, nibbles; w = d * (q - 16) */
static void dec_q5_0(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + b * 22; float d = f16_to_f32(blk);
  nibbles_fifth(blk, 6, 2, q); set_so(s, o, d, d, -16.0f * d, -16.0f * d);
}
/* Q5_1: 24 bytes: f16 d, f16 m, u32 fifth bits, nibbles; w = d * q + m */
static void dec_q5_1(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + b * 24; float d = f16_to_f32(blk), m = f16_to_f32(blk + 2);
  nibbles_fifth(blk, 8, 4, q); set_so(s, o, d, d, m, m);
}
/* Q8_0: 34 bytes: f16 d, 32 int8; w = d * q, decoded as q + 128 (unsigned for the dot) with offset -128 d */
static void dec_q8_0(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + b * 34; float d = f16_to_f32(blk);
  for (int i = 0; i < 32; i++) q[i] = blk[2 + i] ^ 0x80;
  set_so(s, o, d, d, -128.0f * d, -128.0f * d);
}
/* q[l] = (lo[l] >> shift) & mask, or'd with bit `hbit` of hi[l] as bit 2 where hi is given (Q2_K's and Q3_K's 2-bit
   fields): gcc's own vectorization of this loop widens to 16 bits, twice the work of shifting 16-bit lanes and masking */
static inline void bits_at(const uint8_t *restrict lo, int shift, int mask, const uint8_t *restrict hi, int hbit, uint8_t *restrict q) {
#if defined(__AVX2__)
  __m256i v = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)lo), _mm_cvtsi32_si128(shift)), _mm256_set1_epi8((char)mask));
  if (hi) {
    __m256i h = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)hi), _mm_cvtsi32_si128(hbit)), _mm256_set1_epi8(1));
    v = _mm256_or_si256(v, _mm256_slli_epi16(h, 2));
  }
  _mm256_storeu_si256((__m256i *)q, v);
#else
  for (int l = 0; l < 32; l++) q[l] = (uint8_t)(((lo[l] >> shift) & mask) | (hi ? ((hi[l] >> hbit) & 1) << 2 : 0));
#endif
}
/* Q2_K: 84 bytes per 256: 16 scale bytes (low nibble scale, high nibble min, one per 16 elements), 64 bytes of 2-bit
   quants (group g: bytes 32 (g / 4).. of the row's half, bits 2 (g % 4)), f16 d, f16 dmin; w = d * sc * q - dmin * m */
static void dec_q2_k(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + (b / 8) * 84;
  int sub = b % 8, shift = 2 * (sub % 4);
  const uint8_t *qs = blk + 16 + 32 * (sub / 4);
  bits_at(qs, shift, 3, NULL, 0, q);
  float d = f16_to_f32(blk + 80), dmin = f16_to_f32(blk + 82);
  uint8_t s0 = blk[2 * sub], s1 = blk[2 * sub + 1];
  set_so(s, o, d * (float)(s0 & 15), d * (float)(s1 & 15), -dmin * (float)(s0 >> 4), -dmin * (float)(s1 >> 4));
}
/* Q3_K: 110 bytes per 256: 32 bytes of high bits (bit g of byte l: element 32g + l; clear means q - 4), 64 bytes of
   2-bit quants laid out as Q2_K's, 12 bytes of sixteen 6-bit scales (biased by 32), f16 d; w = d * (sc - 32) * q'
   with q' = (low 2 bits | high bit << 2) - 4 */
static void dec_q3_k(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + (b / 8) * 110, *sc = blk + 96;
  int sub = b % 8, shift = 2 * (sub % 4);
  const uint8_t *qs = blk + 32 + 32 * (sub / 4);
  bits_at(qs, shift, 3, blk, sub, q);
  /* scale i: low nibble of byte i % 8 (high nibble from i = 8 on), high 2 bits from bits 2 (i / 4) of byte 8 + i % 4 */
#define Q3K_SCALE(i) ((((sc[(i) & 7] >> (4 * ((i) >> 3))) & 15) | (((sc[8 + ((i) & 3)] >> (2 * ((i) >> 2))) & 3) << 4)) - 32)
  float d = f16_to_f32(blk + 108), f0 = d * (float)Q3K_SCALE(2 * sub), f1 = d * (float)Q3K_SCALE(2 * sub + 1);
#undef Q3K_SCALE
  set_so(s, o, f0, f1, -4.0f * f0, -4.0f * f1);
}
/* Q4_K: 144 bytes per 256: f16 d, f16 dmin, 12 bytes of eight 6-bit (scale, min) pairs, 128 bytes of nibbles (bytes
   32j.. hold group 2j in the low nibbles, 2j+1 in the high); w = d * sc * q - dmin * m */
static void dec_q4_k(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + (b / 8) * 144, *qs = blk + 16 + 32 * ((b % 8) / 2);
  int sub = b % 8, sc, m;
  scale_min_k4(sub, blk + 4, &sc, &m);
  int shift = sub & 1 ? 4 : 0;
  for (int i = 0; i < 32; i++) q[i] = (qs[i] >> shift) & 15;
  float d = f16_to_f32(blk) * (float)sc, mn = -f16_to_f32(blk + 2) * (float)m;
  set_so(s, o, d, d, mn, mn);
}
/* Q5_K: 176 bytes per 256: as Q4_K with 32 bytes of fifth bits after the scales (bit g of byte l: element 32g + l) */
static void dec_q5_k(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + (b / 8) * 176, *qh = blk + 16, *qs = blk + 48 + 32 * ((b % 8) / 2);
  int sub = b % 8, sc, m;
  scale_min_k4(sub, blk + 4, &sc, &m);
  int shift = sub & 1 ? 4 : 0;
  for (int i = 0; i < 32; i++) q[i] = (uint8_t)(((qs[i] >> shift) & 15) | (((qh[i] >> sub) & 1) << 4));
  float d = f16_to_f32(blk) * (float)sc, mn = -f16_to_f32(blk + 2) * (float)m;
  set_so(s, o, d, d, mn, mn);
}
/* Q6_K: see dot_q6_k; w = d * sc * (q - 32), one int8 scale per 16 elements */
static void dec_q6_k(const uint8_t *restrict row, int b, uint8_t *restrict q, float *s, float *o) {
  const uint8_t *blk = row + (b / 8) * 210;
  int half = (b % 8) / 4, run = b % 4, shift = run < 2 ? 0 : 4;
  const uint8_t *lb = blk + 64 * half + (run & 1 ? 32 : 0), *qh = blk + 128 + 32 * half;
  for (int l = 0; l < 32; l++) q[l] = (uint8_t)(((lb[l] >> shift) & 15) | (((qh[l] >> (2 * run)) & 3) << 4));
  const int8_t *scl = (const int8_t *)(blk + 192);
  float d = f16_to_f32(blk + 208), s0 = d * (float)scl[8 * half + 2 * run], s1 = d * (float)scl[8 * half + 2 * run + 1];
  set_so(s, o, s0, s1, -32.0f * s0, -32.0f * s1);
}

/* ---- the decode loop shape for any decoder: per group one integer dot of 32 bytes and the offsets through u */
#define GEN_DOT(kind)                                                                                                   \
  static float gen_dot_##kind(const uint8_t *row, act_t a, int K) {                                                    \
    float acc_s = 0.0f, corr = 0.0f;                                                                                    \
    GEN_DOT_ACC_INIT                                                                                                    \
    for (int b = 0; b < K / 32; b++) {                                                                                  \
      uint8_t q[32]; float s[2], o[2];                                                                                  \
      dec_##kind(row, b, q, s, o);                                                                                      \
      float dx = a.d[b];                                                                                                \
      GEN_DOT_GROUP                                                                                                     \
      corr += o[0] * a.u[2 * b] + o[1] * a.u[2 * b + 1];                                                                \
    }                                                                                                                   \
    GEN_DOT_ACC_END                                                                                                     \
    return acc_s + corr;                                                                                                \
  }
#if defined(DOT_U8S8)
/* AVX2 without VNNI saturates above 7-bit weights (maddubs): the decoders it is used with give q <= 63 */
#define GEN_DOT_ACC_INIT __m256 acc = _mm256_setzero_ps();
#define GEN_DOT_GROUP                                                                                                   \
  __m256i sum = DOT_U8S8(_mm256_loadu_si256((const __m256i *)q), _mm256_loadu_si256((const __m256i *)(a.q + 32 * b))); \
  float s0 = s[0] * dx, s1 = s[1] * dx;                                                                                 \
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_setr_ps(s0, s0, s0, s0, s1, s1, s1, s1), acc);
#define GEN_DOT_ACC_END acc_s = hsum8(acc);
#else
#define GEN_DOT_ACC_INIT
#define GEN_DOT_GROUP                                                                                                   \
  int32_t i0 = 0, i1 = 0;                                                                                               \
  for (int l = 0; l < 16; l++) { i0 += q[l] * a.q[32 * b + l]; i1 += q[16 + l] * a.q[32 * b + 16 + l]; }                 \
  acc_s += dx * (s[0] * (float)i0 + s[1] * (float)i1);
#define GEN_DOT_ACC_END
#endif
#if defined(DOT_U8S8)
/* Q2_K and Q3_K a superblock at a time: its scales converted once, each 32 bytes of 2-bit quants loaded once for the
   four groups they hold (the generic dot decodes each group on its own: 3x slower, ~5 ns per group) */
static float dot_q23_k(const uint8_t *row, act_t a, int K, int three) {
  __m256 acc = _mm256_setzero_ps();
  float corr = 0.0f;
  const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
  for (int sb = 0; sb < K / 256; sb++) {
    const uint8_t *blk = row + sb * (three ? 110 : 84);
    PREFETCH(blk + 1024);
    const uint8_t *qs = blk + (three ? 32 : 16), *sc = three ? blk + 96 : blk;
    float d = f16_to_f32(blk + (three ? 108 : 80)), dmin = three ? 0.0f : f16_to_f32(blk + 82);
    __m256i hm = three ? _mm256_loadu_si256((const __m256i *)blk) : _mm256_setzero_si256();
    for (int half = 0; half < 2; half++) {
      __m256i qv = _mm256_loadu_si256((const __m256i *)(qs + 32 * half));
      for (int j = 0; j < 4; j++) {
        int sub = 4 * half + j, b = sb * 8 + sub;
        __m256i q = _mm256_and_si256(_mm256_srl_epi16(qv, _mm_cvtsi32_si128(2 * j)), m3);
        float s0, s1, o0, o1;
        if (three) {
          q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(sub)), m1), 2));
#define Q3K_SCALE(i) ((((sc[(i) & 7] >> (4 * ((i) >> 3))) & 15) | (((sc[8 + ((i) & 3)] >> (2 * ((i) >> 2))) & 3) << 4)) - 32)
          s0 = d * (float)Q3K_SCALE(2 * sub); s1 = d * (float)Q3K_SCALE(2 * sub + 1);
#undef Q3K_SCALE
          o0 = -4.0f * s0; o1 = -4.0f * s1;
        } else {
          s0 = d * (float)(sc[2 * sub] & 15); s1 = d * (float)(sc[2 * sub + 1] & 15);
          o0 = -dmin * (float)(sc[2 * sub] >> 4); o1 = -dmin * (float)(sc[2 * sub + 1] >> 4);
        }
        float dx = a.d[b];
        __m256i sum = DOT_U8S8(q, _mm256_loadu_si256((const __m256i *)(a.q + 32 * b)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_setr_ps(s0 * dx, s0 * dx, s0 * dx, s0 * dx, s1 * dx, s1 * dx, s1 * dx, s1 * dx), acc);
        corr += o0 * a.u[2 * b] + o1 * a.u[2 * b + 1];
      }
    }
  }
  return hsum8(acc) + corr;
}
static float dot_q2_k(const uint8_t *row, act_t a, int K) { return dot_q23_k(row, a, K, 0); }
static float dot_q3_k(const uint8_t *row, act_t a, int K) { return dot_q23_k(row, a, K, 1); }
#else
GEN_DOT(q2_k)
GEN_DOT(q3_k)
#define dot_q2_k gen_dot_q2_k
#define dot_q3_k gen_dot_q3_k
#endif

/* a format: its decoder, its decode dot, bytes per block of `block` elements, and `group`: 16 where a block's halves
   have scales of their own (the prefill kernel then applies scales per 16), else 32 */
typedef struct { decode_fn dec; float (*dot)(const uint8_t *, act_t, int); int block, bytes, group; } format_t;
static const format_t fmt_q4_0 = {dec_q4_0, dot_q4_0, 32, 18, 32}, fmt_q4_1 = {dec_q4_1, dot_q4_1, 32, 20, 32},
                      fmt_q5_0 = {dec_q5_0, dot_q5_0, 32, 22, 32}, fmt_q5_1 = {dec_q5_1, dot_q5_1, 32, 24, 32},
                      fmt_q8_0 = {dec_q8_0, dot_q8_0, 32, 34, 32}, fmt_q2_k = {dec_q2_k, dot_q2_k, 256, 84, 16},
                      fmt_q3_k = {dec_q3_k, dot_q3_k, 256, 110, 16}, fmt_q4_k = {dec_q4_k, dot_q4_k, 256, 144, 32},
                      fmt_q5_k = {dec_q5_k, dot_q5_k, 256, 176, 32}, fmt_q6_k = {dec_q6_k, dot_q6_k, 256, 210, 16};

/* ---- the prefill loop shape (VNNI): a panel of NC output columns decoded once, then every token against it */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define PANEL 1
#define VW 16   /* columns per vector */
typedef __m512i vi_t;
typedef __m512 vf_t;
#define DPBUSD(acc, u, s) _mm512_dpbusd_epi32((acc), (u), (s))
#define LOADI(p) _mm512_loadu_si512((const void *)(p))
#define SET1I(v) _mm512_set1_epi32(v)
#define ZEROI() _mm512_setzero_si512()
#define ZEROF() _mm512_setzero_ps()
#define LOADF(p) _mm512_loadu_ps(p)
#define STOREF(p, v) _mm512_storeu_ps((p), (v))
#define SET1F(v) _mm512_set1_ps(v)
#define CVTF(v) _mm512_cvtepi32_ps(v)
#define FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define MULF(a, b) _mm512_mul_ps((a), (b))
#elif defined(__AVXVNNI__)
#define PANEL 1
#define VW 8
typedef __m256i vi_t;
typedef __m256 vf_t;
#define DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#define LOADI(p) _mm256_loadu_si256((const __m256i *)(p))
#define SET1I(v) _mm256_set1_epi32(v)
#define ZEROI() _mm256_setzero_si256()
#define ZEROF() _mm256_setzero_ps()
#define LOADF(p) _mm256_loadu_ps(p)
#define STOREF(p, v) _mm256_storeu_ps((p), (v))
#define SET1F(v) _mm256_set1_ps(v)
#define CVTF(v) _mm256_cvtepi32_ps(v)
#define FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define MULF(a, b) _mm256_mul_ps((a), (b))
#else
#define PANEL 0
#define VW 1
#endif
#define NC (2 * VW)   /* columns per panel: two vectors */

#if PANEL
/* panel layout: pq[k / 4][NC][4] bytes (for one step, 4 consecutive k of every column: one vpdpbusd per vector against
   4 activation bytes broadcast), ps/po[k / group][NC] scales and offsets. Columns past nc are zero. Four columns at a
   time: their decoded groups are interleaved 4 bytes at a time by a 4x4 transpose of dwords. */
static void pack_panel(const format_t *f, const uint8_t *w, int K, int nc, uint8_t *pq, float *ps, float *po) {
  size_t row_bytes = (size_t)(K / f->block) * f->bytes;
  int per = 32 / f->group;   /* scale entries per 32-element group */
  for (int c = 0; c < NC; c += 4) {
    for (int b = 0; b < K / 32; b++) {
      uint8_t q[4][32]; float s[2], o[2];
      for (int i = 0; i < 4; i++) {
        if (c + i < nc) f->dec(w + (size_t)(c + i) * row_bytes, b, q[i], s, o);
        else { memset(q[i], 0, 32); s[0] = s[1] = o[0] = o[1] = 0.0f; }
        for (int h = 0; h < per; h++) { ps[(size_t)(per * b + h) * NC + c + i] = s[h]; po[(size_t)(per * b + h) * NC + c + i] = o[h]; }
      }
      for (int half = 0; half < 2; half++) {
        __m128i r0 = _mm_loadu_si128((const __m128i *)(q[0] + 16 * half)), r1 = _mm_loadu_si128((const __m128i *)(q[1] + 16 * half));
        __m128i r2 = _mm_loadu_si128((const __m128i *)(q[2] + 16 * half)), r3 = _mm_loadu_si128((const __m128i *)(q[3] + 16 * half));
        __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3), t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
        __m128i d[4] = {_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1), _mm_unpacklo_epi64(t2, t3), _mm_unpackhi_epi64(t2, t3)};
        for (int m = 0; m < 4; m++) _mm_storeu_si128((__m128i *)(pq + ((size_t)(8 * b + 4 * half + m) * NC + c) * 4), d[m]);
      }
    }
  }
}

/* TT tokens x NC columns: int32 sums over one scale group (G bytes = G/4 vpdpbusd per accumulator), then scaled into
   float accumulators with the offsets. y: [TT][NC] */
#define MICRO(G, TT)                                                                                                    \
  static void micro_g##G##_t##TT(const uint8_t *pq, const float *ps, const float *po, const act_t *a, int K, float *y) { \
    vf_t acc[TT][2];                                                                                                    \
    const int8_t *xq[TT]; const float *xd[TT], *xu[TT];                                                                 \
    _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                                            \
      acc[t][0] = acc[t][1] = ZEROF();                                                                                  \
      xq[t] = a[t].q; xd[t] = G == 32 ? a[t].d : a[t].d16; xu[t] = G == 32 ? a[t].u32 : a[t].u;                         \
    }                                                                                                                   \
    for (int g = 0; g < K / G; g++) {                                                                                   \
      vi_t s[TT][2];                                                                                                    \
      _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) s[t][0] = s[t][1] = ZEROI();                               \
      _Pragma("GCC unroll 8") for (int kk = 0; kk < G / 4; kk++) {                                                     \
        const uint8_t *wp = pq + ((size_t)(g * (G / 4) + kk) * NC) * 4;                                                 \
        vi_t w0 = LOADI(wp), w1 = LOADI(wp + 4 * VW);                                                                   \
        _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                                        \
          int32_t x4; memcpy(&x4, xq[t] + g * G + 4 * kk, 4);                                                           \
          vi_t xb = SET1I(x4);                                                                                          \
          s[t][0] = DPBUSD(s[t][0], w0, xb); s[t][1] = DPBUSD(s[t][1], w1, xb);                                         \
        }                                                                                                               \
      }                                                                                                                 \
      vf_t s0 = LOADF(ps + (size_t)g * NC), s1 = LOADF(ps + (size_t)g * NC + VW);                                       \
      vf_t o0 = LOADF(po + (size_t)g * NC), o1 = LOADF(po + (size_t)g * NC + VW);                                       \
      _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                                          \
        vf_t dx = SET1F(xd[t][g]), u = SET1F(xu[t][g]);                                                                 \
        acc[t][0] = FMA(o0, u, FMA(CVTF(s[t][0]), MULF(s0, dx), acc[t][0]));                                            \
        acc[t][1] = FMA(o1, u, FMA(CVTF(s[t][1]), MULF(s1, dx), acc[t][1]));                                            \
      }                                                                                                                 \
    }                                                                                                                   \
    _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) { STOREF(y + t * NC, acc[t][0]); STOREF(y + t * NC + VW, acc[t][1]); }                 \
  }
MICRO(32, 4) MICRO(32, 1) MICRO(16, 4) MICRO(16, 1)

/* every token against one packed panel: y[T][NC] */
static void panel_all_tokens(int group, const uint8_t *pq, const float *ps, const float *po, const act_t *acts, int T, int K, float *y) {
  int t = 0;
  if (group == 32) {
    for (; t + 4 <= T; t += 4) micro_g32_t4(pq, ps, po, acts + t, K, y + (size_t)t * NC);
    for (; t < T; t++) micro_g32_t1(pq, ps, po, acts + t, K, y + (size_t)t * NC);
  } else {
    for (; t + 4 <= T; t += 4) micro_g16_t4(pq, ps, po, acts + t, K, y + (size_t)t * NC);
    for (; t < T; t++) micro_g16_t1(pq, ps, po, acts + t, K, y + (size_t)t * NC);
  }
}
#endif

/* the panel pays for its decoding from this many tokens on (below it, one dot per row and token reads the weights once
   and decodes them in registers) */
#define PANEL_MIN_TOKENS 4

/* one thread's share: output rows [start, end) for every token */
static void qmm(const format_t *f, float *restrict out, const float *restrict x, const uint8_t *restrict w,
                const uint8_t *restrict w_up, const float *restrict g, const float *restrict res,
                long long K_, long long T_, long long N_, long long eps_bits, long long start, long long end) {
  int K = (int)K_, T = (int)T_, N = (int)N_;
  float eps; uint32_t eb = (uint32_t)eps_bits; memcpy(&eps, &eb, 4);
  size_t row_bytes = (size_t)(K / f->block) * f->bytes;
  int panel = PANEL && T >= PANEL_MIN_TOKENS;
  /* activations, per token its act_t, then the outputs before the epilogue (gate and up): T per row, or T x NC per
     panel; then the panels (gate and up) */
  size_t ys_n = panel ? (size_t)T * NC : (size_t)T;
  size_t panel_bytes = panel ? (size_t)K * NC + 2 * (size_t)(K / 16) * NC * sizeof(float) : 0;
  size_t bytes = (size_t)T * ACT_BYTES(K) + (size_t)T * sizeof(act_t) + 2 * ys_n * sizeof(float) + 2 * panel_bytes + 64;
  char *mem = (char *)malloc(bytes);
  if (!mem) { /* out of memory: NaN rows, never stale ones */
    for (long long r = start; r < end; r++) for (int t = 0; t < T; t++) out[(size_t)t * N + r] = NAN;
    return;
  }
  act_t *acts = (act_t *)(((uintptr_t)(mem + (size_t)T * ACT_BYTES(K)) + 15) & ~(uintptr_t)15);
  float *ys = (float *)(acts + T), *ys_up = ys + ys_n;
  uint8_t *pmem = (uint8_t *)(ys_up + ys_n);
  for (int t = 0; t < T; t++) {
    acts[t] = act_at(mem, K, t);
    quantize_act(x + (size_t)t * K, g, eps, K, acts[t]);
  }
#if PANEL
  if (panel) {
    uint8_t *pq[2]; float *ps[2], *po[2];
    for (int i = 0; i < 2; i++) {
      pq[i] = pmem + i * panel_bytes;
      ps[i] = (float *)(pq[i] + (size_t)K * NC); po[i] = ps[i] + (size_t)(K / 16) * NC;
    }
    for (long long c0 = start; c0 < end; c0 += NC) {
      int nc = end - c0 < NC ? (int)(end - c0) : NC;
      pack_panel(f, w + (size_t)c0 * row_bytes, K, nc, pq[0], ps[0], po[0]);
      panel_all_tokens(f->group, pq[0], ps[0], po[0], acts, T, K, ys);
      if (w_up) {
        pack_panel(f, w_up + (size_t)c0 * row_bytes, K, nc, pq[1], ps[1], po[1]);
        panel_all_tokens(f->group, pq[1], ps[1], po[1], acts, T, K, ys_up);
      }
      for (int t = 0; t < T; t++)
        for (int c = 0; c < nc; c++) {
          float y = ys[(size_t)t * NC + c];
          if (w_up) y = silu(y) * ys_up[(size_t)t * NC + c];
          if (res) y += res[(size_t)t * N + c0 + c];
          out[(size_t)t * N + c0 + c] = y;
        }
    }
    free(mem);
    return;
  }
#endif
  (void)pmem;
  for (long long r = start; r < end; r++) {
    const uint8_t *row = w + (size_t)r * row_bytes;
    for (int t = 0; t < T; t++) {
      float y = f->dot(row, acts[t], K);
      if (w_up) y = silu(y) * f->dot(w_up + (size_t)r * row_bytes, acts[t], K);
      if (res) y += res[(size_t)t * N + r];
      out[(size_t)t * N + r] = y;
    }
  }
  free(mem);
}

/* the exported variants of one format */
#define KARGS long long K, long long T, long long N, long long eps_bits, long long start, long long end
#define KPASS K, T, N, eps_bits, start, end
#define OUT_X_W float *restrict out, const float *restrict x, const uint8_t *restrict w
#define VARIANTS(kind)                                                                                                     \
  void qmm_##kind(OUT_X_W, KARGS) { qmm(&fmt_##kind, out, x, w, NULL, NULL, NULL, KPASS); }                                 \
  void qmm_##kind##_norm(OUT_X_W, const float *restrict g, KARGS) { qmm(&fmt_##kind, out, x, w, NULL, g, NULL, KPASS); }      \
  void qmm_##kind##_swiglu(OUT_X_W, const uint8_t *restrict up, KARGS) { qmm(&fmt_##kind, out, x, w, up, NULL, NULL, KPASS); } \
  void qmm_##kind##_norm_swiglu(OUT_X_W, const uint8_t *restrict up, const float *restrict g, KARGS) {                      \
    qmm(&fmt_##kind, out, x, w, up, g, NULL, KPASS);                                                                        \
  }                                                                                                                        \
  void qmm_##kind##_res(OUT_X_W, const float *restrict res, KARGS) { qmm(&fmt_##kind, out, x, w, NULL, NULL, res, KPASS); }   \
  void qmm_##kind##_norm_res(OUT_X_W, const float *restrict g, const float *restrict res, KARGS) {                          \
    qmm(&fmt_##kind, out, x, w, NULL, g, res, KPASS);                                                                       \
  }
VARIANTS(q4_0) VARIANTS(q4_1) VARIANTS(q5_0) VARIANTS(q5_1) VARIANTS(q8_0)
VARIANTS(q2_k) VARIANTS(q3_k) VARIANTS(q4_k) VARIANTS(q5_k) VARIANTS(q6_k)
