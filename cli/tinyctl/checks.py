"""What `tinyctl device list` does: every device x interface x renderer, each tried with a tiny real computation."""
from __future__ import annotations
import warnings
from tinycore.isolation import run_isolated
from dataclasses import dataclass, asdict

@dataclass
class Target:
  device: str
  iface: str
  renderer: str | None
  kind: str
  count: int
  dev: str               # the DEV= string that selects it
  default: bool          # what a bare DEV=<device> selects
  ok: bool | None = None
  why: str = ""
  def as_dict(self): return asdict(self)

def _short(e: BaseException) -> str:
  msg = str(e).strip().splitlines()
  return f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]

def targets() -> list[Target]:
  """Every installed combination, highest-priority device first; no device is opened."""
  from tinycore.devspec import DevSpec
  from tinycore.plugins import registry
  registry.load_all()
  infos = sorted({info.name.upper(): info for info, _ in registry.devices().values()}.values(), key=lambda i: (-i.priority, i.name))
  out = []
  for info in infos:
    name, ifaces, rens = info.name.upper(), registry.interfaces(info.name), registry.renderers(info.name) or [None]
    d_if = (next((i for i in ifaces if i.default), None) or ifaces[0]).name.upper()
    d_ren = next((r.name for r in rens if r is not None and r.default), rens[0].name if rens[0] is not None else None)
    for iface in ifaces:
      count, err = run_isolated(iface.count)   # plugin code: whatever it raises means none found
      if err is not None or not isinstance(count, int): count = 0
      for r in rens:
        rname = r.name.upper() if r is not None else None
        spec = DevSpec(name, rname, iface=None if iface.name.upper() == d_if else iface.name.upper())
        kind = info.kind if info.kind != "real" else iface.kind
        out.append(Target(name, iface.name.upper(), rname, kind, count, str(spec), iface.name.upper() == d_if and rname == (d_ren and d_ren.upper())))
  return out

def check(t: Target) -> Target:
  """Run (x*2+1) on [1,2,3] through the full pipeline on this target and compare with numpy."""
  try:
    from tinycore import Context
    from tinycore.device import Device
    with Context(DEV=t.dev), warnings.catch_warnings():
      warnings.simplefilter("ignore")
      Device[Device.DEFAULT]   # opening first: its reason is the one that matters
      import numpy as np
      from tinycore import Tensor
      got = (Tensor([1., 2., 3.], device=t.device) * 2 + 1).numpy()
    want = np.array([3., 5., 7.], dtype=np.float32)
    if got.shape != want.shape or not np.allclose(got, want): t.ok, t.why = False, f"wrong result {got.tolist()}, expected {want.tolist()}"
    else: t.ok, t.why = True, ""
  except Exception as e:
    from tinycore.device import DeviceUnavailable
    t.ok, t.why = False, str(getattr(e, "cause", None) or e) if isinstance(e, DeviceUnavailable) else _short(e)
  return t

def resolve(want: str):
  """The full spec a DEV string typed on the command line selects (aliases and defaults filled in)."""
  from tinycore.device import Device
  from tinycore.devspec import parse_target
  return Device.resolve(parse_target(want))

def matches(t: Target, spec) -> bool: return (t.device, t.iface, t.renderer) == (spec.device, spec.iface, spec.renderer)
