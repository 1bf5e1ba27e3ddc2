"""The Objective-C runtime through ctypes: classes, selectors and objc_msgSend with a ctypes signature per call shape.

UNTESTED ON APPLE HARDWARE (written on Linux against Apple's documented API). objc_msgSend is a trampoline that
must be called through a function pointer of the exact C signature of the method (arm64 has no varargs shortcut),
so `send(obj, "sel:", *args, restype=..., argtypes=[...])` builds (and caches) that prototype. Nothing here loads
on import: `lib()` opens libobjc, Foundation and Metal on first use, and only on macOS."""
from __future__ import annotations
import ctypes, functools, sys

_FRAMEWORKS = ("/usr/lib/libobjc.A.dylib", "/System/Library/Frameworks/Foundation.framework/Foundation",
               "/System/Library/Frameworks/Metal.framework/Metal")

class MTLSize(ctypes.Structure): _fields_ = [("width", ctypes.c_ulong), ("height", ctypes.c_ulong), ("depth", ctypes.c_ulong)]

@functools.lru_cache(None)
def lib() -> tuple[ctypes.CDLL, ctypes.CDLL]:
  """(libobjc, Metal). Raises OSError off macOS."""
  if sys.platform != "darwin": raise OSError("the Objective-C runtime and Metal exist only on macOS")
  objc, _, metal = (ctypes.CDLL(p) for p in _FRAMEWORKS)   # Foundation: NSString, NSError
  objc.objc_getClass.restype, objc.objc_getClass.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
  objc.sel_registerName.restype, objc.sel_registerName.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
  metal.MTLCreateSystemDefaultDevice.restype, metal.MTLCreateSystemDefaultDevice.argtypes = ctypes.c_void_p, []
  return objc, metal

def metal_missing() -> str | None:
  """Why no Metal device can be opened here (None: one can)."""
  try: _, metal = lib()
  except OSError as e: return f"the Metal framework could not be loaded ({e})"
  return None if metal.MTLCreateSystemDefaultDevice() else "MTLCreateSystemDefaultDevice returned nil (no Metal GPU)"

@functools.lru_cache(None)
def cls(name: str) -> int: return lib()[0].objc_getClass(name.encode())
@functools.lru_cache(None)
def sel(name: str) -> int: return lib()[0].sel_registerName(name.encode())
@functools.lru_cache(None)
def _proto(restype, argtypes: tuple):
  return ctypes.CFUNCTYPE(restype, ctypes.c_void_p, ctypes.c_void_p, *argtypes)(ctypes.cast(lib()[0].objc_msgSend, ctypes.c_void_p).value)

def send(obj, selector: str, *args, restype=ctypes.c_void_p, argtypes=None):
  """[obj selector:args...]. argtypes default: every argument an object/pointer (c_void_p)."""
  if not obj: raise RuntimeError(f"message {selector!r} sent to nil")
  at = tuple(argtypes) if argtypes is not None else (ctypes.c_void_p,) * len(args)
  return _proto(restype, at)(obj, sel(selector), *args)

def nsstring(s: str) -> int:
  return send(send(cls("NSString"), "alloc"), "initWithUTF8String:", s.encode(), argtypes=[ctypes.c_char_p])
def to_str(nsstr) -> str:
  return "" if not nsstr else (send(nsstr, "UTF8String", restype=ctypes.c_char_p) or b"").decode(errors="replace")
def release(obj) -> None:
  if obj: send(obj, "release", restype=None)

def error_text(err: ctypes.c_void_p) -> str:
  """The localizedDescription of an NSError** out-parameter, '' when none was set."""
  return to_str(send(err.value, "localizedDescription")) if err.value else ""
