"""Shared fixtures: a fresh plugin registry, hand-made fake devices, and fake installed distributions."""
import os, sys, textwrap
import pytest
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests"))   # tests/_fakes.py

@pytest.fixture
def registry(monkeypatch):
  """A clean plugin registry and device table, with no selection variables from the outer environment."""
  from tinycore import plugins
  from tinycore.device import Device
  from tinycore.helpers import DEV
  for k in ("DEV", "TINYCORE_PLUGINS", "TINYCORE_DISABLE_PLUGINS", "TINYCORE_DISABLE_PLUGIN_AUTOLOAD"): monkeypatch.delenv(k, raising=False)
  old = DEV.value
  DEV.value = ""
  plugins.reset(); Device.reset()
  yield plugins.registry
  plugins.reset(); Device.reset()
  DEV.value = old

@pytest.fixture
def no_autoload(registry, monkeypatch):
  monkeypatch.setenv("TINYCORE_DISABLE_PLUGIN_AUTOLOAD", "1")
  return registry

@pytest.fixture
def fake_dist(tmp_path, monkeypatch):
  """fake_dist(dist, ep_name, module_source_or_dir): make `dist` look pip-installed with a tinycore.backends entry point.
  Writes a real *.dist-info on a sys.path entry, so importlib.metadata finds it exactly as it finds an installed one."""
  site = tmp_path / "site"
  site.mkdir(exist_ok=True)
  monkeypatch.syspath_prepend(str(site))
  def make(dist: str, ep_name: str, module: str, source: str | None = None, src_dir: str | None = None, version: str = "0.1.0"):
    di = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    di.mkdir()
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (di / "entry_points.txt").write_text(f"[tinycore.backends]\n{ep_name} = {module}\n")
    if source is not None: (site / f"{module.split(':')[0]}.py").write_text(textwrap.dedent(source))
    if src_dir is not None: monkeypatch.syspath_prepend(src_dir)
    return di
  yield make
  for m in [m for m in sys.modules if m.startswith(("tcfake_", "tinycore_broken", "tinycore_toy"))]: del sys.modules[m]

# A core-only install (the per-distribution CI entry for `tinycore`) has no backend: tests that compute are marked
# `needs_device` and run in every venv that has one; here they are skipped with that reason.
_has_device = None
def pytest_collection_modifyitems(config, items):
  global _has_device
  if not any(it.get_closest_marker("needs_device") for it in items): return
  if _has_device is None:
    try:
      from tinycore.device import Device
      Device.DEFAULT
      _has_device = True
    except Exception: _has_device = False
  if _has_device: return
  skip = pytest.mark.skip(reason="no backend plugin installed (core-only install)")
  for it in items:
    if it.get_closest_marker("needs_device"): it.add_marker(skip)
