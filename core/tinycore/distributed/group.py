"""The process group: init() reads the launcher's environment once; engines open lazily, one per device kind.

After init, an exception that escapes the program on one rank aborts the whole job (engine.abort) instead of leaving
the other ranks waiting in their next collective: the traceback is printed first. init(abort_on_error=False) keeps
Python's default."""
from __future__ import annotations
import os, sys
from tinycore.distributed.engine import CollectiveEngine, CollectiveError, choose
from tinycore.distributed.launcher import LaunchInfo, from_environment

DEFAULT_TIMEOUT_S = 300.0

class _Group:
  def __init__(self):
    self.launch: LaunchInfo | None = None
    self.timeout, self.want = DEFAULT_TIMEOUT_S, None
    self.engines: dict[str, CollectiveEngine] = {}   # by device kind ("CPU", "NV")

_group = _Group()

def _timeout_from(timeout: float | None) -> float:
  raw = timeout if timeout is not None else os.environ.get("TINYCORE_DIST_TIMEOUT", DEFAULT_TIMEOUT_S)
  try: t = float(raw)
  except (TypeError, ValueError): raise ValueError(f"the collective timeout must be a number of seconds, got {raw!r}") from None
  if not t > 0 or t == float("inf"): raise ValueError(f"the collective timeout must be a positive, finite number of seconds, got {raw!r}")
  return t

def init(device: str | None = None, timeout: float | None = None, engine: str | None = None, abort_on_error: bool = True) -> LaunchInfo:
  """Join the job the launcher started (mpirun, srun, torchrun; a plain `python` is rank 0 of 1). Opens the collective
  engine for `device` (default: the default device) now, so a missing engine is an error here, not in the first step.
  `timeout`: seconds any collective may wait for the other ranks (default TINYCORE_DIST_TIMEOUT or 300).
  `engine`: an engine by name ("mpi", "nccl"; default TINYCORE_COLLECTIVE, else the device's best)."""
  from tinycore.device import Device
  _group.launch, _group.timeout = from_environment(), _timeout_from(timeout)
  _group.want = engine or os.environ.get("TINYCORE_COLLECTIVE") or None
  get_engine(device or Device.DEFAULT)
  if abort_on_error: _install_abort_hook()
  return _group.launch

def is_initialized() -> bool: return _group.launch is not None

def _need_init() -> LaunchInfo:
  if _group.launch is None: raise CollectiveError("tinycore.distributed is not initialized: call distributed.init() first")
  return _group.launch

def get_engine(device: str) -> CollectiveEngine:
  """The engine that runs collectives on `device`'s tensors (opened on first use)."""
  launch = _need_init()
  key = device.split(":")[0].upper()
  if (eng := _group.engines.get(key)) is None: eng = _group.engines[key] = choose(device, launch, _group.timeout, _group.want)
  return eng

def rank() -> int:
  """This process's rank in the job, 0 <= rank < world_size()."""
  return next(iter(_group.engines.values())).rank if _group.engines else _need_init().rank

def world_size() -> int:
  return next(iter(_group.engines.values())).world_size if _group.engines else _need_init().world_size

def local_rank() -> int:
  """This process's index among the ranks of its host (which GPU it should use)."""
  return _need_init().local_rank

def shutdown() -> None:
  """Close every engine (the job may init again afterwards)."""
  for e in _group.engines.values(): e.close()
  _group.engines.clear()
  _group.launch = None

def _install_abort_hook() -> None:
  if getattr(sys.excepthook, "_tinycore_abort", False): return
  previous = sys.excepthook
  def hook(kind, value, tb):
    previous(kind, value, tb)
    if _group.engines and world_size() > 1:
      sys.stderr.write(f"tinycore.distributed: rank {rank()} failed with {kind.__name__}; aborting the job so the other ranks don't wait\n")
      sys.stderr.flush()
      next(iter(_group.engines.values())).abort(1)
  hook._tinycore_abort = True   # type: ignore[attr-defined]
  sys.excepthook = hook
