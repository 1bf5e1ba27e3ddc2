"""sha256 and blake2b for cache keys and digests, from CPython's built-in modules where it has them: `hashlib` loads
OpenSSL's libcrypto on import, ~3.4 MiB of resident pages in every process that compiles a kernel, for digests the
built-ins compute alike."""
from __future__ import annotations
import importlib
from typing import Any

def _builtin(modules: tuple[str, ...], name: str) -> Any:
  for m in modules:
    try: return getattr(importlib.import_module(m), name)
    except (ImportError, AttributeError): pass
  return getattr(importlib.import_module("hashlib"), name)   # another interpreter: whatever hashlib has

sha256 = _builtin(("_sha2", "_sha256"), "sha256")   # _sha2 from CPython 3.12, _sha256 before
blake2b = _builtin(("_blake2",), "blake2b")
