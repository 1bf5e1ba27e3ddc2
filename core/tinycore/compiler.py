"""Compiler base: source -> bytes, with a content-addressed on-disk cache that two processes can share."""
from __future__ import annotations
import hashlib, os, tempfile
from tinycore.helpers import CCACHE, cache_dir

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

_MAGIC = b"TCC1"   # entry = magic + sha256(payload) + payload, so a torn or foreign file is detected on read

class Compiler:
  """Subclasses implement `compile(src) -> bytes`. `cachekey` names the compiler and its flags (None: no caching);
  change it whenever the output for the same source would change."""
  def __init__(self, cachekey: str | None = None): self.cachekey = cachekey
  def compile(self, src: str) -> bytes: raise NotImplementedError(f"{type(self).__name__} must implement compile")
  def disassemble(self, lib: bytes) -> str: return f"<{len(lib)} bytes>"

  def cache_path(self, src: str) -> str | None:
    if self.cachekey is None or not int(CCACHE.value): return None
    h = hashlib.sha256(f"{self.cachekey}\0{src}".encode()).hexdigest()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.cachekey)[:64]
    return os.path.join(cache_dir(), "compile", safe, h[:2], h)

  def compile_cached(self, src: str) -> bytes:
    if (path := self.cache_path(src)) is None: return self.compile(src)
    try:
      with open(path, "rb") as f: blob = f.read()
      if blob[:4] == _MAGIC and hashlib.sha256(blob[36:]).digest() == blob[4:36]: return blob[36:]
    except OSError: pass   # missing or unreadable: compile
    lib = self.compile(src)
    try:
      os.makedirs(os.path.dirname(path), exist_ok=True)
      fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
      try:
        with os.fdopen(fd, "wb") as f: f.write(_MAGIC + hashlib.sha256(lib).digest() + lib)
        os.replace(tmp, path)   # atomic: a reader sees the old entry, no entry, or the whole new one
      except BaseException:
        os.unlink(tmp)
        raise
    except OSError: pass   # a read-only or full cache disk must not stop compilation
    return lib
