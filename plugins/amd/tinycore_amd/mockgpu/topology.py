"""The /sys/class/kfd/kfd/topology tree the mock presents: node 0 a CPU, then its GPUs, written to a private
temporary directory the runtime reads as it would read sysfs."""
from __future__ import annotations
import atexit, os, shutil, tempfile

# gfx_target_version, PCI device id, compute units of the part the mock pretends to be
PARTS = {"gfx1100": (110000, 0x744c, 96), "gfx1201": (120001, 0x7550, 64)}
GPU_ID_BASE, RENDER_MINOR_BASE, VRAM_BYTES = 0x1d5a, 128, 16 << 30

def write_tree(archs: list[str]) -> str:
  root = tempfile.mkdtemp(prefix="tinycore-mockkfd-")
  atexit.register(shutil.rmtree, root, True)
  def w(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f: f.write(text)
  w(os.path.join(root, "0", "properties"), "cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
  w(os.path.join(root, "0", "gpu_id"), "0\n")
  for i, arch in enumerate(archs, 1):
    ver, dev, cus = PARTS[arch]
    d = os.path.join(root, str(i))
    w(os.path.join(d, "properties"), f"cpu_cores_count 0\nsimd_count {cus * 2}\nsimd_per_cu 2\ngfx_target_version {ver}\n"
      f"wave_front_size 32\nlds_size_in_kb 64\nvendor_id 4098\ndevice_id {dev}\ndomain 0\nlocation_id {(0x03 + i) << 8}\n"
      f"drm_render_minor {RENDER_MINOR_BASE + i - 1}\n")
    w(os.path.join(d, "gpu_id"), f"{GPU_ID_BASE + i}\n")
    w(os.path.join(d, "mem_banks", "0", "properties"), f"heap_type 1\nsize_in_bytes {VRAM_BYTES}\n")
  return root
