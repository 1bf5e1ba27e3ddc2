"""tinycore-amd loads through its entry point and, where its hardware or libraries are missing, says why."""
import pytest
from tinycore import plugins
from tinycore.device import Device, DeviceUnavailable
DEVICES = ["AMD"]

def test_plugin_loads(registry):
  recs = {r.name: r for r in plugins.plugin_status()}
  assert recs["amd"].status == "loaded" and recs["amd"].dist == "tinycore-amd" and recs["amd"].api == (1, 1)
  for d in DEVICES:
    assert registry.find_device(d)[1].name == "amd"
    assert [r for r in registry.renderers(d) if r.default], f"{d} has no default renderer"
    assert [i for i in registry.interfaces(d) if i.default], f"{d} has no default interface"

@pytest.mark.parametrize("dev", DEVICES)
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
  for dev in DEVICES:
    if default == dev: Device[dev]   # chosen, so it must open

def test_probe_and_smi_do_not_raise(registry):
  plugins.load_all()
  assert isinstance(plugins.call("tinycore_probe"), list)
  for dev in DEVICES: plugins.call("tinycore_smi", device=dev)

def test_interfaces_report_counts(registry):
  for dev in DEVICES:
    for i in registry.interfaces(dev):
      n = i.count()
      assert n >= 0 and (n > 0 or i.kind != "real" or i.unavailable_reason())
