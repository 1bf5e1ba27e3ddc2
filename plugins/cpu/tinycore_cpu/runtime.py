"""CPU runtime: aligned host memory, shared objects loaded with ctypes, and a persistent thread pool.

ctypes releases the GIL for the duration of a foreign call, so chunks of the outermost loop run truly in parallel."""
from __future__ import annotations
import ctypes, os, tempfile, threading, time, functools, itertools
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from tinycore.device import LRUAllocator
from tinycore.helpers import env_value, EnvError

# the process's global symbol scope, not libc's own handle: under the sanitizer lane malloc/free are ASan's
# interceptors, and only memory from them has the redzones that make an out-of-bounds kernel access a report
_libc = ctypes.CDLL(None)
_libc.posix_memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]

_malloc_trim = getattr(_libc, "malloc_trim", None)   # glibc only
if _malloc_trim is not None: _malloc_trim.argtypes = [ctypes.c_size_t]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_HUGEPAGE, HUGE = 14, 2 << 20

def _address(mv: memoryview) -> int:
  """A read-only buffer's address, without copying it (ctypes' from_buffer wants a writable one)."""
  return np.frombuffer(mv, np.uint8, mv.nbytes).ctypes.data if mv.nbytes else 0

class CPUAllocator(LRUAllocator):
  def __init__(self):
    super().__init__()
    from tinycore_cpu.sanitize import asan_loaded
    self.exact = asan_loaded()
  def _alloc(self, size: int, options=None) -> int:
    if self.exact:
      # ASan poisons from exactly `size` on: rounding the block up would hide an overrun into the padding
      p = ctypes.c_void_p()
      if _libc.posix_memalign(ctypes.byref(p), 64, max(size, 1)) != 0 or not p.value: raise MemoryError(f"CPU: can't allocate {size} bytes")
      return p.value
    # big buffers on transparent huge pages where the kernel allows them ("madvise" mode): one TLB entry per 2 MiB
    # instead of a page walk every 4 KiB of a stream (gemv 4096^2 ~25% faster; a matmul walking a 2048-wide operand
    # down its rows no longer misses the TLB every step)
    align = HUGE if size >= HUGE else 64
    # rounded to 64 bytes, not to the alignment: a 15.2 MiB embedding rounded to 16 MiB held 0.8 MiB more on huge pages
    # (posix_memalign, unlike aligned_alloc, takes a size that isn't a multiple of the alignment; the partial last 2 MiB
    # stays on small pages)
    n = -(-size // 64) * 64
    p = ctypes.c_void_p()
    if _libc.posix_memalign(ctypes.byref(p), align, n) != 0 or not p.value: raise MemoryError(f"CPU: can't allocate {size} bytes")
    if align == HUGE: _libc.madvise(p.value, n, MADV_HUGEPAGE)   # a hint: failure (no THP) changes nothing
    return p.value
  def _free(self, opaque: int, size: int, options=None) -> None: _libc.free(opaque)
  def free_cache(self) -> None:
    super().free_cache()
    # freed blocks under glibc's (adaptive, up to 32 MiB) mmap threshold stay in its heap: hand them back to the system
    if _malloc_trim is not None: _malloc_trim(0)
  def _as_buffer(self, opaque: int) -> memoryview: raise NotImplementedError  # replaced below with a sized view
  def _copyin(self, dest: int, src: memoryview) -> None:
    # a read-only source (a weight in a mapped file) by its address: bytes(src) made a whole transient copy of it
    ctypes.memmove(dest, (ctypes.c_char * src.nbytes).from_buffer(src) if not src.readonly else _address(src), src.nbytes)
  def _copyout(self, dest: memoryview, src: int) -> None: ctypes.memmove((ctypes.c_char * dest.nbytes).from_buffer(dest), src, dest.nbytes)
  def _offset(self, opaque: int, size: int, offset: int) -> int: return opaque + offset

class CPUBufferView(CPUAllocator):
  """Adds the zero-copy host view: the allocator must know each block's size for that."""
  def __init__(self):
    super().__init__()
    self.sizes: dict[int, int] = {}
  def alloc(self, size: int, options=None):
    p = super().alloc(size, options)
    self.sizes[p] = size
    return p
  # no _offset override: a view's host view is a slice of its base's (Buffer.as_buffer); recording the view's size here
  # overwrote its base's when both start at one address, and the base then read back short
  def _as_buffer(self, opaque: int) -> memoryview:
    return memoryview((ctypes.c_uint8 * self.sizes[opaque]).from_address(opaque)).cast("B")

def c_source(name: str) -> str:
  """The text of a C file shipped in this package. pkgutil asks the package's loader (a zip import too), as
  importlib.resources would, without importing zipfile/pathlib for it: ~0.6 MiB resident in an LLM run otherwise."""
  import pkgutil
  data = pkgutil.get_data("tinycore_cpu", name)
  if data is None: raise FileNotFoundError(f"tinycore_cpu: {name} is missing from the installed package (its loader can't read data files)")
  return data.decode()

def cpu_count() -> int:
  """Worker threads: CPU_COUNT when set (0 or unset: every core this process may use)."""
  if (n := env_value("CPU_COUNT", 0)) < 0:
    raise EnvError(f"environment variable CPU_COUNT={n}: expected a thread count >= 1, or 0/unset for all usable cores")
  return n or len(os.sched_getaffinity(0))

@functools.cache
def _pool() -> ThreadPoolExecutor: return ThreadPoolExecutor(max_workers=cpu_count(), thread_name_prefix="tinycore-cpu")

# DEBUG_BUFFERS=1: the GuardedAllocator (guarded.py) in use, which checks every kernel's buffers around each call
GUARD = None

_kept_count = itertools.count()
@functools.cache
def _kept_dir() -> str | None:
  from tinycore_cpu.sanitize import requested
  if not requested(): return None
  import atexit, shutil
  d = tempfile.mkdtemp(prefix="tinycore-sanitize-")
  atexit.register(shutil.rmtree, d, True)
  return d

# a kernel of at least this much work (FLOPs + bytes) is cut into CHUNKS_PER_THREAD pieces per thread, taken in turn
# by whichever thread is free: on a shared machine one core is often busy with another process, and with one fixed
# half each the kernel waited for the slow half (a 1024^3 matmul: ~2x the one-thread time at load 4)
DYNAMIC_WORK, CHUNKS_PER_THREAD = 1 << 24, 4

def _run_split(fxn, args: list, n: int, threads: int, work: int) -> None:
  chunks = min(n, threads * (CHUNKS_PER_THREAD if work >= DYNAMIC_WORK else 1))
  # pieces that differ by at most one iteration (graph_driver.c does the same): ceil-sized ones left a short last piece
  pieces, lock = iter(range(chunks)), threading.Lock()
  def worker():
    while True:
      with lock: i = next(pieces, None)
      if i is None: return
      fxn(*args, ctypes.c_int64(i * n // chunks), ctypes.c_int64((i + 1) * n // chunks))
  # the calling thread works too: one thread hand-off fewer per kernel (decode runs ~100 small ones)
  futs = [_pool().submit(worker) for _ in range(threads - 1)]
  worker()
  for f in futs: f.result()

class CPUProgram:
  def __init__(self, name: str, lib: bytes):
    self.name = name
    if (keep := _kept_dir()) is not None:
      # the sanitizer lane symbolizes reports from the file on disk: it stays, named after the kernel, until exit
      path = os.path.join(keep, f"{next(_kept_count)}-{''.join(c if c.isalnum() or c in '_-' else '_' for c in name)[:64]}.so")
      with open(path, "wb") as f: f.write(lib)
      self.lib = ctypes.CDLL(path)
    else:
      # dlopen needs a file; unlinked right after load
      with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f: f.write(lib); path = f.name
      try: self.lib = ctypes.CDLL(path)
      finally: os.unlink(path)
    self.fxn = getattr(self.lib, name)
    self.fxn.restype = None
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, work: int = 0):
    n = global_size[0] if global_size else 1
    # Variables and the thread split are 64-bit in every kernel's signature (a 32-bit kernel narrows them itself)
    args = [ctypes.c_void_p(b) for b in bufs] + [ctypes.c_int64(v) for v in vals]
    if GUARD is not None: GUARD.before_call(self.name.encode(), bufs)
    st = time.perf_counter()
    # waking a pool thread costs ~30-80 us here: below ~2 MB of traffic one core finishes sooner
    threads = min(cpu_count(), n) if work >= 1 << 21 else 1
    if threads <= 1: self.fxn(*args, ctypes.c_int64(0), ctypes.c_int64(n))
    else: _run_split(self.fxn, args, n, threads, work)
    if GUARD is not None: GUARD.after_call(self.name, bufs)
    if wait: return time.perf_counter() - st
