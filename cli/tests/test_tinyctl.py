"""tinyctl through typer's CliRunner, on hand-registered fake devices (and the real CPU when the pipeline is there)."""
import importlib.util, json
import pytest
from typer.testing import CliRunner
from tinycore import plugins
from tinyctl.app import app
from _fakes import FakePlugin

runner = CliRunner()
HAVE_PIPELINE = importlib.util.find_spec("tinycore_cpu") is not None   # the cli-only venv (core + tinyctl) has no backend

@pytest.fixture
def fakes(no_autoload):
  plugins.register(FakePlugin("FAKE", priority=3), name="fake")
  plugins.register(FakePlugin("GONE", priority=9, fail="libgone.so not found"), name="gone")

def test_device_list_json(fakes):
  r = runner.invoke(app, ["device", "list", "--json"])
  rows = json.loads(r.stdout)
  expected = {(d, i, rr) for d in ("FAKE", "GONE") for i in ("HOST", "BUS", "EMU") for rr in ("R1", "R2")}
  assert {(x["device"], x["iface"], x["renderer"]) for x in rows} == expected
  assert [x["device"] for x in rows][:6] == ["GONE"] * 6   # highest priority first
  gone = next(x for x in rows if x["dev"] == "GONE:R1")
  assert gone["ok"] is False and gone["why"] == "libgone.so not found" and gone["default"] and gone["count"] == 1
  bus = next(x for x in rows if x["dev"] == "BUS+FAKE:R2")
  assert bus["count"] == 2 and not bus["default"] and next(x for x in rows if x["dev"] == "EMU+FAKE:R1")["kind"] == "emulator"
  # EMU+FAKE computes even without any backend plugin: core opens it on the shared emulator with FAKE's renderer
  assert next(x for x in rows if x["dev"] == "EMU+FAKE:R1")["ok"] and r.exit_code == 0

def test_device_list_requested_failure_exits_nonzero(fakes):
  r = runner.invoke(app, ["device", "list", "GONE"])
  assert r.exit_code == 1 and "GONE" in r.stdout and "FAIL" in r.stdout and "libgone.so not found" in r.stdout
  assert "FAKE" not in r.stdout.replace("FAKE:", "")   # only what was asked for

def test_device_list_unknown_is_usage_error(fakes):
  r = runner.invoke(app, ["device", "list", "FAEK"])
  assert r.exit_code == 2 and "unknown device 'FAEK'" in r.output and "Did you mean 'FAKE'?" in r.output
  r = runner.invoke(app, ["device", "list", "FAKE:R3"])
  assert r.exit_code == 2 and "unknown renderer 'R3' for FAKE" in r.output
  r = runner.invoke(app, ["device", "list", "FAKE:"])
  assert r.exit_code == 2 and "malformed DEV='FAKE:'" in r.output

def test_device_list_table(fakes):
  r = runner.invoke(app, ["device", "list"])
  for s in ("DEVICE", "IFACE", "RENDERER", "COUNT", "RESULT", "DEV=", "WHY", "GONE:R1", "BUS+FAKE:R2", "EMU+FAKE:R1", "(emulator)"):
    assert s in r.stdout

@pytest.mark.skipif(not HAVE_PIPELINE, reason="the CPU runtime or the Tensor frontend is not in this tree yet")
def test_device_list_real_cpu_passes(registry):
  r = runner.invoke(app, ["device", "list", "CPU", "--json"])
  rows = json.loads(r.stdout)
  assert r.exit_code == 0 and rows[0]["ok"] is True and rows[0]["dev"] == "CPU:C", rows

def test_plugins(fakes):
  class Old: TINYCORE_PLUGIN_API = (3, 4)
  with pytest.warns(UserWarning): plugins.register(Old, name="old")
  r = runner.invoke(app, ["plugins", "--json"])
  assert r.exit_code == 0
  data = json.loads(r.stdout)
  st = {p["name"]: p for p in data["plugins"]}
  assert data["plugin_api"] == plugins.PLUGIN_API and st["fake"]["status"] == "loaded" and st["fake"]["api"] == [1, 1]
  assert st["old"]["status"] == "skipped" and "supports plugin API 3..4" in st["old"]["reason"]
  r = runner.invoke(app, ["plugins"])
  assert r.exit_code == 0 and "skipped" in r.stdout and "loaded" in r.stdout and "supports plugin API 3..4" in r.stdout

def test_plugins_shows_disabled_installed(registry, monkeypatch):
  monkeypatch.setenv("TINYCORE_DISABLE_PLUGINS", "cpu")
  data = json.loads(runner.invoke(app, ["plugins", "--json"]).stdout)
  cpu = [p for p in data["plugins"] if p["name"] == "cpu"]
  assert not cpu or (cpu[0]["status"] == "disabled" and cpu[0]["reason"] == "in TINYCORE_DISABLE_PLUGINS")

def test_smi_json(fakes):
  r = runner.invoke(app, ["smi", "--json"])
  assert r.exit_code == 0
  rows = json.loads(r.stdout)
  assert {x["device"] for x in rows} == {"FAKE", "GONE"} and all(x["mem_total"] == 2 for x in rows)

def test_smi_table_and_watch(fakes):
  r = runner.invoke(app, ["smi"])
  assert r.exit_code == 0 and "FAKE" in r.stdout and "MEMORY" in r.stdout
  r = runner.invoke(app, ["smi", "--watch", "0.01", "--count", "2"])
  assert r.exit_code == 0 and "FAKE" in r.stdout

@pytest.mark.skipif(not __import__("os").path.exists("/proc/meminfo"), reason="needs Linux /proc")
def test_smi_real_cpu(registry, monkeypatch):
  monkeypatch.setenv("TINYCORE_PLUGINS", "cpu")
  rows = json.loads(runner.invoke(app, ["smi", "--json"]).stdout)
  if rows:
    assert rows[0]["device"] == "CPU" and rows[0]["mem_total"] > 0 and 0 <= rows[0]["util"] <= 100
