"""Wall-clock helpers for scripts: `Timing` (time a block), `Profiling` (cProfile a block), `time_to_str`, and a small
`tqdm`/`trange` progress bar, under the names tinygrad's examples import from its helpers."""
from __future__ import annotations
import sys, time, math
from typing import Any, Callable, Iterable, Iterator

def time_to_str(t: float, w: int = 8) -> str:
  """Seconds in the unit that reads best: '  1.50s', ' 12.30ms', '  4.00us' (right-aligned to width w)."""
  if t >= 10: return f"{t:{w}.2f}s"
  if t >= 1e-2: return f"{t * 1e3:{w - 1}.2f}ms"
  return f"{t * 1e6:{w - 1}.2f}us"

class Timing:
  """`with Timing("load: "): ...` prints "load:  12.34 ms" when the block ends; `on_exit(ns)` adds a suffix."""
  def __init__(self, prefix: str = "", on_exit: Callable[[int], str] | None = None, enabled: bool = True):
    self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self) -> Timing:
    self.st = time.perf_counter_ns()
    return self
  def __exit__(self, *exc: object) -> None:
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et * 1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))

class Profiling:
  """`with Profiling(sort="cumtime", frac=0.2): ...` runs the block under cProfile and prints the top `frac` of
  functions (or writes the stats to `fn` when given)."""
  def __init__(self, enabled: bool = True, sort: str = "cumtime", frac: float = 0.2, fn: str | None = None, ts: int = 1):
    self.enabled, self.sort, self.frac, self.fn, self.ts = enabled, sort, frac, fn, ts
  def __enter__(self) -> Profiling:
    import cProfile
    self.pr = cProfile.Profile()
    if self.enabled: self.pr.enable()
    return self
  def __exit__(self, *exc: object) -> None:
    if not self.enabled: return
    self.pr.disable()
    if self.fn: self.pr.dump_stats(self.fn)
    import pstats
    stats = pstats.Stats(self.pr).strip_dirs().sort_stats(self.sort)
    stats.print_stats(self.frac)

class tqdm:
  """A minimal progress bar on stderr: iterate it (`for x in tqdm(xs, desc="train")`) or drive it by hand with
  `update(n)`; `disable=True` keeps it silent. Redraws at most every 0.1 s."""
  def __init__(self, iterable: Iterable | None = None, desc: str = "", disable: bool = False, unit: str = "it",
               unit_scale: bool = False, total: int | None = None, rate: int = 100):
    self.iterable, self.desc, self.disable, self.unit, self.unit_scale = iterable, desc, disable, unit, unit_scale
    if total is None and iterable is not None and hasattr(iterable, "__len__"): total = len(iterable)  # type: ignore[arg-type]
    self.total, self.n, self.st, self._last_draw = total, 0, time.perf_counter(), 0.0
    self.rate = rate
  def __iter__(self) -> Iterator:
    if self.iterable is None: raise TypeError("tqdm(...) without an iterable can't be iterated; call update(n) instead")
    try:
      for x in self.iterable:
        yield x
        self.update(1)
    finally: self.close()
  def __enter__(self) -> tqdm: return self
  def __exit__(self, *exc: object) -> None: self.close()
  def set_description(self, desc: str) -> None: self.desc = desc
  def update(self, n: int = 0, close: bool = False) -> None:
    self.n += n
    now = time.perf_counter()
    if not self.disable and (close or now - self._last_draw >= 0.1 or (self.total is not None and self.n >= self.total)):
      self._last_draw = now
      sys.stderr.write("\r" + self._line(now - self.st))
      sys.stderr.flush()
  def _line(self, el: float) -> str:
    speed = self.n / el if el > 0 else 0.0
    count = _human(self.n) if self.unit_scale else str(self.n)
    if self.total:
      pct = min(1.0, self.n / self.total)
      bar = "#" * int(pct * 20) + " " * (20 - int(pct * 20))
      tot = _human(self.total) if self.unit_scale else str(self.total)
      return f"{self.desc + ': ' if self.desc else ''}{pct * 100:3.0f}%|{bar}| {count}/{tot} [{el:.1f}s, {speed:.2f}{self.unit}/s]"
    return f"{self.desc + ': ' if self.desc else ''}{count} [{el:.1f}s, {speed:.2f}{self.unit}/s]"
  def close(self) -> None:
    if self.disable or getattr(self, "_closed", False): return
    self._closed = True
    self.update(0, close=True)
    sys.stderr.write("\n")

def trange(n: int, **kwargs: Any) -> tqdm: return tqdm(range(n), total=n, **kwargs)

def _human(x: float) -> str:
  if x < 1000: return str(x)
  e = min(int(math.log10(x) // 3), 4)
  return f"{x / 1000 ** e:.2f}{' kMGT'[e]}"
