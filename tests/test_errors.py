"""The errors a new user meets (tinycore.errors): each is a documented class, raised where the mistake is made, and its
message names the fix (the distribution or extra to install, the DEV= to try)."""
import os, subprocess, sys
import pytest
import tinycore
from tinycore import plugins, Context
from tinycore.device import Device
from tinycore.errors import (DeviceUnavailable, UnknownDeviceError, MissingDependencyError, ResultUnavailableError, TinycoreError,
                             install_command, install_hint)
from _fakes import FakePlugin

def test_exported_from_tinycore():
  from tinycore.nn.file_errors import CorruptFileError, UnsupportedFileError
  from tinycore.devspec import DevSpecError
  from tinycore.helpers import EnvError
  assert tinycore.CorruptFileError is CorruptFileError and tinycore.UnsupportedFileError is UnsupportedFileError   # reused, not copied
  assert tinycore.DevSpecError is DevSpecError and tinycore.EnvError is EnvError
  assert tinycore.DeviceUnavailable is DeviceUnavailable and tinycore.device.DeviceUnavailable is DeviceUnavailable
  assert issubclass(MissingDependencyError, DeviceUnavailable) and issubclass(DeviceUnavailable, RuntimeError)
  assert all(issubclass(c, TinycoreError) for c in (DeviceUnavailable, UnknownDeviceError, ResultUnavailableError))
  assert issubclass(UnknownDeviceError, ValueError)   # what it was before the move: existing `except ValueError` still catch it

def test_unknown_device_names_the_distribution(no_autoload, monkeypatch):
  """DEV=NV with only a CPU backend: the message names tinycore-nv and how to install it, not just what is installed."""
  monkeypatch.setattr(plugins, "_entry_points", lambda: [])   # as if no plugin distribution were installed
  plugins.reset()
  plugins.register(FakePlugin("CPU"), name="cpu")
  with pytest.raises(UnknownDeviceError) as e: Device["NV"]
  msg = str(e.value)
  assert "unknown device 'NV'. Installed: CPU." in msg and "NV is provided by tinycore-nv: `pip install tinycore-nv`" in msg
  assert "`pip install ./plugins/nv`" in msg
  with Context(DEV="AMD"), pytest.raises(UnknownDeviceError, match="AMD is provided by tinycore-amd"): Device.DEFAULT
  with pytest.raises(UnknownDeviceError) as e: Device["TOTALLYNEW"]
  assert "provided by" not in str(e.value)   # no invented distribution for a name this repository has no plugin for

def test_install_hint_only_for_a_missing_distribution():
  assert install_hint("cuda") == install_hint("NV").replace("NV is", "CUDA is") != ""
  assert install_hint("NV", {"tinycore-nv"}) == ""   # installed but not loading: its own status explains that

def test_unavailable_at_default_resolution_with_emulator_hint(no_autoload):
  """A DEV= that can't open fails when Device.DEFAULT is read, not later at the first allocation, and suggests EMU+/NULL+."""
  gone = FakePlugin("GONE", fail="no GONE GPU here")
  plugins.register(gone, name="gone")
  with Context(DEV="GONE"):
    with pytest.raises(DeviceUnavailable) as e: Device.DEFAULT
  assert "no GONE GPU here" in str(e.value) and "try DEV=EMU+GONE" in str(e.value) and "DEV=NULL+GONE (compile only)" in str(e.value)
  with Context(DEV="EMU+GONE"): assert Device.DEFAULT == "GONE"   # the emulator it points to does open

def _run(code: str, **env) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**os.environ, **env})

@pytest.mark.needs_device
def test_missing_llvmlite_names_the_extra():
  """DEV=CPU:LLVM where llvmlite can't be imported: `pip install 'tinycore-cpu[llvm]'`, read from tinycore-cpu's metadata."""
  pytest.importorskip("tinycore_cpu")
  r = _run("import sys; sys.modules['llvmlite'] = None\n"   # what an install without llvmlite looks like to an import
           "from tinycore import Device, MissingDependencyError\n"
           "try: Device.DEFAULT\n"
           "except MissingDependencyError as e: print(type(e).__name__, e.module, e.install, '|', e)", DEV="CPU:LLVM")
  assert r.returncode == 0, r.stderr
  assert r.stdout.startswith("MissingDependencyError llvmlite pip install 'tinycore-cpu[llvm]' |"), r.stdout
  assert "CPU (DEV=CPU:LLVM) needs the Python module 'llvmlite'" in r.stdout

def test_install_command_reads_extras_from_metadata():
  pytest.importorskip("tinycore_cpu")
  assert install_command("tinycore-cpu", "llvmlite.binding") == "pip install 'tinycore-cpu[llvm]'"
  assert install_command("tinycore-cpu", "somethingelse") == "pip install somethingelse"
  assert install_command("no-such-distribution", "foo") == "pip install foo"

@pytest.mark.parametrize("var,value", [("CPU_COUNT", ""), ("CPU_COUNT", "  "), ("BEAM", ""), ("DEBUG", "")])
def test_empty_env_means_default(var, value):
  r = _run("from tinycore import Tensor; print((Tensor([1., 2.]) + 1).tolist())", **{var: value})
  assert r.returncode == 0 and r.stdout.strip() == "[2.0, 3.0]", r.stderr

@pytest.mark.parametrize("var,value,expect", [("CPU_COUNT", "abc", "expected a whole number"), ("CPU_COUNT", "-2", "expected a thread count >= 1"),
                                              ("DEBUG", "lots", "expected a whole number"), ("BEAM", "2.5", "expected a whole number"),
                                              ("DEFAULT_FLOAT", "flaot16", "expected one of HALF, BFLOAT16")])
def test_garbage_env_is_a_clear_error(var, value, expect):
  # a kernel big enough that the CPU runtime asks CPU_COUNT how many threads to use; DEBUG and BEAM are read at import
  r = _run("try:\n  import numpy as np\n  from tinycore import Tensor\n  (Tensor(np.ones((2048, 1024), np.float32)) * 3).sum().item()\n"
           "except ValueError as e: print(f'{type(e).__name__}: {e}')", **{var: value})
  assert r.stdout.startswith(f"EnvError: environment variable {var}=") and value in r.stdout and expect in r.stdout, (r.stdout, r.stderr)

def test_empty_xdg_cache_home_is_ignored(monkeypatch):
  """XDG's rule: an empty or relative XDG_CACHE_HOME is ignored, so the cache never lands in the current directory."""
  from tinycore.helpers import CACHEDB, cache_dir
  monkeypatch.setattr(CACHEDB, "value", "")
  for bad in ("", "relative/dir"):
    monkeypatch.setenv("XDG_CACHE_HOME", bad)
    assert cache_dir() == os.path.join(os.path.expanduser("~/.cache"), "tinycore")
  monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
  assert cache_dir() == "/somewhere/tinycore"
