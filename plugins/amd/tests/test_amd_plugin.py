"""tinycore-amd loads through its entry point and, where its hardware or libraries are missing, says why."""
import pytest
from tinycore.testing.plugin_contract import contract_tests
DEVICES = ["AMD"]
globals().update(contract_tests("amd", "tinycore-amd", DEVICES))

# ---- probe, KFD topology and smi against a fake sysfs tree
def _w(path, text):
  import os
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f: f.write(text)

@pytest.fixture
def fake_sysfs(tmp_path):
  pci = tmp_path / "pci"
  d = pci / "0000:03:00.0"
  for f, v in {"vendor": "0x1002", "device": "0x744c", "class": "0x030000", "gpu_busy_percent": "37", "mem_info_vram_used": "1073741824",
               "mem_info_vram_total": "25753026560", "hwmon/hwmon2/temp1_input": "45000", "hwmon/hwmon2/power1_average": "62000000",
               "hwmon/hwmon2/freq1_input": "2482000000"}.items(): _w(str(d / f), v + "\n")
  _w(str(pci / "0000:00:02.0" / "vendor"), "0x8086\n")
  kfd = tmp_path / "kfd"
  _w(str(kfd / "0" / "properties"), "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
  _w(str(kfd / "1" / "properties"), "cpu_cores_count 0\nsimd_count 192\nsimd_per_cu 2\ngfx_target_version 110000\nwave_front_size 32\n"
     "lds_size_in_kb 64\nvendor_id 4098\ndevice_id 29772\ndomain 0\nlocation_id 768\ndrm_render_minor 128\n")
  _w(str(kfd / "1" / "mem_banks" / "0" / "properties"), "heap_type 1\nsize_in_bytes 25753026560\n")
  return pci, kfd

def test_kfd_topology(fake_sysfs):
  from tinycore_amd.topology import kfd_nodes, gfx_name
  nodes = kfd_nodes(str(fake_sysfs[1]))
  assert [n.get("gfx") for n in nodes] == [None, "gfx1100"]
  g = nodes[1]
  assert g["compute_units"] == 96 and g["wave_size"] == 32 and g["memory"] == 25753026560
  assert g["pci"] == "0000:03:00.0" and g["device_id"] == "0x744c"
  assert gfx_name(90402) == "gfx942" and gfx_name(90010) == "gfx90a" and gfx_name(120001) == "gfx1201"

def test_smi_from_sysfs(fake_sysfs):
  from tinycore_amd.smi import smi
  (e,) = smi("", str(fake_sysfs[0]))
  assert e["bus"] == "0000:03:00.0" and e["util"] == 37 and e["mem_used"] == 1 << 30
  assert e["temp_c"] == 45 and e["power_w"] == 62 and e["clock_mhz"] == 2482

def test_smi_without_telemetry(tmp_path):
  from tinycore_amd.smi import smi
  _w(str(tmp_path / "0000:05:00.0" / "vendor"), "0x1002\n"); _w(str(tmp_path / "0000:05:00.0" / "class"), "0x038000\n")
  (e,) = smi("no driver", str(tmp_path))
  assert "no amdgpu telemetry" in e["status"]

def test_bad_renderer_is_a_clear_error(registry):
  from tinycore.device import Device, UnknownDeviceError
  from tinycore.renderer.build import build_renderer
  with pytest.raises(UnknownDeviceError, match="unknown renderer 'PTX' for AMD.*HIP, LLVM"): Device.spec_for("EMU+AMD:PTX")
  # renderers are built from the plugin's RendererInfo (core's build_renderer), with the DEV arch
  assert build_renderer(Device.spec_for("AMD:hip:gfx1201")[0]).arch == "gfx1201" and build_renderer(Device.spec_for("AMD")[0]).name == "LLVM"
