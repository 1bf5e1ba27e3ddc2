"""Files that must survive crashes and hostile neighbours: `atomic_write` replaces a file whole or not at all (a full
disk or a killed process leaves the old file), `read_regular` reads a cache entry without following it into a FIFO,
a device or a symlink, and without reading more than a bound."""
from __future__ import annotations
import os, stat, tempfile
from typing import Callable, IO

def atomic_write(path, data: bytes | str | Callable[[IO[bytes]], None], mode: int | None = None) -> None:
  """Write `data` (bytes, str as UTF-8, or a function that writes to the open binary file) to `path`: into a temporary
  file in the same directory (os.replace is atomic only within one filesystem), flushed and fsynced, then renamed over
  `path`. Any failure removes the temporary file and leaves an existing `path` as it was. `mode`: the new file's
  permissions (default: those of the file it replaces, else 0o644)."""
  path = os.fspath(path)
  if mode is None:
    try: mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError: mode = 0o644
  d = os.path.dirname(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
  try:
    with os.fdopen(fd, "wb") as f:
      if callable(data): data(f)
      else: f.write(data.encode() if isinstance(data, str) else data)
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)
  except BaseException:
    try: os.unlink(tmp)
    except OSError: pass
    raise
  # the rename itself is durable once the directory is synced (best effort: not every filesystem allows it)
  try:
    dfd = os.open(d, os.O_RDONLY)
    try: os.fsync(dfd)
    finally: os.close(dfd)
  except OSError: pass

class NotRegularFileError(OSError):
  """A path that should be a plain file is a FIFO, a device, a directory or a symlink, or is bigger than allowed."""

def read_regular(path, max_bytes: int) -> bytes:
  """The bytes of `path` if it is a regular file (not a symlink) of at most `max_bytes`; else NotRegularFileError.
  Opened non-blocking and without following a final symlink, so a FIFO or device planted in a cache can't hang or
  flood the reader. A missing file is FileNotFoundError as usual."""
  flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
  try: fd = os.open(os.fspath(path), flags)
  except OSError as e:
    if os.path.islink(path): raise NotRegularFileError(f"{os.fspath(path)}: is a symlink, expected a regular file") from None
    raise e
  try:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode): raise NotRegularFileError(f"{os.fspath(path)}: not a regular file (mode {stat.filemode(st.st_mode)})")
    if st.st_size > max_bytes: raise NotRegularFileError(f"{os.fspath(path)}: {st.st_size} bytes, more than the {max_bytes} allowed")
    chunks, left = [], st.st_size + 1   # one byte more than the stat said: a file growing under us is caught too
    while left > 0 and (b := os.read(fd, min(left, 1 << 24))):
      chunks.append(b); left -= len(b)
    data = b"".join(chunks)
    if len(data) > max_bytes: raise NotRegularFileError(f"{os.fspath(path)}: grew past the {max_bytes} bytes allowed while being read")
    return data
  finally: os.close(fd)
