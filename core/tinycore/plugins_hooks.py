"""In-process observers of the pipeline (profilers, DEBUG tools): callables appended here are called with each schedule."""
schedule_observers: list = []
