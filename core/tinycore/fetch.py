"""`fetch(url)`: download once into the cache and return the local path, as tinygrad's examples expect. What comes off
the network is data, never code: it is streamed to a temporary file and renamed into place only once complete (a
killed download leaves nothing half-written behind), with a size check against the server's Content-Length."""
from __future__ import annotations
import hashlib, os, pathlib, urllib.request, zlib
from typing import IO
from tinycore.fileio import atomic_write
from tinycore.helpers import cache_dir, getenv

_CHUNK = 1 << 20

def fetch(url: str, name: str | pathlib.Path | None = None, subdir: str | None = None, gunzip: bool = False,
          allow_caching: bool | None = None, headers: dict[str, str] | None = None, timeout: float = 60.0) -> pathlib.Path:
  """The local path of `url`'s contents, downloaded on first use into <cache>/downloads[/subdir]/<name or a hash of the
  url>. `name` that is a Path is used as the destination as is. `gunzip` stores the decompressed bytes.
  DISABLE_HTTP_CACHE=1 (or allow_caching=False) downloads again even when the file exists."""
  if not isinstance(url, str) or not url: raise ValueError(f"fetch needs a URL string, got {url!r}")
  scheme = url.split(":", 1)[0].lower()
  if scheme not in ("http", "https", "file"): raise ValueError(f"fetch only reads http, https and file URLs, got {url!r}")
  if allow_caching is None: allow_caching = not getenv("DISABLE_HTTP_CACHE")
  if isinstance(name, pathlib.Path): dest = name
  else:
    if name is not None and (os.sep in name or name in ("", ".", "..")): raise ValueError(f"fetch name must be a plain file name, got {name!r}")
    fname = name or hashlib.md5(url.encode() + (b"gunzip" if gunzip else b"")).hexdigest()
    dest = pathlib.Path(cache_dir()) / "downloads" / (subdir or "") / fname
  if dest.is_file() and allow_caching: return dest
  dest.parent.mkdir(parents=True, exist_ok=True)
  req = urllib.request.Request(url, headers={"User-Agent": "tinycore", **(headers or {})})
  with urllib.request.urlopen(req, timeout=timeout) as r:
    status = getattr(r, "status", 200)
    if status is not None and status >= 400: raise OSError(f"fetch {url}: HTTP status {status}")
    expected = r.headers.get("Content-Length") if hasattr(r, "headers") and r.headers else None
    atomic_write(dest, lambda f: _copy(r, f, gunzip, int(expected) if expected and expected.isdigit() else None, url))
  return dest

def _copy(src: IO[bytes], dst: IO[bytes], gunzip: bool, expected: int | None, url: str) -> None:
  got = 0
  dec = zlib.decompressobj(16 + zlib.MAX_WBITS) if gunzip else None
  while chunk := src.read(_CHUNK):
    got += len(chunk)
    dst.write(dec.decompress(chunk) if dec else chunk)
  if dec: dst.write(dec.flush())
  if expected is not None and got != expected: raise OSError(f"fetch {url}: got {got} bytes, the server announced {expected} (truncated download)")
