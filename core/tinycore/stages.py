"""Named pipeline stages where the plugin that owns a device shapes that device's pipeline with its own rewrite rules
(the `tinycore_rewrite_rules(device, stage)` hook):

  tensor   the lazy graph being realized, before scheduling (a decomposition of an op the device lacks, a fusion hint)
  kernel   one kernel's lowered AST (ranges and index math), before optimization
  program  the linearized program, one UOp per line, right before the renderer sees it

A hook returns a PatternMatcher, a list of them, or None. Only the plugin providing the device is asked; its rules are
applied to a fixed point after core's own passes at that stage. Rules change the rendered source, which keys the
compile cache, so a changed rule never reuses a stale binary."""
from __future__ import annotations
from tinycore.rewrite import PatternMatcher, graph_rewrite
from tinycore.uop import UOp

STAGES = ("tensor", "kernel", "program")
_cache: dict[tuple, PatternMatcher | None] = {}

def _owner(device: str) -> str:
  """The device name a plugin registered: 'CPU:1' -> 'CPU', 'EMU+NV::sm_90' -> 'NV' (an emulator runs NV's pipeline)."""
  from tinycore.devspec import parse_target
  try: return parse_target(device).device.upper()
  except Exception: return device.split(":")[0].split("+")[-1].upper()

def device_rules(device: str, stage: str) -> PatternMatcher | None:
  """The rules the plugin providing `device` contributes at `stage`, merged into one matcher (cached per registry)."""
  if stage not in STAGES: raise ValueError(f"unknown pipeline stage {stage!r}; stages are {', '.join(STAGES)}")
  from tinycore.plugins import registry
  # keyed by the name as given (realize asks on every call: one dict hit), and by the manager itself, not its id (a new
  # one may reuse a freed id)
  if (key := (registry.pm, device, stage)) in _cache: return _cache[key]
  name = _owner(device)
  found = registry.find_device(name)
  pms: list[PatternMatcher] = []
  if found is not None:
    owner = found[1].name
    for rec, res in registry.call("tinycore_rewrite_rules", device=name, stage=stage):
      if rec.name != owner: continue   # another plugin may not rewrite a device it doesn't provide
      for pm in (res if isinstance(res, (list, tuple)) else [res]):
        if not isinstance(pm, PatternMatcher):
          raise TypeError(f"plugin {rec.name!r}: tinycore_rewrite_rules({name!r}, {stage!r}) must return PatternMatcher(s), got {type(pm).__name__}")
        pms.append(pm)
  _cache[key] = out = (pms[0] if len(pms) == 1 else PatternMatcher([p for pm in pms for p in pm.patterns])) if pms else None
  return out

def apply_stage(x: UOp, device: str | None, stage: str) -> UOp:
  """`x` rewritten by `device`'s rules at `stage` (unchanged when the device has none)."""
  if not isinstance(device, str): return x
  pm = device_rules(device, stage)
  return x if pm is None else graph_rewrite(x, pm)

def apply_program_stage(uops: list[UOp], device: str | None) -> list[UOp]:
  """The program stage, line by line: each line (its sources already rewritten) is rewritten to a fixed point, and any
  new nodes a rule made are placed right before the line that uses them, inside the same loops."""
  if not isinstance(device, str) or (pm := device_rules(device, "program")) is None: return uops
  out: list[UOp] = []
  new: dict[UOp, UOp] = {}
  placed: set[UOp] = set()
  for u in uops:
    nu = u.replace(src=tuple(new.get(s, s) for s in u.src)) if any(s in new for s in u.src) else u
    for _ in range(64):
      if (r := pm.rewrite(nu)) is None or r is nu: break
      nu = r
    if nu is not u: new[u] = nu
    _place(nu, placed, out)
  return out

def _place(u: UOp, placed: set[UOp], out: list[UOp]) -> None:
  """Append `u` after whichever of its sources aren't placed yet (the walk stops at placed nodes: linear overall)."""
  stack = [(u, False)]
  while stack:
    n, ready = stack.pop()
    if n in placed: continue
    if ready: placed.add(n); out.append(n); continue
    stack.append((n, True))
    stack.extend((s, False) for s in reversed(n.src) if s not in placed)
