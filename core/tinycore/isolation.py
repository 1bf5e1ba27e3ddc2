"""Running code we don't own (plugin imports, hooks, factories, pipeline observers) so that whatever it raises stays
its own failure. `except Exception` is not enough: SystemExit, GeneratorExit, a KeyboardInterrupt raised by the code
itself, or any other BaseException subclass would otherwise end the user's program. The one thing let through is the
user's Ctrl-C, told apart by watching for a real SIGINT while the code runs."""
from __future__ import annotations
import signal, threading
from typing import Any, Callable

class PluginWarning(UserWarning):
  """A plugin was skipped or is broken, or one of its hooks failed; the message names it, its distribution and version, and why."""

class PluginError(RuntimeError):
  """Plugin code raised a BaseException that is not an Exception (SystemExit, GeneratorExit, ...); that is the __cause__."""

class SigintWatch:
  """`with SigintWatch() as w:` notes whether a real SIGINT arrives inside the block (the handler in place still runs);
  `w.reraise_if_users(e)` then re-raises a KeyboardInterrupt that came from one. Installing the watching handler costs
  two system calls, so one watch covers a whole batch of plugin calls."""
  __slots__ = ("seen", "known", "prev")
  def __enter__(self):
    self.seen, self.known, self.prev = False, True, None
    # Python runs signal handlers in the main thread only: elsewhere a KeyboardInterrupt is never the user's
    if threading.current_thread() is not threading.main_thread(): return self
    self.prev = signal.getsignal(signal.SIGINT)
    if self.prev is None: self.known = False   # a handler installed from C: Python can't chain to it
    else: signal.signal(signal.SIGINT, self._on_sigint)
    return self
  def _on_sigint(self, signum, frame):
    self.seen = True
    if callable(self.prev): self.prev(signum, frame)   # the default handler raises KeyboardInterrupt
    elif self.prev == signal.SIG_DFL: raise KeyboardInterrupt
  def __exit__(self, *exc):
    if self.prev is not None: signal.signal(signal.SIGINT, self.prev)
  def reraise_if_users(self, e: BaseException) -> None:
    if isinstance(e, KeyboardInterrupt) and (self.seen or not self.known): raise e

def run_isolated(fn: Callable, *args, **kwargs) -> tuple[Any, BaseException | None]:
  """(fn(*args, **kwargs), None), or (None, what it raised): anything is caught except the user's own Ctrl-C."""
  with SigintWatch() as watch:
    try: return fn(*args, **kwargs), None
    except BaseException as e:
      watch.reraise_if_users(e)
      return None, e

def call_plugin(fn: Callable, *args, **kwargs) -> Any:
  """fn(*args, **kwargs) where an Exception stays the caller's to handle, and any other BaseException from the plugin
  (SystemExit, GeneratorExit, a KeyboardInterrupt that is not the user's) arrives as PluginError instead."""
  res, err = run_isolated(fn, *args, **kwargs)
  if err is None: return res
  if isinstance(err, Exception): raise err
  raise PluginError(f"{getattr(fn, '__qualname__', fn)!s} raised {type(err).__name__}: {err}") from err

def cause_chain(e: BaseException | None) -> list[str]:
  """`e` and everything chained under it, one 'Type: message' line each."""
  out, seen = [], set()
  while e is not None and id(e) not in seen:
    seen.add(id(e)); out.append(f"{type(e).__name__}: {e}")
    e = e.__cause__ or e.__context__
  return out
