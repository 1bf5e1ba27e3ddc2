"""Test setup for core: hypothesis profiles and the nightly marker.
HYPOTHESIS_PROFILE=ci (default: fast, a few thousand examples in all) or nightly (many more). Tests marked `nightly`
are deselected unless an -m expression names them (`-m nightly`); pytest.ini's own `-m "not slow"` does not."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))   # _mma_layout.py
from hypothesis import settings, HealthCheck

settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("nightly", max_examples=20000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.getenv("HYPOTHESIS_PROFILE", "ci"))

def pytest_configure(config):
  config.addinivalue_line("markers", "nightly: long property runs, deselected unless -m selects them")

def pytest_collection_modifyitems(config, items):
  if "nightly" in config.getoption("markexpr", ""): return   # pytest.ini's -m "not slow" alone must not select them
  keep, drop = [], []
  for it in items: (drop if it.get_closest_marker("nightly") else keep).append(it)
  if drop:
    config.hook.pytest_deselected(items=drop)
    items[:] = keep
