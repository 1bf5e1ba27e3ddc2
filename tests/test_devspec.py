import pytest
from tinycore.devspec import DevSpec, DevSpecError, parse_dev, parse_target, check_legacy_env, GRAMMAR

@pytest.mark.parametrize("s,want", [
  ("CPU", DevSpec("CPU")),
  ("cpu", DevSpec("CPU")),
  ("CPU:LLVM", DevSpec("CPU", "LLVM")),
  ("NV:PTX", DevSpec("NV", "PTX")),
  ("NV:CUDA:sm_90", DevSpec("NV", "CUDA", "sm_90")),
  ("AMD::gfx1100", DevSpec("AMD", None, "gfx1100")),
  ("PCI+AMD", DevSpec("AMD", iface="PCI")),
  ("USB+AMD:LLVM", DevSpec("AMD", "LLVM", iface="USB")),
  ("EMU+NV", DevSpec("NV", iface="EMU")),
  (":1+NV", DevSpec("NV", indices=(1,))),
  (":3+CUDA", DevSpec("CUDA", indices=(3,))),
  ("PCI:0,2+AMD", DevSpec("AMD", iface="PCI", indices=(0, 2))),
  ("PCI:1-3+AMD", DevSpec("AMD", iface="PCI", indices=(1, 2, 3))),
  ("EMU+AMD::gfx1100", DevSpec("AMD", None, "gfx1100", "EMU")),
  ("NULL:PTX:sm_90", DevSpec("NULL", "PTX", "sm_90")),
  (" CPU ", DevSpec("CPU")),
])
def test_valid(s, want):
  assert parse_target(s) == want
  assert parse_target(str(want)) == want   # str() gives back a DEV string that parses to the same target

def test_multiple_targets():
  assert parse_dev("CPU;NV:PTX") == (DevSpec("CPU"), DevSpec("NV", "PTX"))
  assert parse_dev("") == () and parse_dev("  ") == ()

def test_frozen():
  with pytest.raises(Exception): parse_target("CPU").device = "NV"
  assert hash(parse_target("CPU:LLVM")) == hash(DevSpec("CPU", "LLVM"))

@pytest.mark.parametrize("s,why", [
  ("CPU:", "empty renderer and arch"),
  ("CPU::", "empty renderer and arch"),
  ("+NV", "'+' needs an interface or indices"),
  ("PCI+USB+AMD", "only one IFACE+ prefix"),
  ("NV:a:b:c", "too many ':' fields"),
  ("1", "'1' is not a device name"),
  ("CPU;;NV", "empty target between ';'"),
  (";", "empty target between ';'"),
  ("PCI:+AMD", "needs indices"),
  (":x+NV", "must be integers"),
  (":3-1+NV", "is empty"),
  (":1,1+NV", "repeat a device"),
  ("CPU;cpu", "named twice"),
  ("N-V", "device name 'N-V'"),
  ("P-CI+NV", "interface name 'P-CI'"),
  ("NV:P-TX", "renderer name 'P-TX'"),
  ("NV:PTX:sm 90", "arch 'sm 90'"),
  ("PCI+", "missing DEVICE"),
])
def test_malformed(s, why):
  with pytest.raises(DevSpecError) as e: parse_dev(s)
  msg = str(e.value)
  assert why in msg and f"malformed DEV={s!r}" in msg and GRAMMAR in msg
  assert isinstance(e.value, ValueError)

def test_physical_indices():
  assert parse_target(":2,5+NV").physical(1) == 5 and parse_target("NV").physical(3) == 3
  with pytest.raises(IndexError, match="exposes only 1"): parse_target(":2+NV").physical(1)

@pytest.mark.parametrize("env,use", [
  ({"CUDA": "1"}, "DEV=CUDA"), ({"NV": "1"}, "DEV=NV"), ({"NV_PTX": "1"}, "DEV=NV:PTX"), ({"AMD_IFACE": "PCI"}, "DEV=PCI+AMD"),
  ({"AMD_IFACE": "usb"}, "DEV=USB+AMD"), ({"CPU": "1"}, "DEV=CPU"), ({"LLVM": "1"}, "DEV=CPU:LLVM"), ({"CLANG": "1"}, "DEV=CPU:C"),
  ({"AMD_LLVM": "1"}, "DEV=AMD:LLVM"), ({"EMULATE": "AMD_RDNA3"}, "DEV=EMU+AMD::gfx1100"), ({"EMULATE": "CUDA_SM90"}, "DEV=EMU+NV::sm_90"),
  ({"EMULATE": "WEIRD"}, "DEV=EMU+DEVICE"), ({"PYTHON": "1"}, "DEV=EMU+DEVICE"), ({"METAL": "1"}, "DEV=METAL"),
])
def test_legacy_env(env, use):
  with pytest.raises(DevSpecError) as e: check_legacy_env(env)
  k, v = next(iter(env.items()))
  assert f"{k}={v} is no longer supported: use {use}" in str(e.value)

def test_legacy_env_ignores_unset_and_zero():
  check_legacy_env({"CUDA": "0", "NV": "", "CUDA_PATH": "/usr/local/cuda", "DEBUG": "2"})
