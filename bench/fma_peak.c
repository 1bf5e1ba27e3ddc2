/* The fp32 FMA peak of one core: independent chains of fused multiply-adds on the widest vector type the host has.
   Each chain waits on its own previous FMA only, so with chains >= latency x FMA ports the FMA units never stall and
   the loop measures throughput, not latency. bench/fma_peak.py builds this with the CPU plugin's own compiler flags
   (GCC/clang vector extensions, the same 512-bit vectors the kernels use) and runs it on 1..N threads at once. */
#if defined(__AVX512F__)
#define LANES 16
#elif defined(__AVX__)
#define LANES 8
#else
#define LANES 4
#endif
typedef float vf __attribute__((vector_size(LANES * 4)));
#define CHAINS 16

/* iters rounds of CHAINS independent vector FMAs; returns a sum the caller keeps so nothing is optimized away.
   The multiplier is just under 1 and the addend small, so the values stay finite and normal for any iters. */
/* the chains are named variables, not an array: an array indexed in a loop lived on the stack (a load and a store per FMA) */
#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define DECL(c) vf acc##c = (vf){} + (seed + (float)c);
/* the empty asm makes each result opaque, so the compiler can't fold a chain into a closed form */
#define STEP(c) acc##c = acc##c * m + a; __asm__ volatile("" : "+v"(acc##c));
#define SUM(c) s += acc##c;

/* iters rounds of CHAINS independent vector FMAs; returns a sum the caller keeps so nothing is optimized away.
   The multiplier is just under 1 and the addend small, so the values stay finite and normal for any iters. */
float fma_chains(long iters, float seed) {
  vf m = (vf){} + 0.999999f, a = (vf){} + seed * 1e-7f;
  EACH(DECL)
  for (long i = 0; i < iters; i++) { EACH(STEP) }
  vf s = (vf){};
  EACH(SUM)
  float t = 0.0f;
  for (int l = 0; l < LANES; l++) t += s[l];
  return t;
}

int fma_lanes(void) { return LANES; }
int fma_chain_count(void) { return CHAINS; }
