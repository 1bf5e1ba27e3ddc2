"""What CPU this is, from /proc/cpuinfo: model, cores, threads and the ISA flags codegen cares about."""
from __future__ import annotations
import os, platform

# flags worth showing: vector widths and the instructions the C/LLVM renderers can use
ISA = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
       "neon", "asimd", "asimdhp", "sve", "sve2", "bf16", "i8mm")

def parse_cpuinfo(text: str) -> list[dict[str, str]]:
  """/proc/cpuinfo as one dict per logical processor."""
  procs, cur = [], {}
  for line in text.splitlines():
    if not line.strip():
      if cur: procs.append(cur); cur = {}
      continue
    k, _, v = line.partition(":")
    cur[k.strip()] = v.strip()
  if cur: procs.append(cur)
  return procs

def probe(cpuinfo: str | None = None) -> dict:
  if cpuinfo is None:
    try:
      with open("/proc/cpuinfo") as f: cpuinfo = f.read()
    except OSError: cpuinfo = ""
  procs = parse_cpuinfo(cpuinfo)
  first = procs[0] if procs else {}
  flags = set((first.get("flags") or first.get("Features") or "").split())
  cores = {(p.get("physical id", "0"), p.get("core id", str(i))) for i, p in enumerate(procs)}
  return {"device": "CPU", "name": first.get("model name") or first.get("Processor") or platform.processor() or platform.machine(),
          "arch": platform.machine(), "threads": len(procs) or os.cpu_count() or 1, "cores": len(cores) or os.cpu_count() or 1,
          "usable_threads": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
          "flags": [f for f in ISA if f in flags]}
