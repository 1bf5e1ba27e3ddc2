"""What VIZ=1 records: every graph_rewrite (the input, each applied rule with where it is defined, the output), grouped
by the kernel being compiled, and every compiled kernel (AST, optimizations, linearized program, source, binary size).
UOps are immutable, so records hold references and are turned into JSON only once, at the end (trace.py)."""
from __future__ import annotations
import os, sys
from typing import Any, Callable
from tinycore.uop import UOp

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../tinycore: locations are shown relative to it

def short_path(path: str) -> str:
  path = os.path.abspath(path)
  if path.startswith(_ROOT + os.sep): return path[len(_ROOT) + 1:]
  parent = os.path.dirname(_ROOT)   # sibling packages (tinycore_cpu, ...) in an editable checkout or site-packages
  return path[len(parent) + 1:] if path.startswith(parent + os.sep) else os.path.basename(path)

class RewriteRecord:
  __slots__ = ("matcher", "caller", "stage", "kernel", "top_down", "input", "output", "steps", "depth")
  def __init__(self, matcher: str, caller: str, stage: str, kernel: int | None, top_down: bool, sink: UOp, depth: int):
    self.matcher, self.caller, self.stage, self.kernel, self.top_down, self.input, self.depth = matcher, caller, stage, kernel, top_down, sink, depth
    self.output: UOp | None = None
    self.steps: list[tuple[str, UOp, UOp]] = []   # (rule location, node before, node after), in the order applied

class KernelRecord:
  __slots__ = ("name", "device", "ast", "opts", "program", "src", "size", "renderer", "error")
  def __init__(self, ast: UOp, device: str):
    self.ast, self.device = ast, device
    self.name, self.src, self.size, self.renderer, self.error = "", "", 0, "", ""
    self.opts: tuple | None = None   # None: not known (the GPU heuristic doesn't report them)
    self.program: list[UOp] = []

_STAGES = {"engine/schedule.py": "schedule", "engine/multi.py": "multi-device", "gradient.py": "autograd", "engine/realize.py": "realize"}

def _stage(path: str, frame, in_kernel: bool) -> str:
  """The pipeline stage a rewrite belongs to: a plugin's rules at a named stage, codegen while a kernel compiles, else
  the scheduler, autograd, ... by the module that called graph_rewrite."""
  if path == "stages.py" and isinstance(st := frame.f_locals.get("stage"), str): return f"device rules: {st}"
  if in_kernel: return "codegen"
  return _STAGES.get(path, path.rsplit(".", 1)[0])

def _matcher_name(pm: Any, frame) -> str:
  """The name the calling code knows the matcher by (`symbolic`, `pm_multi`), found in its locals or globals."""
  for scope in (frame.f_locals, frame.f_globals):
    for k, v in scope.items():
      if v is pm: return k
  return "PatternMatcher"

class Recorder:
  def __init__(self):
    self.rewrites: list[RewriteRecord] = []
    self.kernels: list[KernelRecord] = []
    self._open: list[RewriteRecord] = []   # graph_rewrites in progress (rules may call graph_rewrite themselves)
    self._kernel: int | None = None        # index of the kernel being compiled
    self._kernel_frame: Any = None
    self._names: dict[tuple, tuple[str, str, str]] = {}   # (matcher, code, line, in a kernel) -> (matcher's name, caller, stage)

  def graph_rewrite(self, run: Callable, sink: UOp, pm: Any, ctx: Any, top_down: bool, max_steps: int) -> UOp:
    frame = sys._getframe(2)   # 0: here, 1: rewrite.graph_rewrite, 2: its caller
    in_kernel = self._kernel is not None and self._compiling(frame)
    if (names := self._names.get(key := (pm, frame.f_code, frame.f_lineno, in_kernel))) is None:   # a call site seen before: no lookups
      code, path = frame.f_code, short_path(frame.f_code.co_filename)
      names = (_matcher_name(pm, frame), f"{path}:{frame.f_lineno} {code.co_name}", _stage(path, frame, in_kernel))
      if not names[2].startswith("device rules"): self._names[key] = names   # that one depends on the stage argument
    rec = RewriteRecord(names[0], names[1], names[2], self._kernel if in_kernel else None, top_down, sink, len(self._open))
    self.rewrites.append(rec)
    self._open.append(rec)
    try: rec.output = out = run(sink, pm, ctx, top_down, max_steps)
    finally: self._open.pop()
    return out

  def applied(self, where: str, before: UOp, after: Any) -> None:
    # rules called outside graph_rewrite (the gradient's, a program-stage pass) have no graph to show them in
    if self._open and isinstance(after, UOp): self._open[-1].steps.append((where, before, after))

  def begin_kernel(self, ast: UOp, device: str) -> None:
    self.kernels.append(KernelRecord(ast, device))
    self._kernel = len(self.kernels) - 1
    self._kernel_frame = sys._getframe(1)   # the compiling function: while it runs, rewrites belong to this kernel

  def _compiling(self, frame) -> bool:
    """Whether the kernel begin_kernel opened is still being compiled (its compiling function is on the stack). A
    compile that raised never reaches end_kernel: its record is closed here, marked, and later rewrites aren't its."""
    f = frame
    while f is not None:
      if f is self._kernel_frame: return True
      f = f.f_back
    k = self.kernels[self._kernel]
    if not k.name: k.name, k.error = "(compile failed)", "the compile raised an exception (see the script's output)"
    self._kernel = self._kernel_frame = None
    return False

  def note_opts(self, opts: tuple) -> None:
    if self._kernel is not None and self._compiling(sys._getframe(1)): self.kernels[self._kernel].opts = tuple(opts)

  def end_kernel(self, p: Any, dev: Any) -> None:
    """The compiled program `p` (a ProgramSpec) of the kernel begin_kernel opened, on device object `dev`."""
    if self._kernel is None: return
    k = self.kernels[self._kernel]
    self._kernel = self._kernel_frame = None
    k.name, k.src, k.program, k.renderer = p.name, p.src, list(p.uops or []), type(dev.renderer).__name__
    try: k.size = len(dev.compiler.compile_cached(p.src))   # the compile cache has it: a file read, not a compile
    except Exception as e: k.error = f"binary size unknown: {type(e).__name__}: {e}"
