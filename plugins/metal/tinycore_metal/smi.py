"""`tinyctl smi` for METAL: what the Metal device object reports (UNTESTED ON APPLE HARDWARE). Apple exposes no
utilization, clocks or temperature without private IOKit keys; memory is unified, so `mem_total` is the
recommended working set (what the GPU may use without paging) and `mem_used` Metal's allocated size. Off macOS: []."""
from __future__ import annotations
import ctypes, sys

def smi() -> list[dict]:
  if sys.platform != "darwin": return []
  from tinycore_metal.objc import lib, metal_missing, send, to_str
  if (why := metal_missing()) is not None: return [{"device": "METAL", "index": 0, "status": why}]
  dev = lib()[1].MTLCreateSystemDefaultDevice()
  return [{"device": "METAL", "index": 0, "name": to_str(send(dev, "name")),
           "mem_used": send(dev, "currentAllocatedSize", restype=ctypes.c_ulong),
           "mem_total": send(dev, "recommendedMaxWorkingSetSize", restype=ctypes.c_uint64),
           "unified_memory": bool(send(dev, "hasUnifiedMemory", restype=ctypes.c_bool)), "status": "ok"}]
