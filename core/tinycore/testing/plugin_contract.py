"""The plugin contract every backend distribution must keep, as reusable tests: a plugin's test module does
`globals().update(contract_tests("amd", "tinycore-amd", ["AMD"]))` and gets them, with the `registry` fixture they
use (a clean plugin registry), so they run from any directory with only tinycore, the plugin and pytest installed.
A PluginWarning (a hook that raised, a malformed answer) fails them."""
from __future__ import annotations
import warnings
import pytest
from tinycore import plugins
from tinycore.device import Device, DeviceUnavailable

def contract_tests(name: str, dist: str, devices: list[str]) -> dict:
  @pytest.fixture
  def registry(monkeypatch):
    from tinycore.helpers import DEV
    for k in ("DEV", "TINYCORE_PLUGINS", "TINYCORE_DISABLE_PLUGINS", "TINYCORE_DISABLE_PLUGIN_AUTOLOAD"): monkeypatch.delenv(k, raising=False)
    old, DEV.value = DEV.value, ""
    plugins.reset(); Device.reset()
    with warnings.catch_warnings():
      warnings.simplefilter("error", plugins.PluginWarning)
      yield plugins.registry
    plugins.reset(); Device.reset()
    DEV.value = old

  def test_plugin_loads(registry):
    recs = {r.name: r for r in plugins.plugin_status()}
    lo, hi = recs[name].api
    assert recs[name].status == "loaded" and recs[name].dist == dist and lo <= plugins.PLUGIN_API <= hi, recs[name]
    for d in devices:
      assert registry.find_device(d)[1].name == name
      assert [r for r in registry.renderers(d) if r.default], f"{d} has no default renderer"
      assert [i for i in registry.interfaces(d) if i.default], f"{d} has no default interface"

  @pytest.mark.parametrize("dev", devices)
  def test_open_is_clean(registry, dev):
    """Opening either works or raises DeviceUnavailable with a reason and no plugin stack."""
    try: d = Device[dev]
    except DeviceUnavailable as e:
      assert str(e).startswith(f"{dev} (DEV=") and "not available on this machine: " in str(e) and e.__suppress_context__
      assert str(e).split("not available on this machine: ")[1]
      return
    assert d.device == dev

  def test_never_a_default_when_unavailable(registry):
    try: default = Device.DEFAULT
    except RuntimeError: return   # nothing opens on this machine (e.g. core + this plugin only)
    for dev in devices:
      if default == dev: Device[dev]   # chosen, so it must open

  def test_probe_and_smi_do_not_raise(registry):
    plugins.load_all()
    # the plugin's own hooks, called directly: registry.call would turn an exception into a warning
    mod = registry.pm.get_plugin(name)
    assert mod is not None, f"plugin {name!r} is not registered"
    for hook, kw in [("tinycore_probe", {}), *[("tinycore_smi", {"device": d}) for d in devices]]:
      if (fn := getattr(mod, hook, None)) is None: continue
      res = fn(**{k: v for k, v in kw.items() if k in fn.__code__.co_varnames})
      assert res is None or (isinstance(res, list) and all(isinstance(x, dict) for x in res)), (hook, res)

  def test_interfaces_report_counts(registry):
    for dev in devices:
      for i in registry.interfaces(dev):
        n = i.count()
        assert n >= 0 and (n > 0 or i.kind != "real" or i.unavailable_reason())

  return {"registry": registry, **{f.__name__: f for f in (test_plugin_loads, test_open_is_clean, test_never_a_default_when_unavailable,
                                  test_probe_and_smi_do_not_raise, test_interfaces_report_counts)}}
