"""A loading progress bar on stderr: tensors done/total, MiB done/total, MiB/s. It appears only once loading has taken
longer than `delay` seconds (a small model loads in silence) and only where someone watches: stderr is a terminal, or
PROGRESS=1 (PROGRESS=0: never). On a terminal it is a rich bar when rich is installed; otherwise (a log file, no rich)
a plain line at most every half second and one at the end."""
from __future__ import annotations
import os, sys, time
from typing import Any, TextIO

def _wanted(stream: TextIO) -> bool:
  env = os.environ.get("PROGRESS", "")
  if env in ("0", "1"): return env == "1"
  return bool(getattr(stream, "isatty", lambda: False)())

class LoadProgress:
  def __init__(self, tensors: int, nbytes: int, what: str = "loading", delay: float = 1.0, stream: TextIO | None = None):
    self.total, self.total_bytes, self.what, self.delay = tensors, nbytes, what, delay
    self.stream = stream if stream is not None else sys.stderr
    self.on = _wanted(self.stream)
    self.done = self.done_bytes = 0
    self.t0 = time.perf_counter()
    self.bar: Any = None      # the rich Progress once shown on a terminal
    self.task: Any = None
    self.last_line = -1.0     # when the plain line was last written (-1: never)

  def __enter__(self) -> LoadProgress: return self
  def __exit__(self, *exc) -> None: self.close()

  def _fields(self) -> str:
    dt = max(time.perf_counter() - self.t0, 1e-9)
    return (f"{self.done}/{self.total} tensors, {self.done_bytes / 2**20:.1f}/{self.total_bytes / 2**20:.1f} MiB, "
            f"{self.done_bytes / 2**20 / dt:.1f} MiB/s")

  def _show(self) -> None:
    if self.bar is not None or self.last_line >= 0: return
    if getattr(self.stream, "isatty", lambda: False)():
      try:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
      except ImportError: pass
      else:
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                            console=Console(file=self.stream), transient=False)
        self.bar.start()
        self.task = self.bar.add_task(self.what, total=self.total_bytes or 1, completed=self.done_bytes, info=self._fields())
        return
    self._line()

  def _line(self) -> None:
    self.last_line = time.perf_counter()
    print(f"{self.what}: {self._fields()}", file=self.stream, flush=True)

  def advance(self, nbytes: int, tensors: int = 1) -> None:
    self.done, self.done_bytes = self.done + tensors, self.done_bytes + nbytes
    if not self.on: return
    if self.bar is None and self.last_line < 0:
      if time.perf_counter() - self.t0 < self.delay: return
      self._show()
    if self.bar is not None: self.bar.update(self.task, completed=self.done_bytes, info=self._fields())
    elif time.perf_counter() - self.last_line >= 0.5: self._line()

  def close(self) -> None:
    if self.bar is not None:
      self.bar.update(self.task, completed=self.done_bytes, info=self._fields())
      self.bar.stop()
      self.bar = None
    elif self.last_line >= 0:
      self._line()
      self.last_line = -1.0
