"""Small shared utilities: environment switches, Context, and iterable helpers."""
from __future__ import annotations
import os, sys, re, functools, contextlib, operator, platform, tempfile, getpass
from typing import Any, Callable, Iterable, TypeVar, Sequence

T = TypeVar("T")

class EnvError(ValueError):
  """An environment variable holds something its knob can't use; the message names the variable and the expected form."""

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")

def parse_env(key: str, raw: str | None, default: Any) -> Any:
  """The value of environment variable `key` given its text `raw`, typed like `default`. Unset or blank means the
  default (a shell's `X=` is how people clear a knob); anything else must parse, or EnvError says what was expected."""
  if raw is None or not raw.strip(): return default
  text = raw.strip()
  word = text.lower()
  if isinstance(default, bool):
    if word in _TRUE + _FALSE: return word in _TRUE
    raise EnvError(f"environment variable {key}={raw!r}: expected 1/0, true/false, yes/no or on/off, or unset it")
  if isinstance(default, int):
    if word in _TRUE[1:] + _FALSE[1:]: return int(word in _TRUE)   # DEBUG=true reads as 1
    try: return int(text, 10)
    except ValueError: raise EnvError(f"environment variable {key}={raw!r}: expected a whole number (e.g. {key}=1), or unset it") from None
  if isinstance(default, float):
    try: return float(text)
    except ValueError: raise EnvError(f"environment variable {key}={raw!r}: expected a number (e.g. {key}=0.5), or unset it") from None
  return raw

def env_value(key: str, default: Any = 0) -> Any:
  """parse_env on the current environment, read afresh on every call."""
  return parse_env(key, os.environ.get(key), default)

@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
  """Read an environment variable once, typed like `default` (see parse_env)."""
  return env_value(key, default)

def prod(xs: Iterable[T], start: Any = 1) -> Any: return functools.reduce(operator.mul, xs, start)
def all_int(xs: Iterable) -> bool: return all(isinstance(x, int) for x in xs)
def dedup(xs: Iterable[T]) -> list[T]: return list(dict.fromkeys(xs))
def flatten(xss: Iterable[Iterable[T]]) -> list[T]: return [x for xs in xss for x in xs]
def argsort(xs: Sequence) -> list[int]: return sorted(range(len(xs)), key=xs.__getitem__)
def make_tuple(x, n: int) -> tuple: return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n
def all_same(xs: Sequence) -> bool: return all(x == xs[0] for x in xs)
def partition(xs: Iterable[T], pred: Callable[[T], Any]) -> tuple[list[T], list[T]]:
  """(items where pred holds, the rest), in order."""
  yes: list[T] = []
  no: list[T] = []
  for x in xs: (yes if pred(x) else no).append(x)
  return yes, no
def get_single_element(xs: Sequence[T]) -> T:
  if len(xs) != 1: raise ValueError(f"expected one element, got {len(xs)}: {list(xs)[:4]}")
  return xs[0]
def unwrap(x: T | None) -> T:
  if x is None: raise ValueError("unwrap of None")
  return x
def ceildiv(num: Any, amt: Any) -> Any: return -(-num // amt)
cdiv = ceildiv
def round_up(num: int, amt: int) -> int: return ceildiv(num, amt) * amt
def get_child(obj: Any, key: str) -> Any:
  """obj.a.0.b for key "a.0.b": attributes, with digits indexing lists and tuples (state-dict names to modules)."""
  for k in key.split("."):
    obj = obj[int(k)] if k.isnumeric() and isinstance(obj, (list, tuple)) else obj[k] if isinstance(obj, dict) else getattr(obj, k)
  return obj
def ansistrip(s: str) -> str: return re.sub(r"\x1b\[[0-9;]*m", "", s)
def temp(x: str, append_user: bool = False) -> str:
  """A path under the system temp dir (per user when asked, so two users don't collide on it)."""
  return os.path.join(tempfile.gettempdir(), f"{x}.{getpass.getuser()}" if append_user else x)
OSX, WIN = platform.system() == "Darwin", sys.platform == "win32"
def colored(s: str, color: str | None) -> str:
  codes = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
  return f"\x1b[{codes[color]}m{s}\x1b[0m" if color and os.isatty(1) else s

class ContextVar:
  """A process-wide setting read from the environment, overridable with `Context(...)`."""
  _registry: dict[str, ContextVar] = {}
  def __init__(self, key: str, default: Any):
    self.key, self.default = key, default
    self.value = env_value(key, default)
    ContextVar._registry[key] = self
  def __bool__(self): return bool(self.value)
  def __ge__(self, x): return self.value >= x
  def __gt__(self, x): return self.value > x
  def __le__(self, x): return self.value <= x
  def __lt__(self, x): return self.value < x
  def __eq__(self, x): return self.value == x
  def __hash__(self): return hash(self.key)
  def __int__(self): return int(self.value)
  def __repr__(self): return f"ContextVar({self.key}={self.value!r})"

class Context(contextlib.ContextDecorator):
  """`with Context(DEBUG=2, DEV="CPU"): ...` sets ContextVars (and unknown keys become new ones) for a block."""
  def __init__(self, **kwargs): self.kwargs = kwargs
  def __enter__(self):
    self.old = {}
    for k, v in self.kwargs.items():
      # `is None`, not `or`: a ContextVar whose value is falsy (DEV='', DEBUG=0) is still the registered one
      if (var := ContextVar._registry.get(k)) is None: var = ContextVar(k, type(v)())
      self.old[k] = var.value
      var.value = v
    for hook in _context_hooks: hook(self.kwargs)
  def __exit__(self, *exc):
    for k, v in self.old.items(): ContextVar._registry[k].value = v
    for hook in _context_hooks: hook(self.old)

# modules that cache derived state from a ContextVar (e.g. the default device) register a hook here
_context_hooks: list = []

DEBUG, BEAM, NOOPT, JIT = ContextVar("DEBUG", 0), ContextVar("BEAM", 0), ContextVar("NOOPT", 0), ContextVar("JIT", 1)
IGNORE_BEAM_CACHE, CCACHE, CACHEDB = ContextVar("IGNORE_BEAM_CACHE", 0), ContextVar("CCACHE", 1), ContextVar("CACHEDB", "")
TRACK_REWRITES, SPEC = ContextVar("TRACK_REWRITES", 0), ContextVar("SPEC", 0)
# tensor cores that take float32 operands (NVIDIA TF32: a 10-bit mantissa) only when asked, like torch's allow_tf32
ALLOW_TF32 = ContextVar("ALLOW_TF32", 0)
class DevVar(ContextVar):
  """DEV, with the first target's fields as strings ('' when unset), as tinygrad's tests read them (DEV.renderer == "LLVM")."""
  def _first(self):
    from tinycore.devspec import parse_dev
    specs = parse_dev(str(self.value or ""))
    return specs[0] if specs else None
  @property
  def device(self) -> str: return (t := self._first()) and t.device or ""
  @property
  def renderer(self) -> str: return (t := self._first()) and t.renderer or ""
  @property
  def arch(self) -> str: return (t := self._first()) and t.arch or ""
  @property
  def interface(self) -> str: return (t := self._first()) and t.iface or ""

DEV = DevVar("DEV", "")
IMAGE = ContextVar("IMAGE", 0)   # tinygrad's image-texture mode; tinycore has none, so always 0 (its tests skip on it)

def cache_dir() -> str:
  # the XDG spec: an empty or relative XDG_CACHE_HOME is ignored (else the cache would land in the current directory)
  base = xdg if os.path.isabs(xdg := os.getenv("XDG_CACHE_HOME", "")) else os.path.expanduser("~/.cache")
  return CACHEDB.value or os.path.join(base, "tinycore")

class GlobalCounters:
  """Totals since the last reset: ops (FLOPs), bytes moved, kernels run and device time."""
  global_ops: int = 0
  global_mem: int = 0
  time_sum_s: float = 0.0
  kernel_count: int = 0
  mem_used: int = 0
  mem_peak: int = 0   # the most mem_used has been since the last reset
  @staticmethod
  def reset():
    GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count = 0, 0, 0.0, 0
    GlobalCounters.mem_peak = GlobalCounters.mem_used

# names tinygrad's examples import from its helpers; each lives in its own module
from tinycore.timing import Timing, Profiling, time_to_str, tqdm, trange  # noqa: E402,F401
def fetch(*args: Any, **kwargs: Any) -> Any:
  from tinycore.fetch import fetch as _fetch   # urllib only when a script downloads something
  return _fetch(*args, **kwargs)
