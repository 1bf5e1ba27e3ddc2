"""PCI functions from sysfs, for plugins' cheap `tinycore_probe` and interface counts: reads files, opens no device."""
from __future__ import annotations
import glob, os

VENDORS = {0x10de: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x106b: "Apple"}

def _hex(path: str) -> int | None:
  try:
    with open(path) as f: return int(f.read().strip(), 16)
  except (OSError, ValueError): return None

def pci_devices(vendor: int, display_only: bool = True, root: str = "/sys/bus/pci/devices") -> list[dict]:
  """Functions of `vendor`; with display_only, only display controllers (class 0x03xxxx) and accelerators (0x12xxxx)."""
  out = []
  for d in sorted(glob.glob(os.path.join(root, "*"))):
    if _hex(f"{d}/vendor") != vendor: continue
    cls = _hex(f"{d}/class") or 0
    if display_only and cls >> 16 not in (0x03, 0x12): continue
    drv = os.path.basename(os.readlink(f"{d}/driver")) if os.path.islink(f"{d}/driver") else None
    out.append({"bus": os.path.basename(d), "vendor": f"0x{vendor:04x}", "device_id": f"0x{(_hex(f'{d}/device') or 0):04x}",
                "class": f"0x{cls:06x}", "driver": drv, "vendor_name": VENDORS.get(vendor, "")})
  return out
