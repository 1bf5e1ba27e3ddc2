"""Discovery, isolation of broken plugins, and the environment switches, through real entry points."""
import os, subprocess, sys
import pytest
from tinycore import plugins
from tinycore.plugins import PluginWarning, PLUGIN_API
from _fakes import FakePlugin

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
GOOD = """
TINYCORE_PLUGIN_API = (1, 1)
def tinycore_devices(): return [{"name": "%s", "factory": lambda n, s: None, "priority": -1}]
"""

def test_register_by_hand(no_autoload):
  p = FakePlugin()
  r = plugins.register(p, name="fake")
  assert r.status == "loaded" and r.api == (1, 1)
  assert "FAKE" in no_autoload.devices()
  assert [x.name for x in no_autoload.renderers("FAKE")] == ["R1", "R2"]
  with pytest.raises(ValueError, match="already registered"): plugins.register(p, name="fake")

def test_listing_imports_nothing(registry, fake_dist):
  fake_dist("tinycore-lazy", "lazy", "tcfake_lazy", GOOD % "LAZY")
  recs = {r.name: r for r in plugins.discover()}
  assert recs["lazy"].status == "listed" and recs["lazy"].dist == "tinycore-lazy" and recs["lazy"].version == "0.1.0"
  assert "tcfake_lazy" not in sys.modules
  assert registry.find_device("LAZY") is not None   # first use imports it
  assert "tcfake_lazy" in sys.modules and recs["lazy"].status == "loaded"

def test_first_use_loads_only_the_plugin_named_like_the_device(registry, fake_dist, monkeypatch):
  fake_dist("tinycore-one", "one", "tcfake_one", GOOD % "ONE")
  fake_dist("tinycore-two", "two", "tcfake_two", GOOD % "TWO")
  monkeypatch.setenv("TINYCORE_PLUGINS", "one,two")
  assert registry.find_device("one") is not None
  assert "tcfake_one" in sys.modules and "tcfake_two" not in sys.modules
  assert registry.find_device("TWO") is not None

def _load_fixture(registry, fake_dist, monkeypatch, dirname, dist, ep):
  pkg = dist.replace("-", "_")
  fake_dist(dist, ep, f"{pkg}.plugin", src_dir=os.path.join(FIX, dirname))
  fake_dist("tinycore-okay", "okay", "tcfake_okay", GOOD % "OKAY")
  monkeypatch.setenv("TINYCORE_PLUGINS", f"{ep},okay")
  with pytest.warns(PluginWarning) as w: registry.load_all()
  recs = {r.name: r for r in plugins.plugin_status()}
  assert recs["okay"].status == "loaded" and registry.find_device("OKAY") is not None   # the others keep working
  msgs = [str(x.message) for x in w if issubclass(x.category, PluginWarning)]
  assert len(msgs) == 1 and dist in msgs[0] and "0.1.0" in msgs[0] and repr(ep) in msgs[0]
  return recs[ep], msgs[0]

def test_broken_import_is_isolated(registry, fake_dist, monkeypatch):
  rec, msg = _load_fixture(registry, fake_dist, monkeypatch, "broken_import", "tinycore-broken-import", "broken_import")
  assert rec.status == "broken" and "import of tinycore_broken_import.plugin failed" in rec.reason
  # the chained cause is kept: the ImportError and the missing module under it
  assert rec.cause_chain()[0] == "ImportError: broken_import needs libnosuch.so"
  assert "tinycore_no_such_native_lib" in rec.cause_chain()[1]
  assert "libnosuch.so" in msg and "tinycore_no_such_native_lib" in msg

def test_wrong_api_range_is_skipped(registry, fake_dist, monkeypatch):
  rec, msg = _load_fixture(registry, fake_dist, monkeypatch, "broken_api", "tinycore-broken-api", "broken_api")
  assert rec.status == "skipped" and f"supports plugin API 2..3 but this tinycore has PLUGIN_API {PLUGIN_API}" in msg
  assert registry.find_device("BROKENAPI") is None

def test_bad_hook_signature_is_broken(registry, fake_dist, monkeypatch):
  rec, msg = _load_fixture(registry, fake_dist, monkeypatch, "broken_hook", "tinycore-broken-hook", "broken_hook")
  assert rec.status == "broken" and "tinycore_renderers takes unknown parameter(s) flavour" in msg
  assert "expected tinycore_renderers(device)" in msg
  assert registry.find_device("BROKENHOOK") is None   # nothing of it was registered

@pytest.mark.parametrize("src,why", [
  ("def tinycore_devices(): return []", "does not declare TINYCORE_PLUGIN_API"),
  ("TINYCORE_PLUGIN_API = 1", "expected a (min, max) pair"),
  ("TINYCORE_PLUGIN_API = (1, 1)\ndef tinycore_device(): return []", "unknown hook tinycore_device (did you mean tinycore_devices?)"),
  ("TINYCORE_PLUGIN_API = (1, 1)\ndef tinycore_smi(*a): return []", "not take *args"),
])
def test_invalid_declarations(registry, fake_dist, monkeypatch, src, why):
  fake_dist("tinycore-bad", "bad", "tcfake_bad", src)
  monkeypatch.setenv("TINYCORE_PLUGINS", "bad")
  with pytest.warns(PluginWarning, match="tinycore-bad 0.1.0"): registry.load_all()
  assert registry.records["bad"].status == "broken" and why in registry.records["bad"].reason

def test_hook_that_raises_is_isolated(no_autoload):
  class Raises(FakePlugin):
    def tinycore_smi(self, device): raise OSError("sensor gone")
  plugins.register(Raises("A"), name="a"); plugins.register(FakePlugin("B"), name="b")
  with pytest.warns(PluginWarning, match="raised in tinycore_smi: OSError: sensor gone"):
    res = plugins.call("tinycore_smi", device="B")
  assert [r.name for r, _ in res] == ["b"]

@pytest.mark.parametrize("env,loaded", [
  ({"TINYCORE_PLUGINS": "one"}, {"one"}),
  ({"TINYCORE_PLUGINS": "tinycore-two"}, {"two"}),      # the distribution name works too
  ({"TINYCORE_PLUGINS": "one,two", "TINYCORE_DISABLE_PLUGINS": "one"}, {"two"}),
  ({"TINYCORE_PLUGINS": "one,two", "TINYCORE_DISABLE_PLUGIN_AUTOLOAD": "1"}, set()),
])
def test_env_switches(registry, fake_dist, monkeypatch, env, loaded):
  fake_dist("tinycore-one", "one", "tcfake_one", GOOD % "ONE")
  fake_dist("tinycore-two", "two", "tcfake_two", GOOD % "TWO")
  for k, v in env.items(): monkeypatch.setenv(k, v)
  recs = {r.name: r for r in registry.load_all() if r.name in ("one", "two")}
  assert {n for n, r in recs.items() if r.status == "loaded"} == loaded
  for n in {"one", "two"} - loaded:
    assert recs[n].status == "disabled" and f"tcfake_{n}" not in sys.modules
    assert any(k in recs[n].reason for k in ("TINYCORE_PLUGINS", "TINYCORE_DISABLE_PLUGINS", "TINYCORE_DISABLE_PLUGIN_AUTOLOAD"))

def test_deny_list_excludes_installed(registry, monkeypatch):
  monkeypatch.setenv("TINYCORE_DISABLE_PLUGINS", "nv,amd,metal,webgpu,toy")
  recs = {r.name: r.status for r in registry.load_all()}
  assert all(recs[n] == "disabled" for n in ("nv", "amd", "metal", "webgpu") if n in recs)
  assert "NV" not in registry.devices()

def test_import_tinycore_survives_broken_plugins(tmp_path):
  """A fresh interpreter with all three broken fixtures on its path: import works, CPU (if installed) still lists."""
  site = tmp_path / "site"; site.mkdir()
  paths = [str(site)]
  for d, dist, ep in [("broken_import", "tinycore-broken-import", "broken_import"), ("broken_api", "tinycore-broken-api", "broken_api"),
                      ("broken_hook", "tinycore-broken-hook", "broken_hook")]:
    di = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"; di.mkdir()
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    (di / "entry_points.txt").write_text(f"[tinycore.backends]\n{ep} = {dist.replace('-', '_')}.plugin\n")
    paths.append(os.path.join(FIX, d))
  code = "import tinycore, warnings; from tinycore import plugins\nfor r in plugins.plugin_status(): print(r.name, r.status)"
  env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])}
  env.pop("TINYCORE_PLUGINS", None); env.pop("TINYCORE_DISABLE_PLUGIN_AUTOLOAD", None)
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
  assert out.returncode == 0, out.stderr
  st = dict(line.split() for line in out.stdout.splitlines())
  assert st["broken_import"] == "broken" and st["broken_api"] == "skipped" and st["broken_hook"] == "broken"
  assert all(v == "loaded" for k, v in st.items() if not k.startswith("broken"))
  assert out.stderr.count("PluginWarning") == 3

def test_malformed_devices_answer_is_isolated(no_autoload):
  class Weird:
    TINYCORE_PLUGIN_API = (1, 1)
    def tinycore_devices(self): return [{"name": "WEIRD", "colour": "blue"}]
  plugins.register(Weird(), name="weird"); plugins.register(FakePlugin("OK"), name="ok")
  with pytest.warns(PluginWarning, match="'weird'.*broken: tinycore_devices returned"): devs = no_autoload.devices()
  assert "OK" in devs and "WEIRD" not in devs and no_autoload.records["weird"].status == "broken"
