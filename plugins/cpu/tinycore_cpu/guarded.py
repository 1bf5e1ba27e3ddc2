"""DEBUG_BUFFERS=1: host buffers fenced so that a kernel's out-of-bounds access is caught where it happens.

Each buffer gets its own mapping: [guard page][canary bytes | buffer | canary slack][guard page], the buffer's end
placed against the PROT_NONE guard (its start aligned to 8 bytes, the largest element, so up to 7 bytes of slack hold
canaries). A read or write past the end faults at once: a small signal handler (C, compiled once by the CPU compiler)
names the kernel, the buffer argument and how far past it the access went, then hands the fault on to the previous
handler (Python's faulthandler prints the Python stack). Writes that stay inside the mapping but outside the buffer
(into the slack, or into the 64 canary bytes in front) are found by checking the canaries after every kernel run;
that check raises BufferOverrun naming the kernel and the buffer argument. A stray access far enough to land in some
other buffer's guard page is reported against that buffer: a fault says where, not through which pointer."""
from __future__ import annotations
import bisect, ctypes, mmap, os
from tinycore_cpu.runtime import CPUBufferView

PAGE = mmap.PAGESIZE
FRONT = 64            # canary bytes in front of every buffer
ALIGN = 8             # the buffer's start keeps the alignment of any element type
CANARY = 0xA5

class BufferOverrun(RuntimeError):
  """A kernel wrote outside a buffer (DEBUG_BUFFERS=1)."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
PROT_NONE, PROT_RW, MAP_PRIVATE, MAP_ANONYMOUS = 0, 3, 0x02, 0x20
MAP_FAILED = ctypes.c_void_p(-1).value

def enabled() -> bool: return os.getenv("DEBUG_BUFFERS", "0") not in ("", "0")

# the fault reporter: async-signal-safe (write(2) only), a fixed table of guard ranges filled from Python
_REPORTER = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#define MAXG 65536
#define MAXARGS 256
static uintptr_t g_lo[MAXG], g_hi[MAXG], g_buf[MAXG], g_size[MAXG];
static const char* g_kernel = 0;
static uintptr_t g_args[MAXARGS]; static int g_nargs = 0;
static struct sigaction g_old;
int tc_guard_add(uintptr_t lo, uintptr_t hi, uintptr_t buf, uintptr_t size) {
  for (int i = 0; i < MAXG; i++) if (!g_hi[i]) { g_lo[i] = lo; g_buf[i] = buf; g_size[i] = size; g_hi[i] = hi; return 1; }
  return 0; }
void tc_guard_del(uintptr_t lo) { for (int i = 0; i < MAXG; i++) if (g_hi[i] && g_lo[i] == lo) g_hi[i] = 0; }
void tc_guard_call(const char* kernel, int n, const uintptr_t* args) {
  g_nargs = 0; g_kernel = kernel;
  for (int i = 0; i < n && i < MAXARGS; i++) g_args[i] = args[i];
  g_nargs = n < MAXARGS ? n : MAXARGS; }
static void put(const char* s) { ssize_t r = write(2, s, strlen(s)); (void)r; }
static void putu(uintptr_t v) { char b[24]; int i = 23; b[i] = 0; do { b[--i] = '0' + v % 10; v /= 10; } while (v); put(b + i); }
static void on_fault(int sig, siginfo_t* si, void* uc) {
  uintptr_t a = (uintptr_t)si->si_addr;
  for (int i = 0; i < MAXG; i++) {
    if (!g_hi[i] || a < g_lo[i] || a >= g_hi[i]) continue;
    uintptr_t buf = g_buf[i], end = buf + g_size[i];
    put("DEBUG_BUFFERS: kernel "); put(g_kernel ? g_kernel : "(none running)");
#if defined(__x86_64__) && defined(REG_ERR)
    put((((ucontext_t*)uc)->uc_mcontext.gregs[REG_ERR] & 2) ? " wrote " : " read ");
#else
    put(" accessed ");
#endif
    put("outside ");
    int arg = -1;
    for (int j = 0; j < g_nargs; j++) if (g_args[j] >= buf && g_args[j] <= end) { arg = j; break; }
    if (arg >= 0) { put("buffer argument "); putu((uintptr_t)arg); put(" ("); } else put("a buffer (");
    putu(g_size[i]); put(" bytes): at byte offset ");
    if (a >= buf) putu(a - buf); else { put("-"); putu(buf - a); }
    put(" (guard page)\n");
    break;
  }
  sigaction(SIGSEGV, &g_old, 0);   /* the access faults again on return: the previous handler (or the default) takes it */
  (void)sig; (void)uc; }
void tc_guard_install(void) {
  struct sigaction sa; memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault; sa.sa_flags = SA_SIGINFO | SA_ONSTACK; sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_old); }
"""

_reporter = None
def _load_reporter():
  """The compiled fault reporter, installed once per process; None (faults still stop the process) without a compiler."""
  global _reporter
  if _reporter is None:
    try:
      from tinycore_cpu.compiler_c import CCompiler
      from tinycore_cpu.runtime import CPUProgram
      _reporter = CPUProgram("tc_guard_install", CCompiler().compile_cached(_REPORTER)).lib
      _reporter.tc_guard_add.argtypes = [ctypes.c_size_t] * 4
      _reporter.tc_guard_del.argtypes = [ctypes.c_size_t]
      _reporter.tc_guard_call.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
      _reporter.tc_guard_install()
    except Exception as e:   # a reporter is a nicety: the guard pages work without it
      import warnings
      warnings.warn(f"DEBUG_BUFFERS: no fault reporter ({type(e).__name__}: {e}); a guard-page hit kills the process unnamed")
      _reporter = False
  return _reporter or None

class _Block:
  __slots__ = ("base", "length", "ptr", "size", "body")
  def __init__(self, base, length, ptr, size, body): self.base, self.length, self.ptr, self.size, self.body = base, length, ptr, size, body

class GuardedAllocator(CPUBufferView):
  def __init__(self):
    super().__init__()
    self.blocks: dict[int, _Block] = {}
    self.starts: list[int] = []   # sorted buffer starts, to find the block a view points into
    self.reporter = _load_reporter()
    from tinycore_cpu import runtime
    runtime.GUARD = self

  def _alloc(self, size: int, options=None) -> int:
    body = -(-max(size, 1) // ALIGN) * ALIGN
    data = -(-(FRONT + body) // PAGE) * PAGE
    length = PAGE + data + PAGE
    base = _libc.mmap(None, length, PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if base is None or base == MAP_FAILED: raise MemoryError(f"CPU (DEBUG_BUFFERS): can't map {length} bytes for a {size}-byte buffer")
    lo_guard, hi_guard = base, base + PAGE + data
    if _libc.mprotect(lo_guard, PAGE, PROT_NONE) or _libc.mprotect(hi_guard, PAGE, PROT_NONE):
      _libc.munmap(base, length)
      raise OSError(ctypes.get_errno(), f"CPU (DEBUG_BUFFERS): mprotect failed: {os.strerror(ctypes.get_errno())}")
    ptr = hi_guard - body
    b = _Block(base, length, ptr, size, body)
    self._rearm(b)
    self.blocks[ptr] = b
    bisect.insort(self.starts, ptr)
    if self.reporter:
      self.reporter.tc_guard_add(hi_guard, hi_guard + PAGE, ptr, size)
      self.reporter.tc_guard_add(lo_guard, lo_guard + PAGE, ptr, size)
    return ptr

  def _rearm(self, b: _Block) -> None:
    ctypes.memset(b.ptr - FRONT, CANARY, FRONT)
    ctypes.memset(b.ptr + b.size, CANARY, b.body - b.size)

  def _free(self, opaque: int, size: int, options=None) -> None:
    b = self.blocks.pop(opaque)
    self.starts.pop(bisect.bisect_left(self.starts, opaque))
    if self.reporter:
      self.reporter.tc_guard_del(b.base + b.length - PAGE)   # the guard behind the buffer
      self.reporter.tc_guard_del(b.base)                     # and the one in front
    _libc.munmap(b.base, b.length)

  def block_of(self, p: int) -> _Block | None:
    i = bisect.bisect_right(self.starts, p) - 1
    if i < 0: return None
    b = self.blocks[self.starts[i]]
    return b if p <= b.ptr + b.size else None

  def damage(self, b: _Block) -> str | None:
    """The lowest overwritten canary byte, as an offset from the buffer's start; None when all are intact."""
    front = ctypes.string_at(b.ptr - FRONT, FRONT)
    if (bad := [i for i, c in enumerate(front) if c != CANARY]): return f"at byte offset {bad[0] - FRONT}"
    tail = ctypes.string_at(b.ptr + b.size, b.body - b.size)
    if (bad := [i for i, c in enumerate(tail) if c != CANARY]): return f"at byte offset {b.size + bad[0]}"
    return None

  def before_call(self, name: bytes, bufs: tuple) -> None:
    if self.reporter:
      self._name = name   # the handler keeps a pointer to it: alive until the next call
      self.reporter.tc_guard_call(name, len(bufs), (ctypes.c_size_t * len(bufs))(*bufs))

  def after_call(self, name: str, bufs: tuple) -> None:
    for i, p in enumerate(bufs):
      if (b := self.block_of(p)) is not None and (where := self.damage(b)) is not None:
        self._rearm(b)   # so the next kernel is judged on its own writes
        raise BufferOverrun(f"DEBUG_BUFFERS: kernel {name} wrote outside buffer argument {i} ({b.size} bytes): {where} (canary overwritten)")
