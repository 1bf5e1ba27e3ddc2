"""Progress on stderr for work that can take a while: first-run kernel compilation, BEAM search, benchmarks.

Shown only to someone watching: when stderr is a terminal, or when PROGRESS=1 asks for it (PROGRESS=0 silences it).
A bar stays hidden until its work has run for `delay` seconds, so quick work prints nothing at all. rich draws the bars
on a terminal when it is installed (core does not depend on it); otherwise, and on a pipe or a log file, a plain text
line is written: rewritten in place on a terminal, one line per second elsewhere so logs stay readable."""
from __future__ import annotations
import os, sys, threading, time
from typing import IO, Any
from tinycore.helpers import ContextVar

# -1 (unset): show when stderr is a terminal; 1: always; 0: never
PROGRESS = ContextVar("PROGRESS", -1)
DEFAULT_DELAY = 1.0   # seconds of work before a bar appears

def _isatty(stream: IO) -> bool:
  try: return bool(stream.isatty())
  except (AttributeError, ValueError): return False   # no isatty, or a closed stream

def enabled(stream: IO | None = None) -> bool:
  """Whether progress may be drawn on `stream` (default: sys.stderr) right now."""
  if PROGRESS.value >= 1: return True
  return PROGRESS.value < 0 and _isatty(stream if stream is not None else sys.stderr)

class Bar:
  """One unit of long work: `with Bar("kernels", total=n) as bar: ... bar.advance(detail="3 compiled")`.
  Invisible unless progress is enabled and the work outlives `delay` seconds; then drawn until closed. total=None
  draws a count without a bar (work whose size isn't known in advance)."""
  def __init__(self, desc: str, total: int | None = None, delay: float | None = None, stream: IO | None = None):
    self.desc, self.total = desc, total
    self.delay = DEFAULT_DELAY if delay is None else delay
    self.done, self.detail = 0, ""
    self.stream = stream if stream is not None else sys.stderr
    self.started = time.perf_counter()
    self.shown, self.closed = False, False
    if not enabled(self.stream): return
    if self.delay <= 0: self._show(); return
    _watch(self)

  def __enter__(self) -> Bar: return self
  def __exit__(self, exc_type, *exc: object) -> None:
    if exc_type is not None: self.detail = (self.detail + "; " if self.detail else "") + "stopped"   # not "done"
    self.close()

  def advance(self, n: int = 1, detail: str | None = None) -> None:
    self.update(self.done + n, detail)

  def update(self, done: int, detail: str | None = None, total: int | None = None) -> None:
    with _lock:
      self.done = done
      if detail is not None: self.detail = detail
      if total is not None: self.total = total
      if self.shown: _display.draw(self)

  def _show(self) -> None:
    global _display
    with _lock:
      if self.closed or self.shown: return
      if _display is None or _display.stream is not self.stream: _display = _make_display(self.stream)
      self.shown = True
      _display.add(self)

  def close(self) -> None:
    global _display
    with _lock:
      if self.closed: return
      self.closed = True
      if self in _pending: _pending.remove(self)
      if self.shown and _display is not None and _display.remove(self): _display = None

  def line(self) -> str:
    """The bar as one plain line: 'kernels 12/40  3 compiled, 9 from cache  [4.1 s]'."""
    count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
    detail = f"  {self.detail}" if self.detail else ""
    return f"{self.desc} {count}{detail}  [{time.perf_counter() - self.started:.1f} s]"

class _PlainDisplay:
  """Text lines: the innermost visible bar, rewritten in place on a terminal, or a new line at most once a second."""
  def __init__(self, stream: IO):
    self.stream, self.tty, self.last = stream, _isatty(stream), 0.0
    self.bars: list[Bar] = []
  def add(self, bar: Bar) -> None:
    self.bars.append(bar)
    self._write(bar, force=True)
  def draw(self, bar: Bar) -> None:
    if bar is self.bars[-1]: self._write(bar, force=False)
  def remove(self, bar: Bar) -> bool:
    self._write(bar, force=True, final=True)
    self.bars.remove(bar)
    return not self.bars
  def _write(self, bar: Bar, force: bool, final: bool = False) -> None:
    now = time.perf_counter()
    if not force and now - self.last < (0.1 if self.tty else 1.0): return
    self.last = now
    try:
      if self.tty: self.stream.write("\r\x1b[2K" + bar.line() + ("\n" if final else ""))
      else: self.stream.write(bar.line() + (" done" if final and not bar.detail.endswith("stopped") else "") + "\n")
      self.stream.flush()
    except (OSError, ValueError): pass   # a closed or broken stderr must not break the work being reported

class _RichDisplay:
  """rich's Progress, one task per visible bar (BEAM inside compilation shows as a second line), refreshed by rich's thread."""
  def __init__(self, stream: IO):
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, TextColumn, BarColumn, MofNCompleteColumn
    from rich.text import Text
    class Elapsed(ProgressColumn):   # since the work began, not since the bar appeared `delay` seconds later
      def render(self, task): return Text(f"{time.perf_counter() - task.fields['started']:.1f} s", style="progress.elapsed")
    self.stream = stream
    self.tasks: dict[Bar, Any] = {}
    # redirect_*=False: the user's own prints during the work go where they always go
    self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
                             Elapsed(), console=Console(file=stream), redirect_stdout=False, redirect_stderr=False)
    self.progress.start()
  def add(self, bar: Bar) -> None:
    self.tasks[bar] = self.progress.add_task(bar.desc, total=bar.total, completed=bar.done, detail=bar.detail, started=bar.started)
  def draw(self, bar: Bar) -> None:
    self.progress.update(self.tasks[bar], completed=bar.done, total=bar.total, detail=bar.detail)
  def remove(self, bar: Bar) -> bool:
    self.draw(bar)
    self.progress.refresh()   # its final state, even when it lived less than one of rich's refresh periods
    task = self.tasks.pop(bar)
    # an inner bar (one kernel's BEAM) goes away when done; the last one stays on screen as the summary
    if self.tasks: self.progress.remove_task(task); return False
    self.progress.stop()
    return True

def _make_display(stream: IO) -> Any:
  if _isatty(stream):
    try: return _RichDisplay(stream)
    except ImportError: pass
  return _PlainDisplay(stream)

_lock = threading.RLock()
_display: Any = None

# One watcher thread shows bars whose delay has passed, not a timer per bar: a bar costs microseconds when the work is
# quick (most realizes), and a single long compile still shows its bar while it runs, not after it.
_wake = threading.Condition(_lock)
_pending: list[Bar] = []
_watcher: threading.Thread | None = None

def _after_fork() -> None:
  """A forked child has no watcher thread, and a lock the parent's watcher held at the fork would never be released."""
  global _lock, _wake, _watcher, _display
  _lock = threading.RLock()
  _wake, _watcher, _display = threading.Condition(_lock), None, None
  _pending.clear()
if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=_after_fork)

def _watch(bar: Bar) -> None:
  global _watcher
  with _wake:
    _pending.append(bar)
    if _watcher is None or not _watcher.is_alive():   # first use, or a forked child (threads don't survive fork)
      _watcher = threading.Thread(target=_watch_loop, name="tinycore-progress", daemon=True)
      _watcher.start()
    _wake.notify()

def _watch_loop() -> None:
  with _wake:
    while True:
      now = time.perf_counter()
      for bar in [b for b in _pending if now - b.started >= b.delay]:
        _pending.remove(bar)
        bar._show()
      _wake.wait(min((b.started + b.delay - now for b in _pending), default=None))
