/* The CPU graph driver: one call runs a captured batch of kernels in order (graph.py builds the batch).

   Every CPU kernel has one ABI: void k(int64 a0, ..., int64 a{n-1}, int64 start, int64 end), the buffer pointers and
   Variable values as 64-bit integers, then the range of the outermost loop to compute (x86-64 and AArch64 pass pointers
   and 64-bit ints in the same registers). A batch is an array of tc_kernel; each points at its own argument block,
   which Python patches in place between replays (new input buffers, Variable values).

   A kernel with chunks > 1 is cut into that many pieces of its outer loop, taken in turn by the caller and by a
   persistent team of worker threads; chunks == 1 runs on the caller alone. The caller publishes a kernel by storing
   (generation << 32 | lo << 16 | hi) in one atomic word, the pieces [lo, hi) not yet claimed; a thread claims one with
   a CAS that also checks the generation, so a late worker can never take a piece of a kernel that is already finished.
   The caller claims from the top (hi) and the workers from the bottom (lo): with two threads a replay gives each
   thread the same pieces as the last one (claiming from one end, whoever won the race for the first piece took the
   top half), so a weight slice that fits in a core's L2 can still be there on the next call. The caller
   counts finished pieces before it moves on (the barrier between kernels). Workers spin a little while waiting for the
   next kernel, then sleep on a condition variable; the caller only pays for a wake-up when someone sleeps. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdatomic.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

typedef int64_t I;
typedef struct { void *fn; I *args; int64_t nargs; int64_t n; int64_t chunks; } tc_kernel;

#define MAXARGS 126
#define MAXTHREADS 256
#define SPIN_NS 200000   /* how long an idle worker spins before it sleeps: the gap between split kernels in a replay */

/* call fn(args[0..nargs-1], start, end) with the exact arity it was compiled with (the cases are generated) */
static int call_kernel(void *fn, const I *a, int64_t nargs, I s, I e) {
  switch (nargs) {
TC_CALL_CASES
    default: return -1;
  }
  return 0;
}

static struct {
  pthread_mutex_t run;     /* one batch at a time uses the team; a second caller runs its batch alone */
  pthread_mutex_t mu;      /* guards sleeping */
  pthread_cond_t cv;
  pthread_t tids[MAXTHREADS];
  int nworkers;
  _Atomic uint64_t state;  /* generation << 32 | pieces not yet claimed */
  _Atomic int64_t done;    /* pieces of the current generation finished */
  _Atomic int sleepers;
  _Atomic int quit;
  /* the kernel being split: written by the caller before it publishes a generation, read after a successful claim */
  const tc_kernel *job;
  int64_t pieces;
} team = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static int atfork_registered = 0;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

#define LO(s) ((uint32_t)((s) >> 16) & 0xffff)
#define HI(s) ((uint32_t)(s) & 0xffff)
#define MAXPIECES 0xffff

/* claim and run pieces of generation `gen` until none are left, from the top (the caller) or the bottom (workers) */
static void run_pieces(uint32_t gen, int from_top) {
  uint64_t s = atomic_load(&team.state);
  for (;;) {
    if ((uint32_t)(s >> 32) != gen || LO(s) >= HI(s)) return;
    uint64_t next = from_top ? s - 1 : s + (1u << 16);
    if (!atomic_compare_exchange_weak(&team.state, &s, next)) continue;   /* s now holds the current value */
    const tc_kernel *k = team.job;
    I piece = from_top ? (I)HI(s) - 1 : (I)LO(s);
    /* pieces differ by at most one iteration: 98 row panels in 8 pieces of 13 left the last with 7, and whichever
       thread ran 4 full pieces did 52 of the 98 (the x.T @ g1 of an MLP step: ~3% of the kernel waiting) */
    I start = piece * k->n / team.pieces, end = (piece + 1) * k->n / team.pieces;
    if (start < end) call_kernel(k->fn, k->args, k->nargs, start, end);
    atomic_fetch_add(&team.done, 1);
    s = atomic_load(&team.state);
  }
}

static void *worker(void *arg) {
  (void)arg;
  uint32_t seen = (uint32_t)(atomic_load(&team.state) >> 32);
  for (;;) {
    uint64_t s;
    int64_t t0 = now_ns();
    for (int i = 0;; i++) {
      s = atomic_load(&team.state);
      if ((uint32_t)(s >> 32) != seen || atomic_load(&team.quit)) break;
      cpu_relax();
      if ((i & 255) == 255 && now_ns() - t0 > SPIN_NS) {
        pthread_mutex_lock(&team.mu);
        atomic_fetch_add(&team.sleepers, 1);
        while ((uint32_t)(atomic_load(&team.state) >> 32) == seen && !atomic_load(&team.quit)) pthread_cond_wait(&team.cv, &team.mu);
        atomic_fetch_sub(&team.sleepers, 1);
        pthread_mutex_unlock(&team.mu);
        t0 = now_ns();
      }
    }
    if (atomic_load(&team.quit)) return 0;
    seen = (uint32_t)(s >> 32);
    run_pieces(seen, 0);
  }
}

/* the child of a fork has none of the parent's threads: it starts with no team and builds its own on first use */
static void after_fork_child(void) {
  pthread_mutex_init(&team.run, 0);
  pthread_mutex_init(&team.mu, 0);
  pthread_cond_init(&team.cv, 0);
  team.nworkers = 0;
  atomic_store(&team.state, 0);
  atomic_store(&team.done, 0);
  atomic_store(&team.sleepers, 0);
  atomic_store(&team.quit, 0);
}

/* grow the team to `want` workers (the caller is not one of them); returns how many there are */
static int ensure_team(int want) {
  if (want > MAXTHREADS) want = MAXTHREADS;
  if (!atfork_registered) { pthread_atfork(0, 0, after_fork_child); atfork_registered = 1; }
  while (team.nworkers < want) {
    if (pthread_create(&team.tids[team.nworkers], 0, worker, 0) != 0) break;   /* fewer threads: the caller does more */
    team.nworkers++;
  }
  return team.nworkers;
}

static void run_split(const tc_kernel *k) {
  int64_t chunks = k->chunks < k->n ? k->chunks : k->n;
  if (chunks > MAXPIECES) chunks = MAXPIECES;   /* lo and hi are 16-bit fields of the state word */
  team.job = k;
  team.pieces = chunks;
  atomic_store(&team.done, 0);
  uint32_t gen = (uint32_t)(atomic_load(&team.state) >> 32) + 1;
  atomic_store(&team.state, ((uint64_t)gen << 32) | (uint64_t)chunks);   /* lo = 0, hi = chunks */
  if (atomic_load(&team.sleepers) > 0) {
    pthread_mutex_lock(&team.mu);
    pthread_cond_broadcast(&team.cv);
    pthread_mutex_unlock(&team.mu);
  }
  run_pieces(gen, 1);
  /* the last pieces may still run on workers: wait for them (they are short, so spin; yield if a worker was preempted) */
  for (int i = 0; atomic_load(&team.done) < chunks; i++) {
    if (i < 4096) cpu_relax(); else sched_yield();
  }
}

/* Run kernels[0..count-1] in order with up to `threads` threads (the caller included). Returns 0, or -(i+1) when kernel
   i has an arity this driver has no case for (nothing after it ran; graph.py never builds such a batch). */
int64_t tc_graph_run(const tc_kernel *kernels, int64_t count, int64_t threads) {
  int team_ok = pthread_mutex_trylock(&team.run) == 0;
  int workers = team_ok && threads > 1 ? ensure_team((int)threads - 1) : 0;
  int64_t rc = 0;
  for (int64_t i = 0; i < count; i++) {
    const tc_kernel *k = &kernels[i];
    if (k->nargs < 0 || k->nargs > MAXARGS) { rc = -(i + 1); break; }
    if (k->chunks > 1 && k->n > 1 && workers > 0) run_split(k);
    else if (call_kernel(k->fn, k->args, k->nargs, 0, k->n) != 0) { rc = -(i + 1); break; }
  }
  if (team_ok) pthread_mutex_unlock(&team.run);
  return rc;
}

/* interpreter exit: wake and join the team so no thread is left spinning while the process tears down */
void tc_graph_shutdown(void) {
  pthread_mutex_lock(&team.run);
  atomic_store(&team.quit, 1);
  pthread_mutex_lock(&team.mu);
  pthread_cond_broadcast(&team.cv);
  pthread_mutex_unlock(&team.mu);
  for (int i = 0; i < team.nworkers; i++) pthread_join(team.tids[i], 0);
  team.nworkers = 0;
  atomic_store(&team.quit, 0);
  pthread_mutex_unlock(&team.run);
}

int64_t tc_graph_workers(void) { return team.nworkers; }
