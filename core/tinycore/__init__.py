"""tinycore: a small deep-learning framework built as a microkernel; devices come from plugins.

Names are resolved lazily (PEP 562) so `import tinycore` stays cheap: nothing heavy (numpy, plugins) loads
until a name that needs it is first used."""
import importlib

__version__ = "0.1.0"
_LAZY = {"Tensor": ("tinycore.tensor", "Tensor"), "dtypes": ("tinycore.dtype", "dtypes"), "Device": ("tinycore.device", "Device"),
         "Context": ("tinycore.helpers", "Context"), "GlobalCounters": ("tinycore.helpers", "GlobalCounters"),
         "getenv": ("tinycore.helpers", "getenv"), "Variable": ("tinycore.uop", "Variable"), "TinyJit": ("tinycore.engine.jit", "TinyJit"),
         "nn": ("tinycore.nn", None), "errors": ("tinycore.errors", None),
         # the exceptions a user catches (tinycore.errors documents each and what its message names)
         **{e: ("tinycore.errors", e) for e in ("TinycoreError", "DeviceUnavailable", "UnknownDeviceError", "MissingDependencyError",
                                                 "ResultUnavailableError", "DevSpecError", "EnvError", "CorruptFileError", "UnsupportedFileError")}}
__all__ = list(_LAZY)

def __getattr__(name: str):
  if name not in _LAZY: raise AttributeError(f"module 'tinycore' has no attribute {name!r}")
  mod, attr = _LAZY[name]
  val = importlib.import_module(mod) if attr is None else getattr(importlib.import_module(mod), attr)
  globals()[name] = val   # cache: later lookups skip __getattr__
  return val

def __dir__(): return sorted(list(globals()) + __all__)
