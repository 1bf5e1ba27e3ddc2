"""How tinyctl ends: its exit codes, and a user's mistake as one line (cause and fix) instead of a traceback.

The traceback is still there for whoever wants it: `tinyctl --debug ...` or DEBUG>=1 lets the exception through."""
from __future__ import annotations
import functools, os
from typing import Any, Callable, TypeVar
import typer

OK, FAILED, USAGE, INTERNAL, INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = {OK: "success", FAILED: "a device that was asked for (or, with none asked for, every device) failed its check",
              USAGE: "usage error: a bad option, an unknown or malformed DEV, an environment variable that doesn't parse",
              INTERNAL: "an unexpected error inside tinyctl or a plugin (rerun with --debug and report it)", INTERRUPTED: "interrupted (Ctrl-C)"}
# "\b": click keeps the next paragraph's line breaks (one exit status a line)
EXIT_HELP = "Exit status:\n\n\b\n" + "\n".join(f"  {code:<4}{what}" for code, what in EXIT_CODES.items())

debug_flag = False   # set by `tinyctl --debug`

def debugging() -> bool:
  """--debug, or DEBUG>=1 in the environment (read leniently here: a DEBUG that doesn't parse is reported elsewhere)."""
  try: return debug_flag or int(os.environ.get("DEBUG", "0").strip() or 0) >= 1
  except ValueError: return debug_flag

# By class name, not isinstance: importing tinycore.errors here could re-run the very import that failed (DEBUG=lots).
_USAGE = {"DevSpecError", "EnvError", "UnknownDeviceError"}   # the user's own input: a DEV, an environment variable, a name
_TINYCORE = {"TinycoreError", "CorruptFileError"}             # tinycore's documented errors: their message is the whole story

def _kinds(e: BaseException) -> set[str]: return {c.__name__ for c in type(e).__mro__}

def one_line(e: BaseException) -> str:
  """The message as one line: its first line, which is where tinycore's errors put the cause and the fix."""
  lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
  return lines[0] if lines else type(e).__name__

def report(e: Exception) -> int:
  """Print `error: <cause and fix>` for `e` and return the exit status it earns (USAGE, FAILED or INTERNAL)."""
  if (kinds := _kinds(e)) & (_USAGE | _TINYCORE):
    typer.echo(f"error: {one_line(e)}", err=True)
    return USAGE if kinds & _USAGE else FAILED
  typer.echo(f"error: {type(e).__name__}: {one_line(e)} (unexpected: `tinyctl --debug ...` shows where)", err=True)
  return INTERNAL

F = TypeVar("F", bound=Callable[..., Any])
def user_errors(fn: F) -> F:
  """Wrap a command so that an exception ends it through `report` (the traceback only when debugging); typer's own
  exits and usage errors pass through untouched."""
  @functools.wraps(fn)
  def run(*args: Any, **kwargs: Any) -> Any:
    try: return fn(*args, **kwargs)
    except KeyboardInterrupt: raise typer.Exit(INTERRUPTED) from None
    except Exception as e:
      # typer's exits and usage errors (click's, or typer's vendored copy of click, as installed): typer handles them
      if debugging() or type(e).__module__.split(".")[0] in ("typer", "click"): raise
      raise typer.Exit(report(e)) from None
  return run  # type: ignore[return-value]
