"""Live telemetry from the amdgpu driver's sysfs files: no library, no /dev/kfd.

Per PCI function: gpu_busy_percent, mem_info_vram_used/_total, and from its hwmon folder temp1_input (m°C),
power1_average or power1_input (µW), freq1_input (sclk, Hz). `root` points at a fake tree in tests."""
from __future__ import annotations
import glob, os

def _read(path: str) -> int | None:
  try:
    with open(path) as f: return int(f.read().split()[0])
  except (OSError, ValueError, IndexError): return None

def smi(reason: str = "", root: str = "/sys/bus/pci/devices") -> list[dict]:
  from tinycore.pci import pci_devices
  out = []
  for i, g in enumerate(pci_devices(0x1002, root=root)):
    d = os.path.join(root, g["bus"])
    e: dict = {"device": "AMD", "index": i, "name": "AMD GPU", "bus": g["bus"], "device_id": g["device_id"], "driver": g["driver"]}
    if (v := _read(f"{d}/gpu_busy_percent")) is not None: e["util"] = v
    if (v := _read(f"{d}/mem_info_vram_used")) is not None: e["mem_used"] = v
    if (v := _read(f"{d}/mem_info_vram_total")) is not None: e["mem_total"] = v
    for hw in sorted(glob.glob(f"{d}/hwmon/hwmon*")):
      if (v := _read(f"{hw}/temp1_input")) is not None: e["temp_c"] = v / 1000
      if (v := _read(f"{hw}/power1_average") or _read(f"{hw}/power1_input")) is not None: e["power_w"] = v / 1e6
      if (v := _read(f"{hw}/freq1_input")) is not None: e["clock_mhz"] = v // 1_000_000
    if len(e) == 6: e["status"] = f"no amdgpu telemetry in sysfs: {reason or g['driver'] or 'no driver bound'}"
    out.append(e)
  return out
