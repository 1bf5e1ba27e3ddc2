"""Entry points of installed distributions, read straight from their `*.dist-info` / `*.egg-info` folders on sys.path.

importlib.metadata does the same but imports email, zipfile, csv and friends (~4 MiB of resident memory, ~25 ms) in every
process that opens a device, to read a few INI lines per distribution. A sys.path entry that is not a folder (a zip
archive) and a meta-path finder with its own `find_distributions` are still asked through importlib.metadata."""
from __future__ import annotations
import importlib, os, re, sys
from dataclasses import dataclass
from typing import Any, Callable

@dataclass(frozen=True)
class Dist:
  name: str
  version: str

@dataclass(frozen=True)
class EntryPoint:
  """What plugins.py uses of importlib.metadata.EntryPoint: name, value ('module:attr [extras]'), group, dist, load()."""
  name: str
  value: str
  group: str
  dist: Dist | None = None
  def load(self) -> Any:
    m = _VALUE.match(self.value)
    if m is None: raise ValueError(f"entry point {self.name} = {self.value!r} is not 'module' or 'module:attr'")
    obj = importlib.import_module(m.group("module"))
    for a in (m.group("attr") or "").split("."):
      if a: obj = getattr(obj, a)
    return obj

_VALUE = re.compile(r"\s*(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?(\[.*\]\s*)?$")

def _headers(path: str) -> dict[str, str]:
  """Name and Version from a METADATA / PKG-INFO file: RFC 822 headers, read up to the first blank line."""
  out: dict[str, str] = {}
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      for line in f:
        if not line.strip(): break
        key, sep, val = line.partition(":")
        if sep and key in ("Name", "Version") and key not in out: out[key] = val.strip()
  except OSError: pass
  return out

def parse_entry_points(text: str, dist: Dist | None, groups: tuple[str, ...]) -> list[EntryPoint]:
  """entry_points.txt (INI: [group] headers, `name = value` lines, # and ; comments), only `groups`."""
  out, group = [], None
  for line in text.splitlines():
    s = line.strip()
    if not s or s[0] in "#;": continue
    if s.startswith("[") and s.endswith("]"): group = s[1:-1].strip(); continue
    name, sep, value = s.partition("=")
    if sep and group in groups: out.append(EntryPoint(name.strip(), value.strip(), group, dist))
  return out

def _from_folder(folder: str, groups: tuple[str, ...], skipped: Callable[[str], None]) -> list[EntryPoint]:
  try: names = sorted(os.listdir(folder or "."))
  except OSError: return []
  out = []
  for n in names:
    if not n.endswith((".dist-info", ".egg-info")): continue
    meta = os.path.join(folder, n)
    try:
      with open(os.path.join(meta, "entry_points.txt"), encoding="utf-8") as f: text = f.read()
    except FileNotFoundError: continue   # no entry points: most distributions
    except (OSError, UnicodeDecodeError) as e:   # one unreadable distribution must not hide the others
      skipped(f"{meta}: {type(e).__name__}: {e}")
      continue
    h = _headers(os.path.join(meta, "METADATA" if n.endswith(".dist-info") else "PKG-INFO"))
    stem = n.rsplit(".", 1)[0]
    dist = Dist(h.get("Name") or stem.split("-")[0], h.get("Version") or (stem.split("-")[1] if "-" in stem else ""))
    out += parse_entry_points(text, dist, groups)
  return out

def entry_points(groups: tuple[str, ...], skipped: Callable[[str], None]) -> list[Any]:
  """Every entry point in `groups`, in sys.path order (a distribution found twice is listed twice, as importlib.metadata
  does). A distribution whose entry points can't be read is left out and `skipped(where and why)` told."""
  out: list[Any] = []
  for p in sys.path:
    if os.path.isdir(p or "."): out += _from_folder(p, groups, skipped)
    elif os.path.exists(p): out += _importlib_eps(groups, skipped, path=[p])
  if any(_custom(f) for f in sys.meta_path): out += _importlib_eps(groups, skipped, finders_only=True)
  return out

def _custom(finder: Any) -> bool: return hasattr(finder, "find_distributions") and getattr(finder, "__name__", "") != "PathFinder"

def _importlib_eps(groups: tuple[str, ...], skipped: Callable[[str], None], path: list[str] | None = None, finders_only: bool = False) -> list[Any]:
  import importlib.metadata as md
  if finders_only:   # what a custom finder adds (PathFinder's answers were read above)
    dists = [d for f in sys.meta_path if _custom(f) for d in getattr(f, "find_distributions")(md.DistributionFinder.Context())]
  else: dists = list(md.distributions(path=path))
  out = []
  for d in dists:
    try: out += [ep for ep in d.entry_points if ep.group in groups]
    except Exception as e: skipped(f"{getattr(d, '_path', '?')}: {type(e).__name__}: {e}")
  return out
