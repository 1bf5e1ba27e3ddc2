"""A recording as JSON: built once from the recorder and profiler, written atomically, and validated field by field
when read back (a trace file is input like any other: `tinyctl viz FILE` must not trust it).

  {"format": "tinycore-viz", "version": 1,
   "uops":     [[op, dtype, arg, [src ids]], ...]        every UOp any record mentions, once, sources before users
   "rewrites": [{matcher, caller, stage, kernel, top_down, depth, input, output, steps: [[rule location, before, after], ...]}]
   "kernels":  [{name, device, renderer, ast, opts, program: [uop ids], src, size, error}]
   "profile":  [[name, device, kind, start_ns, dur_ns, flops, bytes, mem_used, mem_peak], ...]}"""
from __future__ import annotations
import json, os
from typing import Any
from tinycore.uop import UOp
from tinycore.fileio import atomic_write, read_regular
from tinycore.errors import TinycoreError

FORMAT, VERSION = "tinycore-viz", 1
MAX_TRACE_BYTES = 2 << 30
_ARG_CHARS = 160

class TraceError(TinycoreError, ValueError):
  """A trace file that is not a tinycore recording, or one whose contents are inconsistent; the message says where."""

def _arg_text(u: UOp) -> str:
  if u.arg is None: return ""
  try: s = repr(u.arg)
  except Exception: s = f"<{type(u.arg).__name__}>"
  return s if len(s) <= _ARG_CHARS else s[:_ARG_CHARS - 3] + "..."

class _UOpTable:
  """Ids for UOps (by identity: they are hash-consed) in an order where sources come first."""
  def __init__(self):
    self.ids: dict[int, int] = {}
    self.rows: list[list] = []
    self.dtypes: dict = {}   # str(dtype) once per dtype, not once per node
  def add(self, root: UOp) -> int:
    if (i := self.ids.get(id(root))) is not None: return i
    stack: list[tuple[UOp, bool]] = [(root, False)]
    while stack:
      u, ready = stack.pop()
      if id(u) in self.ids: continue
      if ready:
        self.ids[id(u)] = len(self.rows)
        if (dt := self.dtypes.get(u.dtype)) is None: dt = self.dtypes[u.dtype] = str(u.dtype)
        self.rows.append([u.op.name, dt, _arg_text(u), [self.ids[id(s)] for s in u.src]])
        continue
      stack.append((u, True))
      stack.extend((s, False) for s in reversed(u.src) if id(s) not in self.ids)
    return self.ids[id(root)]

def build_trace(rec: Any, prof: Any = None) -> dict:
  """The JSON-able recording of a Recorder (and a Profiler's events)."""
  t = _UOpTable()
  rewrites = []
  for r in rec.rewrites if rec is not None else []:
    inp = t.add(r.input)
    steps = [[where, t.add(b), t.add(a)] for where, b, a in r.steps]
    rewrites.append({"matcher": r.matcher, "caller": r.caller, "stage": r.stage, "kernel": r.kernel, "top_down": r.top_down, "depth": r.depth,
                     "input": inp, "output": t.add(r.output) if r.output is not None else inp, "steps": steps})
  kernels = []
  for k in rec.kernels if rec is not None else []:
    kernels.append({"name": k.name, "device": k.device, "renderer": k.renderer, "ast": t.add(k.ast),
                    "opts": None if k.opts is None else [str(o) for o in k.opts], "program": [t.add(u) for u in k.program],
                    "src": k.src, "size": k.size, "error": k.error})
  profile = [list(e) for e in prof.events] if prof is not None else []
  return {"format": FORMAT, "version": VERSION, "uops": t.rows, "rewrites": rewrites, "kernels": kernels, "profile": profile}

def save_trace(trace: dict, path: str) -> None:
  atomic_write(path, json.dumps(trace, separators=(",", ":")))

def load_trace(path: str) -> dict:
  """Read and validate a recording; TraceError (naming the file and the bad field) for anything else."""
  try: data = read_regular(os.path.realpath(path), MAX_TRACE_BYTES)   # the user named this file: a symlink they gave is followed
  except FileNotFoundError: raise TraceError(f"{path}: no such file") from None
  except OSError as e: raise TraceError(f"{path}: can't read it: {e}") from None
  try: trace = json.loads(data)
  except (ValueError, RecursionError) as e: raise TraceError(f"{path}: not JSON ({e})") from None
  validate_trace(trace, path)
  return trace

def _need(ok: bool, where: str, what: str) -> None:
  if not ok: raise TraceError(f"{where}: {what}")

def _is_int(x) -> bool: return isinstance(x, int) and not isinstance(x, bool)
def _is_num(x) -> bool: return (isinstance(x, (int, float))) and not isinstance(x, bool)

def validate_trace(t: Any, name: str = "trace") -> None:
  """Check every field the server and the page read: types, and ids that point at existing (earlier) UOps."""
  _need(isinstance(t, dict) and t.get("format") == FORMAT, name, f"not a tinycore recording (expected \"format\": \"{FORMAT}\")")
  _need(t.get("version") == VERSION, name, f"recording version {t.get('version')!r}; this tinycore reads version {VERSION}")
  for key in ("uops", "rewrites", "kernels", "profile"): _need(isinstance(t.get(key), list), name, f"{key!r} must be a list")
  uops = t["uops"]
  for i, row in enumerate(uops):
    ok = isinstance(row, list) and len(row) == 4 and all(isinstance(x, str) for x in row[:3]) and isinstance(row[3], list)
    _need(ok, f"{name}: uops[{i}]", "expected [op, dtype, arg, [source ids]]")
    _need(all(_is_int(s) and 0 <= s < i for s in row[3]), f"{name}: uops[{i}]", "a source id that is not an earlier UOp")
  n = len(uops)
  def uid(x, where):
    _need(_is_int(x) and 0 <= x < n, where, f"UOp id {x!r} out of range (there are {n})")
  for i, r in enumerate(t["rewrites"]):
    w = f"{name}: rewrites[{i}]"
    _need(isinstance(r, dict), w, "expected an object")
    for key, typ in (("matcher", str), ("caller", str), ("stage", str), ("top_down", bool), ("steps", list)):
      _need(isinstance(r.get(key), typ), w, f"{key!r} must be {typ.__name__}")
    _need(r.get("kernel") is None or _is_int(r["kernel"]), w, "'kernel' must be a kernel index or null")
    _need(_is_int(r.get("depth", 0)), w, "'depth' must be an integer")
    uid(r.get("input"), w + ".input"); uid(r.get("output"), w + ".output")
    for j, s in enumerate(r["steps"]):
      _need(isinstance(s, list) and len(s) == 3 and isinstance(s[0], str), f"{w}.steps[{j}]", "expected [rule location, before, after]")
      uid(s[1], f"{w}.steps[{j}]"); uid(s[2], f"{w}.steps[{j}]")
  for i, k in enumerate(t["kernels"]):
    w = f"{name}: kernels[{i}]"
    _need(isinstance(k, dict), w, "expected an object")
    for key in ("name", "device", "renderer", "src", "error"): _need(isinstance(k.get(key), str), w, f"{key!r} must be a string")
    _need(_is_int(k.get("size")), w, "'size' must be an integer")
    opts_ok = k.get("opts") is None or (isinstance(k["opts"], list) and all(isinstance(o, str) for o in k["opts"]))
    _need(opts_ok, w, "'opts' must be a list of strings or null")
    uid(k.get("ast"), w + ".ast")
    _need(isinstance(k.get("program"), list), w, "'program' must be a list")
    for u in k["program"]: uid(u, w + ".program")
  for i, e in enumerate(t["profile"]):
    ok = isinstance(e, list) and len(e) == 9 and all(isinstance(x, str) for x in e[:3]) and all(_is_num(x) for x in e[3:])
    _need(ok, f"{name}: profile[{i}]", "expected [name, device, kind, start_ns, dur_ns, flops, bytes, mem_used, mem_peak]")
