"""In-process observers of the pipeline (profilers, DEBUG tools): callables appended here are called with each schedule.
An observer is someone else's code: one that fails is reported once and dropped, and the schedule runs on."""
import warnings
from tinycore.isolation import PluginWarning, run_isolated

schedule_observers: list = []

def notify_schedule(items: list) -> None:
  for obs in list(schedule_observers):
    _, err = run_isolated(obs, items)
    if err is None: continue
    if obs in schedule_observers: schedule_observers.remove(obs)
    warnings.warn(f"tinycore: schedule observer {getattr(obs, '__qualname__', obs)!s} raised {type(err).__name__}: {err}; it was removed", PluginWarning)
