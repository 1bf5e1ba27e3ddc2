/* A fake librccl for tinycore-amd's tests: the NCCL-API calls tinycore.distributed.ccl_engine makes, for a world of
   one rank over the fake HIP's host memory. Collectives are copies (one rank's sum, max, gather and broadcast are its
   own data), calls are counted, a communicator must come from ncclCommInitRank. Build: cc -shared -fPIC -o libfake.so */
#include <stddef.h>
#include <string.h>

enum { OK = 0, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };
static int comms = 0, aborts = 0, destroys = 0, calls = 0, last_dtype = -1, last_op = -1;
static size_t last_count = 0;
static int the_comm;   /* its address is the one communicator handed out */
typedef struct { unsigned char internal[128]; } ncclUniqueId;   /* passed by value, as nccl.h/rccl.h declare it */

int fake_aborts(void) { return aborts; }
int fake_destroys(void) { return destroys; }
int fake_calls(void) { return calls; }
int fake_last_dtype(void) { return last_dtype; }
int fake_last_op(void) { return last_op; }
size_t fake_last_count(void) { return last_count; }

static size_t dsize(int t) {
  switch (t) { case 0: case 1: return 1; case 2: case 3: case 7: return 4; case 4: case 5: case 8: return 8; case 6: case 9: return 2; default: return 0; }
}
const char *ncclGetErrorString(int e) {
  switch (e) { case OK: return "no error"; case INVALID_ARGUMENT: return "invalid argument"; case INVALID_USAGE: return "invalid usage";
               default: return "unknown result code"; }
}
int ncclGetVersion(int *v) { *v = 22005; return OK; }
int ncclGetUniqueId(unsigned char *id) { for (int i = 0; i < 128; i++) id[i] = (unsigned char)(i * 7 + 3); return OK; }
int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank) {
  if (nranks != 1 || rank != 0 || id.internal[1] != 10 || id.internal[127] != (unsigned char)(127 * 7 + 3)) return INVALID_ARGUMENT;   /* one rank, with the id ncclGetUniqueId made */
  *comm = &the_comm; comms++; return OK;
}
int ncclCommDestroy(void *comm) { if (comm != &the_comm) return INVALID_ARGUMENT; destroys++; return OK; }
int ncclCommAbort(void *comm) { if (comm != &the_comm) return INVALID_ARGUMENT; aborts++; return OK; }
int ncclCommGetAsyncError(void *comm, int *err) { *err = comm == &the_comm ? OK : INVALID_ARGUMENT; return OK; }
static int copy(const void *s, void *r, size_t count, int t, void *comm) {
  calls++; last_dtype = t; last_count = count;
  if (comm != &the_comm || !dsize(t)) return INVALID_ARGUMENT;
  if (s != r) memmove(r, s, count * dsize(t));
  return OK;
}
int ncclAllReduce(const void *s, void *r, size_t n, int t, int op, void *comm, void *stream) { last_op = op; return op < 0 || op > 4 ? INVALID_ARGUMENT : copy(s, r, n, t, comm); }
int ncclAllGather(const void *s, void *r, size_t n, int t, void *comm, void *stream) { return copy(s, r, n, t, comm); }
int ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, void *comm, void *stream) { last_op = op; return copy(s, r, n, t, comm); }
int ncclBroadcast(const void *s, void *r, size_t n, int t, int root, void *comm, void *stream) { return root ? INVALID_ARGUMENT : copy(s, r, n, t, comm); }
int ncclSend(const void *b, size_t n, int t, int peer, void *comm, void *stream) { return INVALID_USAGE; }   /* no peer in a world of one */
int ncclRecv(void *b, size_t n, int t, int peer, void *comm, void *stream) { return INVALID_USAGE; }
int ncclGroupStart(void) { return OK; }
int ncclGroupEnd(void) { return OK; }
