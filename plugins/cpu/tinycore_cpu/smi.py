"""Live CPU telemetry from /proc and sysfs: utilization, load, memory, clock, temperature and power where exposed."""
from __future__ import annotations
import glob, os, time

def _read(path: str) -> str | None:
  try:
    with open(path) as f: return f.read()
  except OSError: return None

def _cpu_times() -> tuple[int, int] | None:
  """(busy, total) jiffies from the aggregate line of /proc/stat."""
  if (txt := _read("/proc/stat")) is None: return None
  v = [int(x) for x in txt.splitlines()[0].split()[1:]]
  idle = v[3] + (v[4] if len(v) > 4 else 0)   # idle + iowait
  return sum(v) - idle, sum(v)

def meminfo() -> dict[str, int]:
  out = {}
  for line in (_read("/proc/meminfo") or "").splitlines():
    k, _, v = line.partition(":")
    if (parts := v.split()): out[k] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
  return out

def clock_mhz() -> float | None:
  if (fs := [int(x) for p in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq") if (x := (_read(p) or "").strip())]):
    return sum(fs) / len(fs) / 1000
  mhz = [float(l.split(":")[1]) for l in (_read("/proc/cpuinfo") or "").splitlines() if l.startswith("cpu MHz")]
  return sum(mhz) / len(mhz) if mhz else None

def temperature_c() -> float | None:
  """Package temperature from hwmon (coretemp/k10temp/cpu_thermal) or a CPU thermal zone."""
  for d in glob.glob("/sys/class/hwmon/hwmon*"):
    if (_read(f"{d}/name") or "").strip() in ("coretemp", "k10temp", "zenpower", "cpu_thermal", "acpitz") and (t := _read(f"{d}/temp1_input")):
      return int(t) / 1000
  for z in glob.glob("/sys/class/thermal/thermal_zone*"):
    if any(k in (_read(f"{z}/type") or "").lower() for k in ("pkg", "cpu", "x86", "soc")) and (t := _read(f"{z}/temp")):
      return int(t) / 1000
  return None

def _energy_uj() -> int | None:
  t = _read("/sys/class/powercap/intel-rapl:0/energy_uj")
  return int(t) if t and t.strip().isdigit() else None

def smi(interval: float = 0.1) -> dict:
  """One row for `tinyctl smi`. Utilization and power are measured over `interval` seconds."""
  t0, e0 = _cpu_times(), _energy_uj()
  time.sleep(interval)
  t1, e1 = _cpu_times(), _energy_uj()
  mem, load = meminfo(), (_read("/proc/loadavg") or "").split()
  row = {"device": "CPU", "index": 0, "name": _model(), "mem_total": mem.get("MemTotal"),
         "mem_used": mem["MemTotal"] - mem.get("MemAvailable", mem.get("MemFree", 0)) if "MemTotal" in mem else None,
         "util": round(100 * (t1[0] - t0[0]) / max(t1[1] - t0[1], 1), 1) if t0 and t1 else None,
         "load": [float(x) for x in load[:3]] if load else None, "clock_mhz": clock_mhz(), "temp_c": temperature_c(),
         "power_w": round((e1 - e0) / 1e6 / interval, 1) if e0 is not None and e1 is not None and e1 >= e0 else None,
         "threads": os.cpu_count()}
  return {k: v for k, v in row.items() if v is not None}

def _model() -> str:
  for l in (_read("/proc/cpuinfo") or "").splitlines():
    if l.startswith(("model name", "Processor")): return l.split(":", 1)[1].strip()
  return "CPU"
