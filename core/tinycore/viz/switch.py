"""The VIZ and PROFILE knobs. Off, nothing is recorded and the hot paths pay one module-level check each
(rewrite.viz_recorder in graph_rewrite, `profiler` in ExecItem.run). On (`VIZ=1`, `PROFILE=1`, or inside
`Context(VIZ=1)`), the recorder and profiler are created once per process and kept, so what a `with Context(VIZ=1)`
block recorded is still there at exit:

  VIZ=1      at exit the recording is written to a file (VIZ_FILE, or one in the temp dir). In an interactive terminal it
             is then served on 127.0.0.1:VIZ_PORT (a free port when unset) until Ctrl-C; otherwise (CI, pytest, a pipe)
             the command that serves it, `tinyctl viz FILE`, is printed instead, so a script never hangs.
  PROFILE=1  at exit a Chrome trace (Perfetto, chrome://tracing) of every kernel run and copy is written to PROFILE_FILE
             (or one in the temp dir); with VIZ=1 alone the profile is only part of the VIZ recording."""
from __future__ import annotations
import os, sys, atexit
from typing import Any
from tinycore.helpers import ContextVar, _context_hooks

VIZ, PROFILE = ContextVar("VIZ", 0), ContextVar("PROFILE", 0)
recorder: Any = None   # a viz.recorder.Recorder while VIZ is on
profiler: Any = None   # a viz.profile.Profiler while VIZ or PROFILE is on
_made: dict[str, Any] = {}   # what was ever switched on in this process: reported at exit

def apply() -> None:
  """Make recorder/profiler match the current VIZ and PROFILE values."""
  global recorder, profiler
  import tinycore.rewrite as rewrite
  if VIZ.value:
    if "recorder" not in _made:
      from tinycore.viz.recorder import Recorder
      _made["recorder"] = Recorder()
      _register_exit()
    recorder = _made["recorder"]
  else: recorder = None
  rewrite.viz_recorder = recorder
  if PROFILE.value: _made["chrome_trace"] = True   # asked for at any point (a Context(PROFILE=1) block included)
  if VIZ.value or PROFILE.value:
    if "profiler" not in _made:
      from tinycore.viz.profile import Profiler
      _made["profiler"] = Profiler()
      _register_exit()
    profiler = _made["profiler"]
  else: profiler = None

def forget() -> None:
  """Drop everything recorded so far (tests; a long session that wants a fresh recording)."""
  _made.clear()
  apply()

def _on_context(changed: dict) -> None:
  if "VIZ" in changed or "PROFILE" in changed: apply()

_exit_registered = False
def _register_exit() -> None:
  global _exit_registered
  if not _exit_registered: atexit.register(report_at_exit); _exit_registered = True

def _default_path(kind: str) -> str:
  import tempfile
  return os.path.join(tempfile.gettempdir(), f"tinycore-{kind}-{os.getpid()}.json")

def report_at_exit() -> None:
  """Write what was recorded; serve it when a person is at the terminal (see the module docstring)."""
  rec, prof = _made.get("recorder"), _made.get("profiler")
  if prof is not None and prof.events and _made.get("chrome_trace"):
    from tinycore.viz.profile import write_chrome_trace
    path = os.environ.get("PROFILE_FILE") or _default_path("profile")
    write_chrome_trace(prof, path)
    print(f"PROFILE: Chrome trace of {len(prof.events)} events written to {path} (open it in https://ui.perfetto.dev or chrome://tracing)",
          file=sys.stderr)
  if rec is None or not (rec.rewrites or rec.kernels or (prof is not None and prof.events)): return
  from tinycore.viz.trace import build_trace, save_trace
  path = os.environ.get("VIZ_FILE") or _default_path("viz")
  trace = build_trace(rec, prof)
  save_trace(trace, path)
  interactive = sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty() and not os.environ.get("VIZ_NOSERVE")
  if not interactive:
    print(f"VIZ: {len(rec.kernels)} kernels, {len(rec.rewrites)} rewrites recorded to {path}; view them with: tinyctl viz {path}",
          file=sys.stderr)
    return
  from tinycore.viz.server import serve
  serve(trace, port=int(os.environ.get("VIZ_PORT") or 0), source=path)

_context_hooks.append(_on_context)
if VIZ.value or PROFILE.value: apply()
