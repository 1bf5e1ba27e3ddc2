import importlib.util, os
import pytest
from tinycore import plugins
from tinycore.device import Device
from tinycore_cpu.probe import probe, parse_cpuinfo
from tinycore_cpu.smi import smi, meminfo

X86 = "processor\t: 0\nmodel name\t: Fancy CPU\nphysical id\t: 0\ncore id\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma\n\n" \
      "processor\t: 1\nmodel name\t: Fancy CPU\nphysical id\t: 0\ncore id\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma\n\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd asimdhp sve\n\nprocessor\t: 1\nFeatures\t: fp asimd asimdhp sve\n"

def test_probe_parses_cpuinfo():
  p = probe(X86)
  assert p["name"] == "Fancy CPU" and p["threads"] == 2 and p["cores"] == 1 and p["flags"] == ["sse4_2", "avx", "avx2", "fma"]
  a = probe(ARM)
  assert a["threads"] == 2 and a["flags"] == ["asimd", "asimdhp", "sve"]
  assert len(parse_cpuinfo(X86)) == 2

def test_probe_this_machine():
  p = probe()
  assert p["device"] == "CPU" and p["threads"] >= 1 and p["name"]

@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="needs Linux /proc")
def test_smi_reads_proc():
  row = smi(interval=0.05)
  assert row["device"] == "CPU" and 0 < row["mem_used"] <= row["mem_total"] == meminfo()["MemTotal"]
  assert 0 <= row["util"] <= 100 and len(row["load"]) == 3

def test_plugin_loads_from_entry_point(registry):
  recs = {r.name: r for r in plugins.plugin_status()}
  assert recs["cpu"].status == "loaded" and recs["cpu"].dist == "tinycore-cpu" and recs["cpu"].api == (1, 1)
  assert [r.name for r in registry.renderers("CPU")] == ["C", "LLVM"]
  spec, _ = Device.spec_for("CPU:CLANG")
  assert spec.renderer == "C" and Device.spec_for("CPU")[0].renderer == "C" and Device.spec_for("CPU:llvm")[0].renderer == "LLVM"
  assert Device.renderer_for("CPU").name == "C" and Device.renderer_for("CPU:LLVM").load == "tinycore_cpu.renderer_llvm:LLVMRenderer"
  assert [r for _, rows in plugins.call("tinycore_smi", device="CPU") for r in rows][0]["device"] == "CPU"

@pytest.mark.skipif(importlib.util.find_spec("tinycore_cpu.device") is None or importlib.util.find_spec("tinycore.tensor") is None,
                    reason="the CPU runtime or the Tensor frontend is not in this tree yet")
@pytest.mark.parametrize("dev", ["CPU", "CPU:LLVM"])
def test_real_computation(registry, dev):
  if dev.endswith("LLVM") and importlib.util.find_spec("llvmlite") is None: pytest.skip("llvmlite is not installed")
  if dev.endswith("LLVM") and importlib.util.find_spec("tinycore_cpu.renderer_llvm") is None: pytest.skip("the LLVM renderer is not in this tree yet")
  import numpy as np
  from tinycore import Tensor, Context
  with Context(DEV=dev):
    assert Device.DEFAULT == "CPU"
    np.testing.assert_allclose((Tensor([1., 2., 3.]) * 2 + 1).numpy(), np.array([3., 5., 7.], dtype=np.float32))
