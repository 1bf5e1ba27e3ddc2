"""Issue 18, plugins and environment: a plugin that raises anything (SystemExit, GeneratorExit, its own
KeyboardInterrupt, any BaseException) at import, in a hook or in its factory breaks only itself; a failing hook shows
in `tinyctl plugins` with its cause; a plugin is imported only when its device is used (device names and default
priorities come from `tinycore.devices` entry-point metadata); env knobs parse robustly."""
import json, os, signal, subprocess, sys, threading, time
import pytest
from typer.testing import CliRunner
from tinycore import plugins
from tinycore.device import Device
from tinycore.plugins import PluginWarning
from tinycore.helpers import ContextVar, EnvError, parse_env, env_value
from tinyctl.app import app

runner = CliRunner()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# a light module whose device opens a host-memory fake (tests/_fakes.py); {pre} runs at import, {hook} is extra code
MODULE = """
import time, signal
from tinycore.device import Compiled
from _fakes import FakeAllocator
TINYCORE_PLUGIN_API = (1, 1)
opened = []
{pre}
def _open(name, spec):
  opened.append(name)
  {open_body}
  return Compiled(name, FakeAllocator(), None, None)
def tinycore_devices(): return [{{"name": "{dev}", "factory": _open, "priority": {prio}}}]
{hook}
"""

def plugin(fake_dist, name, dev, prio, declare=True, pre="", hook="", open_body="pass"):
  """A fake installed distribution tcfake-NAME with plugin NAME (module tcfake_NAME) providing device DEV."""
  src = MODULE.format(pre=pre, hook=hook, dev=dev, prio=prio, open_body=open_body)
  di = fake_dist(f"tcfake-{name}", name, f"tcfake_{name}", src)
  if declare: (di / "entry_points.txt").write_text((di / "entry_points.txt").read_text() + f"\n[tinycore.devices]\n{dev} = {name}:{prio}\n")
  return di

@pytest.fixture
def only(registry, monkeypatch):
  """Restrict discovery to the named plugins (the real ones stay installed but disabled)."""
  def allow(*names): monkeypatch.setenv("TINYCORE_PLUGINS", ",".join(names))
  return allow

RAISERS = {"SystemExit": "raise SystemExit(3)", "GeneratorExit": "raise GeneratorExit('closed')",
           "KeyboardInterrupt": "raise KeyboardInterrupt('from the plugin, not the user')",
           "BaseException": "class Weird(BaseException): pass\nraise Weird('odd')"}

# ***** BaseException at import, in hooks, in factories *****

@pytest.mark.parametrize("kind", RAISERS)
def test_base_exception_at_import_breaks_only_that_plugin(registry, fake_dist, only, kind):
  plugin(fake_dist, "bad", "BAD", 50, pre=RAISERS[kind])
  plugin(fake_dist, "good", "GOOD", 5)
  only("bad", "good")
  with pytest.warns(PluginWarning, match=r"'bad' from tcfake-bad 0\.1\.0 broken: import of tcfake_bad failed"):
    assert Device.DEFAULT == "GOOD"   # BAD ranks first, fails to import, the next device is chosen
  rec = registry.records["bad"]
  first = "SystemExit: 3" if kind == "SystemExit" else ("Weird" if kind == "BaseException" else kind)
  assert rec.status == "broken" and rec.cause_chain()[0].startswith(first)
  assert registry.find_device("BAD") is None and registry.find_device("GOOD") is not None

@pytest.mark.parametrize("kind", RAISERS)
def test_base_exception_in_a_hook_is_isolated_and_shown(registry, fake_dist, only, kind):
  body = RAISERS[kind].replace("\n", "\n  ")
  plugin(fake_dist, "hooky", "HOOKY", 5, hook=f"def tinycore_smi(device):\n  {body}\ndef tinycore_interfaces(device):\n  {body}")
  only("hooky")
  registry.load("hooky")
  with pytest.warns(PluginWarning, match="raised in tinycore_smi"): assert plugins.call("tinycore_smi", device="HOOKY") == []
  with pytest.warns(PluginWarning, match="raised in tinycore_interfaces"): assert Device["HOOKY"].device == "HOOKY"   # falls back to HOST
  r = runner.invoke(app, ["plugins", "--json"])
  assert r.exit_code == 0, r.output
  rec = {p["name"]: p for p in json.loads(r.stdout)["plugins"]}["hooky"]
  assert rec["status"] == "hook-failed" and set(rec["hook_errors"]) == {"tinycore_smi", "tinycore_interfaces"}
  r = runner.invoke(app, ["plugins"])
  assert r.exit_code == 0 and "hook-failed" in r.stdout and "tinycore_smi failed:" in r.stdout and "tinycore_interfaces failed:" in r.stdout

def test_hook_failure_cause_is_shown_not_hidden(registry, fake_dist, only):
  plugin(fake_dist, "sensor", "SENSOR", 5, hook="def tinycore_smi(device):\n  raise OSError('sensor gone')")
  only("sensor")
  assert runner.invoke(app, ["smi", "--json"]).exit_code == 0
  r = runner.invoke(app, ["plugins"])
  assert r.exit_code == 0 and "hook-failed" in r.stdout and "tinycore_smi failed: OSError: sensor gone" in r.stdout
  assert "loaded" not in r.stdout.split("sensor", 1)[1].splitlines()[0]   # its row does not claim a clean load

def test_base_exception_in_factory_moves_default_on(registry, fake_dist, only):
  plugin(fake_dist, "quitter", "QUITTER", 50, open_body="raise SystemExit('no GPU, bye')")
  plugin(fake_dist, "good", "GOOD", 5)
  only("quitter", "good")
  assert Device.DEFAULT == "GOOD"
  with pytest.raises(RuntimeError, match=r"QUITTER .*failed to open it: PluginError: .*SystemExit: no GPU, bye"): Device["QUITTER"]

@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="a real SIGINT reaches only the main thread")
def test_the_users_ctrl_c_still_interrupts(registry, fake_dist, only):
  # a real SIGINT arriving while plugin code runs is the user's Ctrl-C: it must not be swallowed as a plugin failure
  plugin(fake_dist, "slowpoke", "SLOWPOKE", 5, pre="signal.raise_signal(signal.SIGINT)\ntime.sleep(0.5)")
  only("slowpoke")
  before = signal.signal(signal.SIGINT, signal.default_int_handler)   # what a plain `python script.py` has (a runner may ignore SIGINT)
  try:
    with pytest.raises(KeyboardInterrupt): registry.load("slowpoke")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # the watch put the user's handler back
  finally: signal.signal(signal.SIGINT, before)

# ***** imports only for devices used *****

def test_slow_plugin_is_not_imported_unless_its_device_is_used(registry, fake_dist, only):
  plugin(fake_dist, "slow", "SLOW", 1, pre="time.sleep(3)")
  plugin(fake_dist, "gone", "GONE", 9, open_body="from tinycore.device import DeviceUnavailable; raise DeviceUnavailable('no card')")
  plugin(fake_dist, "fast", "FAST", 5)
  only("slow", "gone", "fast")
  t0 = time.perf_counter()
  assert Device.DEFAULT == "FAST"   # GONE ranks first, is imported and fails to open; SLOW ranks last
  assert time.perf_counter() - t0 < 2 and "tcfake_slow" not in sys.modules and "tcfake_gone" in sys.modules
  assert registry.device_names() == ["FAST", "GONE", "SLOW"] and "tcfake_slow" not in sys.modules   # listing is light
  assert Device["SLOW"].device == "SLOW" and "tcfake_slow" in sys.modules   # asked for by name: imported now

def test_undeclared_plugin_is_imported_to_learn_its_priority(registry, fake_dist, only):
  plugin(fake_dist, "old", "OLD", 50, declare=False)   # a third-party plugin that predates declarations
  plugin(fake_dist, "new", "NEW", 5)
  only("old", "new")
  assert Device.DEFAULT == "OLD"

def test_bad_declarations_are_ignored_with_a_warning(registry, fake_dist, only):
  di = plugin(fake_dist, "liar", "LIAR", 5, declare=False)
  (di / "entry_points.txt").write_text((di / "entry_points.txt").read_text() + "\n[tinycore.devices]\nLIAR = liar:high\nOTHER = nosuch:3\n")
  only("liar")
  with pytest.warns(PluginWarning) as w: plugins.discover()
  msgs = " | ".join(str(x.message) for x in w)
  assert "LIAR = 'liar:high'" in msgs and "integer priority" in msgs and "has no plugin 'nosuch'" in msgs
  assert registry.records["liar"].declared == {} and Device.DEFAULT == "LIAR"   # treated as undeclared: imported, works

def test_in_tree_declarations_match_the_plugins():
  import tomllib
  for p in ("cpu", "nv", "amd", "metal", "webgpu"):
    with open(os.path.join(ROOT, "plugins", p, "pyproject.toml"), "rb") as f: meta = tomllib.load(f)["project"]["entry-points"]
    declared = {d: v for d, v in meta["tinycore.devices"].items()}
    mod = __import__(f"tinycore_{p}.plugin", fromlist=["x"])
    real = {i["name"]: f"{p}:{i['priority']}" for i in mod.tinycore_devices()}
    assert declared == real, f"plugins/{p}/pyproject.toml declares {declared}, tinycore_{p}.plugin provides {real}"

@pytest.mark.needs_device
def test_first_op_in_a_fresh_process_ignores_broken_and_slow_plugins(tmp_path):
  site = tmp_path / "site"; site.mkdir()
  for name, pre, dev, prio in [("tcfake_exit", "raise SystemExit(1)", "EXIT", 500), ("tcfake_slow", "import time; time.sleep(10)", "SLOW", 1)]:
    di = site / f"{name}-0.1.0.dist-info"; di.mkdir()
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (di / "entry_points.txt").write_text(f"[tinycore.backends]\n{name} = {name}\n[tinycore.devices]\n{dev} = {name}:{prio}\n")
    (site / f"{name}.py").write_text(f"TINYCORE_PLUGIN_API = (1, 1)\n{pre}\n")
  code = "import sys; from tinycore import Tensor; print((Tensor([1.0]) + 1).numpy().tolist(), 'tcfake_slow' in sys.modules)"
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
  for k in ("TINYCORE_PLUGINS", "TINYCORE_DISABLE_PLUGINS", "TINYCORE_DISABLE_PLUGIN_AUTOLOAD", "DEV"): env.pop(k, None)
  t0 = time.perf_counter()
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
  assert out.returncode == 0 and out.stdout.split() == ["[2.0]", "False"], out.stdout + out.stderr
  assert time.perf_counter() - t0 < 9 and "tcfake_exit" in out.stderr and "SystemExit" in out.stderr   # warned, not exited
  tinyctl = os.path.join(os.path.dirname(sys.executable), "tinyctl")
  if os.path.exists(tinyctl):
    out = subprocess.run([tinyctl, "plugins", "--json"], env={**env, "TINYCORE_PLUGINS": "tcfake_exit,cpu"}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    rec = {p["name"]: p for p in json.loads(out.stdout)["plugins"]}["tcfake_exit"]
    assert rec["status"] == "broken" and rec["cause"][0] == "SystemExit: 1" and rec["devices"] == {"EXIT": 500}

# ***** environment knobs *****

def test_cpu_count_empty_is_default_and_garbage_is_clear(monkeypatch):
  pytest.importorskip("tinycore_cpu")
  from tinycore_cpu.runtime import cpu_count
  monkeypatch.setenv("CPU_COUNT", "")
  assert cpu_count() == len(os.sched_getaffinity(0))
  monkeypatch.setenv("CPU_COUNT", " 3 ")
  assert cpu_count() == 3
  for bad, why in [("three", "CPU_COUNT='three': expected a whole number"), ("-2", "CPU_COUNT=-2: expected a thread count >= 1")]:
    monkeypatch.setenv("CPU_COUNT", bad)
    with pytest.raises(EnvError, match=why): cpu_count()

def test_every_context_knob_parses_robustly(monkeypatch):
  assert ContextVar._registry, "helpers registers DEBUG, BEAM, JIT, ..."
  for key, var in list(ContextVar._registry.items()):
    monkeypatch.setenv(key, "")
    assert parse_env(key, os.environ[key], var.default) == var.default   # empty: the default
    if isinstance(var.default, str): continue                            # any text is a valid string
    monkeypatch.setenv(key, "lots")
    with pytest.raises(EnvError, match=rf"environment variable {key}='lots': expected"): ContextVar(f"{key}", var.default)
    ContextVar._registry[key] = var   # constructing registered a probe; put the real one back
    monkeypatch.delenv(key)

@pytest.mark.parametrize("raw, default, want", [
  (None, 3, 3), ("", 3, 3), ("  ", 3, 3), ("7", 0, 7), (" 7\n", 0, 7), ("true", 0, 1), ("off", 1, 0),
  ("yes", False, True), ("0", True, False), ("2.5", 1.0, 2.5), ("x", "d", "x"), ("", "d", "d")])
def test_parse_env_forms(raw, default, want):
  got = parse_env("K", raw, default)
  assert got == want and type(got) is type(want)

@pytest.mark.parametrize("raw, default, form", [("1.5", 0, "a whole number"), ("maybe", False, "1/0, true/false"), ("fast", 1.0, "a number")])
def test_parse_env_garbage(raw, default, form):
  with pytest.raises(EnvError, match=rf"K={raw!r}: expected {form}"): parse_env("K", raw, default)

def test_plugin_switches_parse_robustly(registry, fake_dist, monkeypatch):
  plugin(fake_dist, "sw", "SW", 5)
  monkeypatch.setenv("TINYCORE_PLUGINS", "sw")
  monkeypatch.setenv("TINYCORE_DISABLE_PLUGIN_AUTOLOAD", "false")   # used to count as set: anything but "" and "0" did
  assert registry.discover() and registry.records["sw"].status == "listed"
  plugins.reset()
  monkeypatch.setenv("TINYCORE_DISABLE_PLUGIN_AUTOLOAD", "sometimes")
  with pytest.raises(EnvError, match="TINYCORE_DISABLE_PLUGIN_AUTOLOAD='sometimes'"): plugins.discover()
  plugins.reset()
  monkeypatch.setenv("TINYCORE_DISABLE_PLUGIN_AUTOLOAD", "")
  monkeypatch.setenv("TINYCORE_PLUGINS", "")   # empty allow-list: unset, every plugin
  assert env_value("TINYCORE_PLUGINS", None) is None and plugins.discover() and registry.records["sw"].status == "listed"
