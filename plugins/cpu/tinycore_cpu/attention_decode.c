/* One decode step's attention for the LLM runner, for one layer, in one kernel: the new token's key is rotated and
   written with its value into the KV cache at `pos`, then every query head (rotated) scores the cache rows 0..pos,
   softmaxes and sums the values. The generated kernels take six launches for this (cache write, scores, max, sum of
   exps, probabilities, weighted sum); a decode step has ~30 layers and each launch costs a few microseconds.

   Layouts: qkv is the fused projection's output, q (nh heads) then k then v (nkv heads each), hd floats per head;
   cache is (2, nkv, M, hd), keys then values; cos/sin hold rd/2 angles of this position. Rotary pairs are (2i, 2i+1)
   (llama GGUFs) or (i, i + rd/2) with `neox`; dims past rd are not rotated. Query head h reads kv head h / (nh/nkv).
   Arguments: out, qkv, cache, cos, sin, then nh, nkv, hd, rd, M, neox, scale (float bits), pos, and the range
   [start, end) of kv heads this thread computes: each kv head's cache rows and query heads belong to one thread.
   Sizes were checked by the caller (tinycore/llm/attention.py) against the buffers; pos is checked here, per call,
   because a replay passes a new one without Python seeing it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define MAX_HEAD 1024   /* the caller refuses bigger heads: the rotated query lives on the stack */

static void rotate(float *v, const float *cs, const float *sn, int rd, int neox) {
  int h = rd / 2;
  for (int i = 0; i < h; i++) {
    int a = neox ? i : 2 * i, b = neox ? i + h : 2 * i + 1;
    float x = v[a], y = v[b];
    v[a] = x * cs[i] - y * sn[i];
    v[b] = x * sn[i] + y * cs[i];
  }
}

/* q . k over n floats: eight partial sums (a float reduction gcc won't reorder into vectors on its own) */
static inline float dot(const float *restrict q, const float *restrict k, int n) {
  int i = 0;
  float s = 0.0f;
#if defined(__AVX2__)
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), acc);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  s = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
#endif
  for (; i < n; i++) s += q[i] * k[i];
  return s;
}

/* out[i] = scale * sum_t p[t] * V[t][i] over n rows of hd floats: 32 columns at a time in registers, every row */
static void weighted_sum(const float *restrict p, const float *restrict V, int n, int hd, float scale, float *restrict out) {
  int i = 0;
#if defined(__AVX2__)
  for (; i + 32 <= hd; i += 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    for (int t = 0; t < n; t++) {
      const float *v = V + (size_t)t * hd + i;
      __m256 w = _mm256_broadcast_ss(p + t);
      a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v), a0); a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8), a1);
      a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 16), a2); a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 24), a3);
    }
    __m256 sc = _mm256_set1_ps(scale);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(a0, sc)); _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(a1, sc));
    _mm256_storeu_ps(out + i + 16, _mm256_mul_ps(a2, sc)); _mm256_storeu_ps(out + i + 24, _mm256_mul_ps(a3, sc));
  }
#endif
  for (; i < hd; i++) {   /* what the vector loop left (all of it without one) */
    float a = 0.0f;
    for (int t = 0; t < n; t++) a += p[t] * V[(size_t)t * hd + i];
    out[i] = a * scale;
  }
}

void attn_decode(float *restrict out, const float *restrict qkv, float *restrict cache, const float *restrict cs,
                 const float *restrict sn, long long nh_, long long nkv_, long long hd_, long long rd_, long long M_,
                 long long neox, long long scale_bits, long long pos_, long long start, long long end) {
  int nh = (int)nh_, nkv = (int)nkv_, hd = (int)hd_, rd = (int)rd_, M = (int)M_, pos = (int)pos_, rep = nh / nkv;
  float scale; uint32_t sb = (uint32_t)scale_bits; memcpy(&scale, &sb, 4);
  /* checked as passed (64 bits): a narrowed 2^40 would pass as 0 */
  float *p = pos_ >= 0 && pos_ < M_ ? (float *)malloc((size_t)(pos + 1) * sizeof(float)) : NULL;
  if (!p) {   /* a position outside the cache, or out of memory: NaN heads, never a write outside the cache */
    for (long long g = start; g < end; g++) for (int i = 0; i < rep * hd; i++) out[(size_t)g * rep * hd + i] = NAN;
    return;
  }
  for (long long g = start; g < end; g++) {
    float *K = cache + (size_t)g * M * hd, *V = cache + ((size_t)nkv + g) * M * hd;
    float *krow = K + (size_t)pos * hd;
    memcpy(krow, qkv + (size_t)(nh + g) * hd, (size_t)hd * sizeof(float));
    rotate(krow, cs, sn, rd, neox);
    memcpy(V + (size_t)pos * hd, qkv + (size_t)(nh + nkv + g) * hd, (size_t)hd * sizeof(float));
    for (int r = 0; r < rep; r++) {
      int h = (int)g * rep + r;
      float q[MAX_HEAD];
      memcpy(q, qkv + (size_t)h * hd, (size_t)hd * sizeof(float));
      rotate(q, cs, sn, rd, neox);
      float mx = -INFINITY, sum = 0.0f;
      for (int t = 0; t <= pos; t++) {
        p[t] = dot(q, K + (size_t)t * hd, hd) * scale;
        mx = p[t] > mx ? p[t] : mx;
      }
      for (int t = 0; t <= pos; t++) { p[t] = expf(p[t] - mx); sum += p[t]; }
      weighted_sum(p, V, pos + 1, hd, 1.0f / sum, out + (size_t)h * hd);
    }
  }
  free(p);
}
