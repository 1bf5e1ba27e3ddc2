"""Compiler base: source -> bytes, with a content-addressed on-disk cache that two processes can share."""
from __future__ import annotations
import os, warnings
from typing import Callable, TypeVar
from tinycore.helpers import CCACHE, cache_dir
from tinycore.digest import sha256
from tinycore.fileio import atomic_write, read_regular

T = TypeVar("T")

class CompileError(RuntimeError):
  """A compiler rejected the source. The message shows the numbered source and the compiler's log."""
  def __init__(self, msg: str, src: str | None = None, log: str | None = None):
    self.src, self.log = src, log
    parts = [msg]
    if src is not None:
      w = len(str(src.count("\n") + 1))
      parts.append("\n".join(f"{i:>{w}} | {line}" for i, line in enumerate(src.split("\n"), 1)))
    if log: parts.append(log.rstrip())
    super().__init__("\n".join(parts))

# entry = magic + sha256(compiler identity, source) + sha256(payload) + payload: a torn file, a foreign file, or another
# compiler's valid entry copied (or hash-collided) into this path is detected on read and recompiled
_MAGIC = b"TCC2"
_HEAD = len(_MAGIC) + 64
MAX_ENTRY_BYTES = 256 << 20   # a kernel binary is kilobytes; anything near this is not ours

class Compiler:
  """Subclasses implement `compile(src) -> bytes`. `cachekey` names the compiler and its flags (None: no caching);
  change it whenever the output for the same source would change."""
  compiles = 0   # real compilations in this process, all compilers (not cache hits): the compile progress counts them
  def __init__(self, cachekey: str | None = None): self.cachekey = cachekey
  def compile(self, src: str) -> bytes: raise NotImplementedError(f"{type(self).__name__} must implement compile")
  def disassemble(self, lib: bytes) -> str: return f"<{len(lib)} bytes>"

  def _identity(self, src: str) -> bytes:
    return sha256(f"{type(self).__module__}.{type(self).__qualname__}\0{self.cachekey}\0{src}".encode()).digest()

  def cache_path(self, src: str) -> str | None:
    if self.cachekey is None or not int(CCACHE.value): return None
    h = self._identity(src).hex()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.cachekey)[:64]
    return os.path.join(cache_dir(), "compile", safe, h[:2], h)

  def _read_entry(self, path: str, src: str) -> bytes | None:
    """The cached binary for `src`, or None when the entry is missing, not a regular file, torn, or another's."""
    try: blob = read_regular(path, MAX_ENTRY_BYTES)
    except FileNotFoundError: return None
    except OSError as e:
      warnings.warn(f"compile cache: ignoring entry {path}: {e}")
      return None
    if len(blob) >= _HEAD and blob[:4] == _MAGIC and blob[4:36] == self._identity(src) and sha256(blob[_HEAD:]).digest() == blob[36:_HEAD]:
      return blob[_HEAD:]
    warnings.warn(f"compile cache: entry {path} is corrupt or belongs to another compiler; recompiling")
    return None

  def _write_entry(self, path: str, src: str, lib: bytes) -> None:
    try:
      os.makedirs(os.path.dirname(path), exist_ok=True)
      atomic_write(path, _MAGIC + self._identity(src) + sha256(lib).digest() + lib)
    except OSError: pass   # a read-only or full cache disk must not stop compilation

  def _compile_counted(self, src: str) -> bytes:
    Compiler.compiles += 1
    return self.compile(src)

  def compile_cached(self, src: str) -> bytes:
    if (path := self.cache_path(src)) is None: return self._compile_counted(src)
    if (lib := self._read_entry(path, src)) is not None: return lib
    lib = self._compile_counted(src)
    self._write_entry(path, src, lib)
    return lib

  def load_cached(self, src: str, load: Callable[[bytes], T]) -> T:
    """load(compile_cached(src)), where `load` is the runtime's loader (dlopen, a JIT, a module load). A cached binary that
    fails to load (another compiler's output, a wrong ELF class, an undefined symbol) is dropped with a warning and
    compiled again, instead of failing every process that shares the cache."""
    if (path := self.cache_path(src)) is None: return load(self._compile_counted(src))
    if (lib := self._read_entry(path, src)) is not None:
      try: return load(lib)
      except Exception as e:
        warnings.warn(f"compile cache: entry {path} failed to load ({type(e).__name__}: {e}); recompiling")
      try: os.unlink(path)
      except OSError: pass
    lib = self._compile_counted(src)
    self._write_entry(path, src, lib)
    return load(lib)
