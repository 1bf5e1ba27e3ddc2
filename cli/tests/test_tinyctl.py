"""tinyctl through typer's CliRunner, on hand-registered fake devices (and the real CPU when the pipeline is there)."""
import importlib.util, json, re
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
  assert "FAKE" not in r.stdout.split("* = ")[0].replace("FAKE:", "")   # only what was asked for (the footer names the default)

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
  # GONE has the higher priority but doesn't open: the footer names what a script gets, so rows of FAIL don't mislead
  assert "Default device: FAKE (DEV unset: the highest-priority device that opens)." in r.stdout, r.stdout

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

# ***** errors, exit codes, help, doctor *****

def test_user_error_is_one_line_without_traceback(fakes):
  r = runner.invoke(app, ["device", "list", "FAEK"])
  assert r.exit_code == 2 and r.output.strip().count("\n") == 0 and r.output.startswith("error: unknown device 'FAEK'")
  assert "Traceback" not in r.output and "Did you mean 'FAKE'?" in r.output

def test_internal_error_exit_3_and_debug_shows_it(fakes, monkeypatch):
  import tinyctl.checks
  def broken(): raise KeyError("the bug")
  monkeypatch.setattr(tinyctl.checks, "targets", broken)
  monkeypatch.delenv("DEBUG", raising=False)
  r = runner.invoke(app, ["device", "list"])
  assert r.exit_code == 3 and "error: KeyError: 'the bug'" in r.output and "--debug" in r.output and "Traceback" not in r.output
  r = runner.invoke(app, ["--debug", "device", "list"])
  assert isinstance(r.exception, KeyError)   # the exception itself comes through, with its traceback
  monkeypatch.setenv("DEBUG", "1")
  assert isinstance(runner.invoke(app, ["device", "list"]).exception, KeyError)

def _tinyctl(*args, **env):
  import os, subprocess, sys
  return subprocess.run([sys.executable, "-m", "tinyctl.app", *args], capture_output=True, text=True, timeout=120, env={**os.environ, **env})

def test_console_script_bad_environment_is_one_line():
  """An environment variable that doesn't parse fails at import, before any command runs: still one line, exit 2."""
  r = _tinyctl("device", "list", "CPU", DEBUG="lots")
  assert r.returncode == 2 and r.stderr.startswith("error: environment variable DEBUG='lots'") and "Traceback" not in r.stderr, r.stderr
  r = _tinyctl("device", "list", "CPU:", DEBUG="")
  assert r.returncode == 2 and r.stderr.startswith("error: malformed DEV='CPU:'") and "Traceback" not in r.stderr, r.stderr

def test_help_documents_exit_codes_without_type_labels():
  r = runner.invoke(app, ["--help"])
  assert r.exit_code == 0 and "Exit status" in r.output and "2   usage error" in r.output and "doctor" in r.output
  for cmd in ([], ["device"], ["device", "list"], ["plugins"], ["smi"], ["doctor"], ["viz"]):
    out = runner.invoke(app, [*cmd, "--help"]).output
    assert not re.search(r"<[\w\[\], |]+>", out), (cmd, out)   # typer's Python-type labels: <bool>, <float>, <list[str]>
    assert not re.search(r"[\w,]\.\.\.\n", out), (cmd, out)   # a command's help cut short in a listing
    if cmd and cmd not in (["device"], ["viz"]): assert "--json" in out, (cmd, out)   # viz serves a page, prints no table
  assert "DEV...  DEV strings to check" in runner.invoke(app, ["device", "list", "--help"]).output
  assert "--watch SECONDS" in runner.invoke(app, ["smi", "--help"]).output

def test_smi_every_column_labelled(fakes):
  from tinyctl.app import _smi_rows, _smi_table
  tab = _smi_table(_smi_rows())
  assert all(str(c.header).strip() for c in tab.columns) and "MEMORY USE" in [c.header for c in tab.columns]

def test_doctor_names_what_is_missing_and_the_command(monkeypatch):
  from tinyctl import doctor
  real = doctor._installed
  monkeypatch.setattr(doctor, "_installed", lambda d: False if d in ("tinycore-nv", "llvmlite") else real(d))
  monkeypatch.setattr(doctor, "SYSTEM", [("CPU", "a frobnicator", lambda: False, "frobs", "frob-tools")])
  r = runner.invoke(app, ["doctor", "--json"])
  found = json.loads(r.stdout)
  nv = next(f for f in found if f["needs"] == "tinycore-nv")
  assert nv["status"] == "missing" and nv["fix"].startswith("pip install tinycore-nv") and "./plugins/nv" in nv["fix"]
  if real("tinycore-cpu"):
    llvm = next(f for f in found if f["needs"].startswith("tinycore-cpu[llvm]"))
    assert llvm["status"] == "missing" and llvm["fix"] == "pip install 'tinycore-cpu[llvm]'"
    frob = next(f for f in found if f["needs"] == "a frobnicator")
    assert frob["status"] == "missing" and "apt-get install frob-tools" in frob["fix"]
  r = runner.invoke(app, ["doctor"])
  assert "missing" in r.stdout and "pip install tinycore-nv" in r.stdout and "NEEDS" in r.stdout and "FIX" in r.stdout

@pytest.mark.skipif(not HAVE_PIPELINE, reason="needs the CPU plugin")
def test_doctor_real_cpu(registry):
  r = runner.invoke(app, ["doctor", "CPU", "--json"])
  cpu = [f for f in json.loads(r.stdout) if f["kind"] == "device"]
  assert cpu and cpu[0]["ok"] and cpu[0]["needs"] == "DEV=CPU:C"

def test_docs_page_lists_every_exit_code_and_column(fakes):
  """docs/tinyctl.md documents each exit status as the code defines it and every column the tables print."""
  import os
  from tinyctl.failures import EXIT_CODES
  from tinyctl.app import _smi_table
  doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "tinyctl.md")).read()
  for code, what in EXIT_CODES.items(): assert f"| {code} | {what} |" in doc, (code, what)
  smi_cols = [str(c.header) for c in _smi_table([]).columns]
  listed = ["DEVICE", "IFACE", "RENDERER", "COUNT", "RESULT", "DEV=", "WHY", "NAME", "DISTRIBUTION, VERSION", "API", "DEVICES", "IMPORT",
            "STATUS", "CAUSE", "NEEDS", "GIVES", "FIX"] + smi_cols
  for out in (runner.invoke(app, ["device", "list"]).stdout, runner.invoke(app, ["plugins"]).stdout, runner.invoke(app, ["doctor"]).stdout):
    heads = [h.strip() for ln in out.splitlines() if ln.startswith("┃") for h in ln.strip("┃").split("┃")]
    assert heads and all(any(h in c for c in listed) for h in heads if h), heads   # a new column must be documented
  for col in listed: assert col in doc, col
