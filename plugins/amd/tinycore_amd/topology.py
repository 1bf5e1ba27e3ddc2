"""The KFD topology (/sys/class/kfd/kfd/topology/nodes/N/properties): one node per CPU socket and per GPU, read
without opening /dev/kfd. A GPU node has a nonzero gfx_target_version (major*10000 + minor*100 + stepping, so
110000 is gfx1100 and 90402 is gfx942)."""
from __future__ import annotations
import glob, os

ROOT = "/sys/class/kfd/kfd/topology/nodes"

def gfx_name(v: int) -> str: return f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"   # minor/stepping are hex digits (gfx90a)

def kfd_nodes(root: str = ROOT) -> list[dict]:
  out = []
  for d in sorted(glob.glob(os.path.join(root, "*")), key=lambda p: int(os.path.basename(p)) if os.path.basename(p).isdigit() else 1 << 30):
    try:
      with open(os.path.join(d, "properties")) as f: props = dict((k, int(v)) for k, v in (l.split() for l in f if len(l.split()) == 2))
    except (OSError, ValueError): continue
    node = {"node": int(os.path.basename(d)), "simd_count": props.get("simd_count", 0), "cpu_cores": props.get("cpu_cores_count", 0)}
    if (v := props.get("gfx_target_version", 0)):
      cus = props.get("simd_count", 0) // max(props.get("simd_per_cu", 1), 1)
      node.update(gfx=gfx_name(v), compute_units=cus, wave_size=props.get("wave_front_size"), lds_kb=props.get("lds_size_in_kb"),
                  vendor_id=f"0x{props.get('vendor_id', 0):04x}", device_id=f"0x{props.get('device_id', 0):04x}",
                  drm_minor=props.get("drm_render_minor"), pci=_pci_address(props))
      banks = glob.glob(os.path.join(d, "mem_banks", "*", "properties"))
      node["memory"] = sum(_int_prop(b, "size_in_bytes") for b in banks)
    out.append(node)
  return out

def _pci_address(props: dict) -> str:
  """domain:bus:device.function from KFD's location_id (bus << 8 | device << 3 | function)."""
  loc = props.get("location_id", 0)
  return f"{props.get('domain', 0):04x}:{(loc >> 8) & 0xff:02x}:{(loc >> 3) & 0x1f:02x}.{loc & 7}"

def _int_prop(path: str, key: str) -> int:
  try:
    with open(path) as f:
      for l in f:
        k, _, v = l.partition(" ")
        if k == key: return int(v)
  except (OSError, ValueError): pass
  return 0
