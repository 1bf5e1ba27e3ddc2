/* A fake libamdhip64 for tinycore-amd's tests: the HIP calls tinycore_amd/hip.py makes, over host memory.
   One GPU ("Fake Radeon", gcnArchName set by fake_set_arch) unless fake_set_devices says otherwise; hipMalloc fails
   with hipErrorOutOfMemory past fake_set_capacity bytes; hipModuleLaunchKernel records what it was given (grid, block,
   shared memory, the kernarg buffer) for the fake_* getters and runs nothing. Build: cc -shared -fPIC -o libfake.so */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_DIRECTION = 21, NO_DEVICE = 100, INVALID_DEVICE = 101,
       INVALID_IMAGE = 200, INVALID_HANDLE = 400, NOT_FOUND = 500 };
#define ARCH_OFFSET 1160   /* where gcnArchName sits in this fake's hipDeviceProp_t (R0600 puts it elsewhere) */
#define PROPS_SIZE 1472

static int ndev = 1, current = 0, fail_launch = 0, launches = 0, syncs = 0, unloads = 0, live = 0, last_kind = -1;
static size_t capacity = (size_t)1 << 32, used = 0, last_args_size = 0;
static char arch[64] = "gfx1100";
static unsigned last_grid[3], last_block[3], last_shared;
static unsigned char last_args[4096];
static char last_fn[256];
static float clock_ms = 0;

typedef struct { unsigned char *image; size_t size; } module_t;
typedef struct { module_t *mod; char name[256]; } function_t;
typedef struct { float t; } event_t;

/* test controls and getters */
void fake_set_devices(int n) { ndev = n; }
void fake_set_arch(const char *a) { strncpy(arch, a, sizeof(arch) - 1); }
void fake_set_capacity(size_t c) { capacity = c; }
void fake_fail_next_launch(int rc) { fail_launch = rc; }
int fake_launches(void) { return launches; }
int fake_live_allocs(void) { return live; }
size_t fake_used(void) { return used; }
int fake_syncs(void) { return syncs; }
int fake_unloads(void) { return unloads; }
int fake_last_memcpy_kind(void) { return last_kind; }
const char *fake_last_function(void) { return last_fn; }
void fake_last_launch(unsigned *grid, unsigned *block, unsigned *shared) {
  memcpy(grid, last_grid, sizeof(last_grid)); memcpy(block, last_block, sizeof(last_block)); *shared = last_shared;
}
size_t fake_last_kernargs(unsigned char *out, size_t cap) { memcpy(out, last_args, last_args_size < cap ? last_args_size : cap); return last_args_size; }

/* the HIP API */
const char *hipGetErrorString(int e) {
  switch (e) {
    case OK: return "hipSuccess"; case INVALID_VALUE: return "hipErrorInvalidValue"; case OUT_OF_MEMORY: return "hipErrorOutOfMemory";
    case INVALID_DIRECTION: return "hipErrorInvalidMemcpyDirection"; case NO_DEVICE: return "hipErrorNoDevice";
    case INVALID_DEVICE: return "hipErrorInvalidDevice"; case INVALID_IMAGE: return "hipErrorInvalidImage";
    case INVALID_HANDLE: return "hipErrorInvalidHandle"; case NOT_FOUND: return "hipErrorNotFound";
    case 719: return "hipErrorLaunchFailure"; default: return "hipErrorUnknown";
  }
}
int hipInit(unsigned flags) { return flags ? INVALID_VALUE : (ndev ? OK : NO_DEVICE); }
int hipGetDeviceCount(int *n) { *n = ndev; return ndev ? OK : NO_DEVICE; }
int hipSetDevice(int d) { if (d < 0 || d >= ndev) return INVALID_DEVICE; current = d; return OK; }
int hipDeviceGetName(char *name, int len, int d) {
  if (d < 0 || d >= ndev) return INVALID_DEVICE;
  strncpy(name, "Fake Radeon", len); name[len - 1] = 0; return OK;
}
int hipGetDevicePropertiesR0600(void *props, int d) {
  if (d < 0 || d >= ndev) return INVALID_DEVICE;
  unsigned char *p = props;
  memset(p, 0, PROPS_SIZE);
  strcpy((char *)p, "Fake Radeon");
  uint64_t mem = capacity; int warp = 32;
  memcpy(p + 288, &mem, 8); memcpy(p + 308, &warp, 4);   /* plausible-looking fields around it */
  memset(p + ARCH_OFFSET - 4, 0x7f, 4);                    /* a nonzero field right before gcnArchName */
  strcpy((char *)p + ARCH_OFFSET, arch);
  return OK;
}
int hipMemGetInfo(size_t *free_, size_t *total) { *free_ = used < capacity ? capacity - used : 0; *total = capacity; return OK; }
int hipMalloc(void **ptr, size_t size) {
  if (used + size > capacity) return OUT_OF_MEMORY;
  size_t *p = malloc(size + 16);
  if (!p) return OUT_OF_MEMORY;
  p[0] = size; used += size; live++;
  *ptr = (unsigned char *)p + 16;
  return OK;
}
int hipFree(void *ptr) {
  if (!ptr) return OK;
  size_t *p = (size_t *)((unsigned char *)ptr - 16);
  used -= p[0]; live--; free(p); return OK;
}
int hipMemcpy(void *dst, const void *src, size_t n, int kind) {
  if (kind < 0 || kind > 4) return INVALID_DIRECTION;
  last_kind = kind; memcpy(dst, src, n); return OK;
}
int hipMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n) {
  if (dd < 0 || dd >= ndev || sd < 0 || sd >= ndev) return INVALID_DEVICE;
  memcpy(dst, src, n); return OK;
}
int hipModuleLoadData(void **mod, const void *image) {
  const unsigned char *b = image;
  if (!b || memcmp(b, "\x7f" "ELF", 4) != 0 || b[4] != 2) return INVALID_IMAGE;
  uint64_t shoff; uint16_t shentsize, shnum;   /* section headers end the file LLVM/lld write */
  memcpy(&shoff, b + 40, 8); memcpy(&shentsize, b + 58, 2); memcpy(&shnum, b + 60, 2);
  module_t *m = malloc(sizeof(module_t));
  m->size = shoff + (size_t)shentsize * shnum;
  m->image = malloc(m->size); memcpy(m->image, b, m->size);
  *mod = m; return OK;
}
int hipModuleGetFunction(void **fn, void *mod, const char *name) {
  module_t *m = mod;
  if (!m) return INVALID_HANDLE;
  size_t n = strlen(name);
  for (size_t i = 0; i + n <= m->size; i++)
    if (memcmp(m->image + i, name, n) == 0) {
      function_t *f = malloc(sizeof(function_t));
      f->mod = m; strncpy(f->name, name, sizeof(f->name) - 1); f->name[sizeof(f->name) - 1] = 0;
      *fn = f; return OK;
    }
  return NOT_FOUND;
}
int hipModuleUnload(void *mod) { module_t *m = mod; if (!m) return INVALID_HANDLE; free(m->image); free(m); unloads++; return OK; }
int hipModuleLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, void *stream, void **params, void **extra) {
  function_t *f = fn;
  if (!f) return INVALID_HANDLE;
  if (fail_launch) { int rc = fail_launch; fail_launch = 0; return rc; }
  if (params || !extra || extra[0] != (void *)1 || extra[2] != (void *)2 || extra[4] != (void *)3) return INVALID_VALUE;
  size_t n = *(size_t *)extra[3];
  if (n > sizeof(last_args)) return INVALID_VALUE;
  memcpy(last_args, extra[1], n); last_args_size = n;
  last_grid[0] = gx; last_grid[1] = gy; last_grid[2] = gz; last_block[0] = bx; last_block[1] = by; last_block[2] = bz;
  last_shared = shared; strcpy(last_fn, f->name);
  launches++; clock_ms += 1.25f;   /* every kernel "takes" 1.25 ms */
  return OK;
}
int hipEventCreate(void **ev) { event_t *e = malloc(sizeof(event_t)); e->t = -1; *ev = e; return OK; }
int hipEventRecord(void *ev, void *stream) { if (!ev) return INVALID_HANDLE; ((event_t *)ev)->t = clock_ms; return OK; }
int hipEventSynchronize(void *ev) { return ev ? OK : INVALID_HANDLE; }
int hipEventElapsedTime(float *ms, void *a, void *b) {
  if (!a || !b || ((event_t *)a)->t < 0 || ((event_t *)b)->t < 0) return INVALID_HANDLE;
  *ms = ((event_t *)b)->t - ((event_t *)a)->t; return OK;
}
int hipEventDestroy(void *ev) { free(ev); return OK; }
int hipDeviceSynchronize(void) { syncs++; return OK; }
/* the default stream: done, unless a test holds it busy (the RCCL engine's deadline: tests/test_rccl.py) */
static int stream_busy = 0;
void fake_set_stream_busy(int b) { stream_busy = b; }
int hipStreamQuery(void *stream) { return stream_busy ? 600 : OK; }
