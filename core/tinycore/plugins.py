"""Backend plugins: pluggy hookspecs, entry-point discovery, API compatibility and per-plugin isolation.

Discovery is two-phase. `discover()` lists the `tinycore.backends` entry points (name, distribution, version) and
imports nothing. `load(name)` imports one plugin's light module, checks its `TINYCORE_PLUGIN_API = (min, max)` against
`PLUGIN_API`, validates its hooks and registers it. Any failure marks that one plugin skipped or broken, with a
warning that names the distribution, its version and the cause; nothing else is affected."""
from __future__ import annotations
import os, sys, inspect, difflib, warnings, importlib
from dataclasses import dataclass, field
from typing import Any, Callable
import pluggy

PROJECT, GROUP = "tinycore", "tinycore.backends"
PLUGIN_API = 1   # bump when a hookspec or a base class a plugin relies on changes incompatibly
hookspec, hookimpl = pluggy.HookspecMarker(PROJECT), pluggy.HookimplMarker(PROJECT)

# ***** what hooks return *****

@dataclass(frozen=True)
class DeviceInfo:
  """A device a plugin provides. `factory(device_name, spec)` opens it and returns a `tinycore.device.Compiled`;
  it should raise `tinycore.device.DeviceUnavailable(reason)` when the machine lacks what the device needs.
  `kind`: 'real' devices take part in default selection, 'emulator' and 'compile-only' never do."""
  name: str
  factory: Callable[..., Any]
  priority: int = 0
  kind: str = "real"
  aliases: tuple[str, ...] = ()
  description: str = ""

@dataclass(frozen=True)
class RendererInfo:
  """A renderer selectable with `DEV=DEVICE:NAME`. `load` is the Renderer class, a 'module:attr' string, or a
  zero-argument callable returning the class, so listing renderers imports no compiler."""
  name: str
  load: Any = None
  aliases: tuple[str, ...] = ()
  archs: tuple[str, ...] = ()
  default: bool = False
  description: str = ""
  def get(self) -> Any:
    if isinstance(self.load, str):
      mod, _, attr = self.load.partition(":")
      obj = importlib.import_module(mod)
      for a in attr.split(".") if attr else (): obj = getattr(obj, a)
      return obj
    if inspect.isclass(self.load) or self.load is None: return self.load
    return self.load()

def _as(cls, x):
  return x if isinstance(x, cls) else cls(**x) if isinstance(x, dict) else x

# ***** hookspecs *****

class Hooks:
  """The hooks a backend plugin may implement. Each is optional; return None for a device you do not know."""
  @hookspec
  def tinycore_devices(self) -> list[DeviceInfo]:
    """The devices this plugin provides (DeviceInfo or dicts with the same fields)."""
  @hookspec
  def tinycore_renderers(self, device: str) -> list[RendererInfo] | None:
    """Renderers for `device` (upper-case name); exactly one should be `default=True`."""
  @hookspec
  def tinycore_interfaces(self, device: str) -> list[Any] | None:
    """`tinycore.interface.Interface` instances (or classes) through which `device` is reached."""
  @hookspec
  def tinycore_probe(self) -> list[dict] | None:
    """Physical devices present, found without opening them: [{'device': 'NV', 'bus': '0000:01:00.0', ...}]."""
  @hookspec
  def tinycore_smi(self, device: str) -> list[dict] | None:
    """Live telemetry, one dict per physical device: index, name, mem_used, mem_total (bytes), util (%),
    temp_c, power_w, clock_mhz, processes — omit what the platform does not expose."""
  @hookspec
  def tinycore_rewrite_rules(self, device: str, stage: str) -> Any:
    """An extra PatternMatcher (or list of them) for `device` at pipeline stage `stage`, or None."""
  @hookspec
  def tinycore_emulator(self, device: str, arch: str | None) -> Any:
    """The device's execution model for the shared emulator (warp size, local memory, tensor-core layouts), or None."""

HOOKS: dict[str, tuple[str, ...]] = {n: tuple(inspect.signature(f).parameters)[1:] for n, f in vars(Hooks).items() if n.startswith("tinycore_")}

class PluginWarning(UserWarning):
  """A plugin was skipped or is broken; the message names it, its distribution and version, and why."""

class _Manager(pluggy.PluginManager):
  # a plugin module may define plain `tinycore_*` functions without importing our marker: that keeps it light
  def parse_hookimpl_opts(self, plugin, name):
    opts = super().parse_hookimpl_opts(plugin, name)
    if opts is None and name in HOOKS and inspect.isroutine(getattr(plugin, name, None)):
      opts = {"wrapper": False, "hookwrapper": False, "optionalhook": False, "tryfirst": False, "trylast": False, "specname": None}
    return opts

# ***** records *****

@dataclass
class PluginRecord:
  """What `tinyctl plugins` shows. status: listed (found, not imported yet), loaded, skipped, broken, disabled."""
  name: str
  dist: str = "(manual)"
  version: str = ""
  value: str = ""
  status: str = "listed"
  api: tuple[int, int] | None = None
  reason: str = ""
  cause: BaseException | None = field(default=None, repr=False)
  plugin: Any = field(default=None, repr=False)
  entry_point: Any = field(default=None, repr=False)
  def cause_chain(self) -> list[str]:
    """The cause and everything chained under it, one 'Type: message' line each."""
    out, e, seen = [], self.cause, set()
    while e is not None and id(e) not in seen:
      seen.add(id(e)); out.append(f"{type(e).__name__}: {e}")
      e = e.__cause__ or e.__context__
    return out
  def as_dict(self) -> dict:
    return {"name": self.name, "dist": self.dist, "version": self.version, "value": self.value, "status": self.status,
            "api": list(self.api) if self.api else None, "reason": self.reason, "cause": self.cause_chain()}

def _norm(s: str) -> str:
  s = s.lower().replace("_", "-")
  return s[len("tinycore-"):] if s.startswith("tinycore-") else s

def _env_list(key: str) -> set[str] | None:
  v = os.environ.get(key)
  return None if v is None else {_norm(x.strip()) for x in v.split(",") if x.strip()}

class PluginIncompatible(Exception): pass
class PluginInvalid(Exception): pass

def check_api(api: Any, where: str = "plugin") -> tuple[int, int]:
  """Validate a TINYCORE_PLUGIN_API declaration and check it admits this core's PLUGIN_API."""
  if api is None: raise PluginInvalid(f"{where} does not declare TINYCORE_PLUGIN_API = (min, max)")
  if not (isinstance(api, (tuple, list)) and len(api) == 2 and all(isinstance(x, int) for x in api) and api[0] <= api[1]):
    raise PluginInvalid(f"{where} declares TINYCORE_PLUGIN_API = {api!r}; expected a (min, max) pair of ints")
  if not api[0] <= PLUGIN_API <= api[1]:
    raise PluginIncompatible(f"supports plugin API {api[0]}..{api[1]} but this tinycore has PLUGIN_API {PLUGIN_API}")
  return (api[0], api[1])

def check_hooks(plugin: Any) -> None:
  """Every `tinycore_*` routine must be a known hook whose parameters are a subset of the hookspec's."""
  for n in dir(plugin):
    if not n.startswith("tinycore_") or not inspect.isroutine(fn := getattr(plugin, n, None)): continue
    if n not in HOOKS:
      near = difflib.get_close_matches(n, HOOKS, 1)
      raise PluginInvalid(f"unknown hook {n}" + (f" (did you mean {near[0]}?)" if near else "") + f"; hooks are {', '.join(HOOKS)}")
    try: params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError) as e: raise PluginInvalid(f"hook {n} has no inspectable signature") from e
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
      raise PluginInvalid(f"hook {n} must name its parameters, not take *args/**kwargs; expected {n}({', '.join(HOOKS[n])})")
    if extra := [p.name for p in params if p.name not in HOOKS[n]]:
      raise PluginInvalid(f"hook {n} takes unknown parameter(s) {', '.join(extra)}; expected {n}({', '.join(HOOKS[n])})")

# ***** the registry *****

class _Registry:
  def __init__(self): self.reset()
  def reset(self):
    """Forget everything (tests): the next use discovers entry points again."""
    self.pm = _Manager(PROJECT)
    self.pm.add_hookspecs(Hooks)
    self.records: dict[str, PluginRecord] = {}
    self.discovered, self._devices = False, None

  def discover(self) -> list[PluginRecord]:
    """Phase 1: list entry points. Imports no plugin."""
    if self.discovered: return list(self.records.values())
    self.discovered = True
    from importlib.metadata import entry_points
    allow, deny = _env_list("TINYCORE_PLUGINS"), _env_list("TINYCORE_DISABLE_PLUGINS") or set()
    noauto = os.environ.get("TINYCORE_DISABLE_PLUGIN_AUTOLOAD", "") not in ("", "0")
    for ep in entry_points(group=GROUP):
      if ep.name in self.records: continue   # the same distribution seen twice on sys.path
      dist = getattr(ep, "dist", None)
      r = PluginRecord(ep.name, dist.metadata["Name"] if dist else "(unknown)", dist.version if dist else "", ep.value, entry_point=ep)
      keys = {_norm(r.name), _norm(r.dist)}
      if noauto: r.status, r.reason = "disabled", "TINYCORE_DISABLE_PLUGIN_AUTOLOAD is set"
      elif allow is not None and not keys & allow: r.status, r.reason = "disabled", "not in TINYCORE_PLUGINS"
      elif keys & deny: r.status, r.reason = "disabled", "in TINYCORE_DISABLE_PLUGINS"
      self.records[r.name] = r
    return list(self.records.values())

  def _fail(self, r: PluginRecord, status: str, reason: str, cause: BaseException | None) -> PluginRecord:
    r.status, r.reason, r.cause = status, reason, cause
    why = reason + "".join(f"; caused by {c}" for c in r.cause_chain() if c not in reason)
    warnings.warn(f"tinycore: plugin {r.name!r} from {r.dist} {r.version or '(no version)'} {status}: {why}", PluginWarning, stacklevel=3)
    return r

  def _register(self, r: PluginRecord, plugin: Any) -> PluginRecord:
    where = f"{r.dist} {r.version}".strip()
    try:
      r.api = check_api(getattr(plugin, "TINYCORE_PLUGIN_API", None), where)
      check_hooks(plugin)
      self.pm.register(plugin, name=r.name)
    except PluginIncompatible as e: return self._fail(r, "skipped", str(e), e)
    except Exception as e: return self._fail(r, "broken", f"invalid plugin: {e}", e)
    r.status, r.plugin, self._devices = "loaded", plugin, None
    return r

  def load(self, name: str) -> PluginRecord:
    """Phase 2: import and register one listed plugin (idempotent)."""
    self.discover()
    r = self.records[name]
    if r.status != "listed": return r
    try: plugin = r.entry_point.load()
    except Exception as e: return self._fail(r, "broken", f"import of {r.value} failed", e)
    return self._register(r, plugin)

  def load_all(self) -> list[PluginRecord]:
    for r in self.discover(): self.load(r.name)
    return list(self.records.values())

  def register(self, plugin: Any, name: str | None = None) -> PluginRecord:
    """Add a plugin by hand (a module, class or object with tinycore_* hooks). Same checks as entry points."""
    self.discover()
    name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
    if name in self.records and self.records[name].status == "loaded": raise ValueError(f"plugin {name!r} is already registered")
    mod = sys.modules.get(getattr(plugin, "__module__", "") or "")
    r = PluginRecord(name, value=getattr(plugin, "__name__", repr(plugin)), version=str(getattr(plugin, "__version__", getattr(mod, "__version__", ""))))
    self.records[name] = r
    return self._register(r, plugin)

  def unregister(self, name: str) -> None:
    r = self.records.pop(name)
    if r.status == "loaded": self.pm.unregister(name=name)
    self._devices = None

  def call(self, hook: str, **kw) -> list[tuple[PluginRecord, Any]]:
    """Call `hook` on each loaded plugin separately, so one raising plugin cannot hide the others' answers.
    A plugin that raises is reported with a warning; results that are None are dropped."""
    out = []
    for impl in reversed(getattr(self.pm.hook, hook).get_hookimpls()):   # registration order
      r = self.records.get(impl.plugin_name) or PluginRecord(impl.plugin_name)
      try: res = impl.function(**{k: kw[k] for k in impl.argnames})
      except Exception as e:
        warnings.warn(f"tinycore: plugin {r.name!r} from {r.dist} {r.version} raised in {hook}: {type(e).__name__}: {e}", PluginWarning, stacklevel=2)
        continue
      if res is not None: out.append((r, res))
    return out

  # ***** derived tables *****
  def devices(self) -> dict[str, tuple[DeviceInfo, PluginRecord]]:
    """Every device of every loaded plugin, by upper-case name and alias."""
    if self._devices is None:
      table: dict[str, tuple[DeviceInfo, PluginRecord]] = {}
      for r, infos in self.call("tinycore_devices"):
        try: infos = [_as(DeviceInfo, x) for x in infos]
        except Exception as e:   # a malformed answer costs that plugin its devices, nobody else's
          self._fail(r, "broken", f"tinycore_devices returned something that is not a list of DeviceInfo: {e}", e)
          continue
        for info in infos:
          for n in (info.name, *info.aliases):
            if n.upper() in table:
              warnings.warn(f"tinycore: device {n} from plugin {r.name!r} ignored, already provided by {table[n.upper()][1].name!r}", PluginWarning)
            else: table[n.upper()] = (info, r)
      self._devices = table
    return self._devices

  def find_device(self, name: str) -> tuple[DeviceInfo, PluginRecord] | None:
    """Load only as much as needed: the plugin named like the device first, then everything."""
    name = name.upper()
    if (hit := self.devices().get(name)) is not None: return hit
    self.discover()
    if name.lower() in self.records and self.records[name.lower()].status == "listed":
      self.load(name.lower())
      if (hit := self.devices().get(name)) is not None: return hit
    self.load_all()
    return self.devices().get(name)

  def renderers(self, device: str) -> list[RendererInfo]:
    out = []
    for r, xs in self.call("tinycore_renderers", device=device.upper()):
      try: out += [_as(RendererInfo, x) for x in xs]
      except Exception as e: warnings.warn(f"tinycore: plugin {r.name!r} from {r.dist} {r.version}: bad tinycore_renderers answer: {e}", PluginWarning)
    return out

  def interfaces(self, device: str) -> list[Any]:
    from tinycore.interface import HostInterface
    out = [x() if inspect.isclass(x) else x for _, xs in self.call("tinycore_interfaces", device=device.upper()) for x in xs]
    return out or [HostInterface()]

registry = _Registry()
discover, load, load_all, register, unregister, call = registry.discover, registry.load, registry.load_all, registry.register, registry.unregister, registry.call
def plugin_status(import_plugins: bool = True) -> list[PluginRecord]:
  """One record per plugin; with import_plugins every enabled plugin is imported first so its status is final."""
  return registry.load_all() if import_plugins else registry.discover()
def reset() -> None: registry.reset()
