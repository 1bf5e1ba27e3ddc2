"""Backend plugins: pluggy hookspecs, entry-point discovery, API compatibility and per-plugin isolation.

Discovery is two-phase. `discover()` lists the `tinycore.backends` entry points (name, distribution, version) and
the devices each distribution declares in `tinycore.devices` (`NV = "nv:100"`: device, plugin, default priority),
and imports nothing. `load(name)` imports one plugin's light module, checks its `TINYCORE_PLUGIN_API = (min, max)`
against `PLUGIN_API`, validates its hooks and registers it. A plugin is imported only when one of its devices is
used: the default device is found by trying devices in priority order, importing each plugin when its device is next.

Plugin code (imports, hooks, factories) is isolated: anything it raises, BaseException included (SystemExit,
GeneratorExit, a KeyboardInterrupt it raises itself), marks that one plugin broken or that one answer lost, with a
warning that names the distribution, its version and the cause. Only the user's own Ctrl-C (a real SIGINT) passes."""
from __future__ import annotations
import re, sys, time, inspect, warnings, importlib
from dataclasses import dataclass, field
from typing import Any, Callable
import pluggy
from tinycore.helpers import env_value
from tinycore.entry_points import Dist
from tinycore.isolation import PluginWarning, PluginError, SigintWatch, run_isolated, call_plugin, cause_chain   # noqa: F401 (re-exported)

PROJECT, GROUP, DEVICES_GROUP = "tinycore", "tinycore.backends", "tinycore.devices"
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
    """The renderer class; importing or calling plugin code here raises Exceptions or PluginError, never SystemExit."""
    if isinstance(self.load, str):
      mod, _, attr = self.load.partition(":")
      obj = call_plugin(importlib.import_module, mod)
      for a in attr.split(".") if attr else (): obj = getattr(obj, a)
      return obj
    if inspect.isclass(self.load) or self.load is None: return self.load
    return call_plugin(self.load)

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
  @hookspec
  def tinycore_collectives(self, device: str) -> list[Any] | None:
    """Collective engines (tinycore.distributed.engine.CollectiveEngine subclasses) that act on `device`'s buffers
    across processes, best first; core falls back to its host engine (MPI through mpi4py) when none answers."""

HOOKS: dict[str, tuple[str, ...]] = {n: tuple(inspect.signature(f).parameters)[1:] for n, f in vars(Hooks).items() if n.startswith("tinycore_")}

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
  """What `tinyctl plugins` shows. status: listed (found, not imported yet), loaded, skipped, broken, disabled;
  `shown_status` adds hook-failed: loaded, but a hook raised or answered something unusable (see hook_errors)."""
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
  declared: dict[str, int] = field(default_factory=dict)   # device -> default priority, from `tinycore.devices` metadata
  declaration_error: str = ""                              # why its declarations were ignored (then it counts as undeclared)
  hook_errors: dict[str, BaseException] = field(default_factory=dict, repr=False)   # hook -> what it raised (the last time)
  import_s: float | None = None
  @property
  def shown_status(self) -> str: return "hook-failed" if self.status == "loaded" and self.hook_errors else self.status
  def cause_chain(self) -> list[str]:
    """The cause and everything chained under it, one 'Type: message' line each."""
    return cause_chain(self.cause)
  def as_dict(self) -> dict:
    return {"name": self.name, "dist": self.dist, "version": self.version, "value": self.value, "status": self.shown_status,
            "api": list(self.api) if self.api else None, "reason": self.reason, "cause": self.cause_chain(),
            "devices": self.declared, "import_s": self.import_s, "hook_errors": {h: cause_chain(e) for h, e in self.hook_errors.items()}}

def _norm(s: str) -> str:
  s = s.lower().replace("_", "-")
  return s[len("tinycore-"):] if s.startswith("tinycore-") else s

def _env_list(key: str) -> set[str] | None:
  v = env_value(key, None)
  return None if v is None else {_norm(x.strip()) for x in v.split(",") if x.strip()}

def _entry_points() -> list:
  """Our two groups' entry points (tinycore/entry_points.py: read from the dist-info folders, without importlib.metadata);
  a distribution with unreadable metadata is skipped with a warning instead of hiding every other plugin."""
  from tinycore.entry_points import entry_points
  return entry_points((GROUP, DEVICES_GROUP), lambda why: warnings.warn(f"tinycore: skipped a distribution with unreadable entry points at {why}",
                                                                        PluginWarning))

def _dist_of(ep) -> tuple[str, str]:
  dist = getattr(ep, "dist", None)
  if dist is None: return "(unknown)", ""
  if isinstance(dist, Dist): return dist.name or "(unknown)", dist.version
  try: return str(dist.metadata["Name"] or "(unknown)"), str(dist.version or "")
  except Exception: return "(unknown)", ""

class PluginIncompatible(Exception): pass
class PluginInvalid(Exception): pass

def check_api(api: Any, where: str = "plugin") -> tuple[int, int]:
  """Validate a TINYCORE_PLUGIN_API declaration and check it admits this core's PLUGIN_API."""
  if api is None: raise PluginInvalid(f"{where} does not declare TINYCORE_PLUGIN_API = (min, max)")
  if not (isinstance(api, (tuple, list)) and len(api) == 2 and all(type(x) is int for x in api) and api[0] <= api[1]):
    raise PluginInvalid(f"{where} declares TINYCORE_PLUGIN_API = {api!r}; expected a (min, max) pair of ints")
  if not api[0] <= PLUGIN_API <= api[1]:
    raise PluginIncompatible(f"supports plugin API {api[0]}..{api[1]} but this tinycore has PLUGIN_API {PLUGIN_API}")
  return (api[0], api[1])

def check_hooks(plugin: Any) -> None:
  """Every `tinycore_*` routine must be a known hook whose parameters are a subset of the hookspec's."""
  for n in dir(plugin):
    if not n.startswith("tinycore_") or not inspect.isroutine(fn := getattr(plugin, n, None)): continue
    if n not in HOOKS:
      import difflib   # only for the error message
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
    self.discovered, self._failures = False, 0
    self._forget_answers()

  def _forget_answers(self) -> None:
    """Answers are cached (every op looks up its device's renderers and interfaces) until the set of plugins changes."""
    self._devices: dict | None = None
    self._answers: dict[tuple[str, str], list] = {}

  def discover(self) -> list[PluginRecord]:
    """Phase 1: list entry points and device declarations. Imports no plugin."""
    if self.discovered: return list(self.records.values())
    self.discovered = True
    allow, deny = _env_list("TINYCORE_PLUGINS"), _env_list("TINYCORE_DISABLE_PLUGINS") or set()
    noauto = env_value("TINYCORE_DISABLE_PLUGIN_AUTOLOAD", False)
    eps = _entry_points()
    for ep in [ep for ep in eps if ep.group == GROUP]:
      if ep.name in self.records: continue   # the same distribution seen twice on sys.path
      r = PluginRecord(ep.name, *_dist_of(ep), ep.value, entry_point=ep)
      keys = {_norm(r.name), _norm(r.dist)}
      if noauto: r.status, r.reason = "disabled", "TINYCORE_DISABLE_PLUGIN_AUTOLOAD is set"
      elif allow is not None and not keys & allow: r.status, r.reason = "disabled", "not in TINYCORE_PLUGINS"
      elif keys & deny: r.status, r.reason = "disabled", "in TINYCORE_DISABLE_PLUGINS"
      self.records[r.name] = r
    for ep in [ep for ep in eps if ep.group == DEVICES_GROUP]: self._declare(ep)
    return list(self.records.values())

  def _declare(self, ep) -> None:
    """`DEVICE = "plugin:priority"` in `tinycore.devices`: DEVICE comes from that plugin of the same distribution."""
    plugin, _, prio = (x.strip() for x in ep.value.partition(":"))
    r, dist = self.records.get(plugin), _dist_of(ep)[0]
    if r is None or r.dist != dist: why = f"{dist} has no plugin {plugin!r}"
    elif not ep.name.isidentifier() or not re.fullmatch(r"-?[0-9]+", prio): why = 'expected DEVICE = "plugin:priority" with an integer priority'
    else:
      if not r.declaration_error: r.declared.setdefault(ep.name.upper(), int(prio))   # declared twice: the first counts
      return
    warnings.warn(f"tinycore: ignored the device declaration {ep.name} = {ep.value!r} of {dist}: {why}", PluginWarning)
    if r is not None and r.dist == dist:   # its list may be incomplete: treat the plugin as one that declares nothing
      r.declared, r.declaration_error = {}, why

  def _fail(self, r: PluginRecord, status: str, reason: str, cause: BaseException | None) -> PluginRecord:
    r.status, r.reason, r.cause = status, reason, cause
    why = reason + "".join(f"; caused by {c}" for c in r.cause_chain() if c not in reason)
    warnings.warn(f"tinycore: plugin {r.name!r} from {r.dist} {r.version or '(no version)'} {status}: {why}", PluginWarning, stacklevel=3)
    return r

  def _hook_failed(self, r: PluginRecord, hook: str, err: BaseException, what: str = "raised") -> None:
    r.hook_errors[hook] = err
    self._failures += 1
    warnings.warn(f"tinycore: plugin {r.name!r} from {r.dist} {r.version} {what} in {hook}: {type(err).__name__}: {err}", PluginWarning, stacklevel=3)

  def _register(self, r: PluginRecord, plugin: Any) -> PluginRecord:
    where = f"{r.dist} {r.version}".strip()
    def checks():   # reads the plugin's attributes: plugin code (a module __getattr__, a property) may run
      r.api = check_api(getattr(plugin, "TINYCORE_PLUGIN_API", None), where)
      check_hooks(plugin)
      self.pm.register(plugin, name=r.name)
    _, err = run_isolated(checks)
    if isinstance(err, PluginIncompatible): return self._fail(r, "skipped", str(err), err)
    if err is not None:
      return self._fail(r, "broken", f"invalid plugin: {type(err).__name__ + ': ' if not isinstance(err, Exception) else ''}{err}", err)
    r.status, r.plugin = "loaded", plugin
    self._forget_answers()
    return r

  def load(self, name: str) -> PluginRecord:
    """Phase 2: import and register one listed plugin (idempotent)."""
    self.discover()
    r = self.records[name]
    if r.status != "listed": return r
    t0 = time.perf_counter()
    plugin, err = run_isolated(r.entry_point.load)
    r.import_s = time.perf_counter() - t0
    if err is not None:
      return self._fail(r, "broken", f"import of {r.value} failed" + ("" if isinstance(err, Exception) else f": it raised {type(err).__name__}"), err)
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
    version = str(getattr(plugin, "__version__", getattr(mod, "__version__", "")))
    r = PluginRecord(name, value=getattr(plugin, "__name__", repr(plugin)), version=version)
    self.records[name] = r
    return self._register(r, plugin)

  def unregister(self, name: str) -> None:
    r = self.records.pop(name)
    if r.status == "loaded": self.pm.unregister(name=name)
    self._forget_answers()

  def call(self, hook: str, **kw) -> list[tuple[PluginRecord, Any]]:
    """Call `hook` on each loaded plugin separately, so one failing plugin cannot hide the others' answers.
    A plugin that raises (anything but the user's Ctrl-C) is reported with a warning and recorded on its record;
    results that are None are dropped."""
    out: list = []
    impls = getattr(self.pm.hook, hook).get_hookimpls()
    if not impls: return out
    with SigintWatch() as watch:
      for impl in reversed(impls):   # registration order
        r = self.records.get(impl.plugin_name) or PluginRecord(impl.plugin_name)
        try: res = impl.function(**{k: kw[k] for k in impl.argnames})
        except BaseException as e:
          watch.reraise_if_users(e)
          self._hook_failed(r, hook, e)
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

  def _listed(self) -> list[PluginRecord]:
    self.discover()
    return [r for r in self.records.values() if r.status == "listed"]

  def find_device(self, name: str) -> tuple[DeviceInfo, PluginRecord] | None:
    """Import only what can provide `name`: the plugin that declares it, else one named like it, else the plugins
    that declare nothing (their devices are unknown until imported). A declaring plugin is trusted to declare all."""
    name = name.upper()
    if (hit := self.devices().get(name)) is not None: return hit
    for who in (lambda r: name in r.declared, lambda r: r.name.upper() == name, lambda r: not r.declared):
      for r in [r for r in self._listed() if who(r)]: self.load(r.name)
      if (hit := self.devices().get(name)) is not None: return hit
    return None

  def device_names(self) -> list[str]:
    """Every device installed, enabled plugins provide, importing only the plugins that declare nothing."""
    for r in [r for r in self._listed() if not r.declared]: self.load(r.name)
    return sorted({i.name.upper() for i, _ in self.devices().values()} | {d for r in self._listed() for d in r.declared})

  def default_order(self):
    """Real devices, highest priority first, for choosing the default device. A plugin that declares its devices is
    imported only when one of them is next in line (then its own answer ranks it); the others are imported up front,
    since their priorities are unknown until then."""
    for r in [r for r in self._listed() if not r.declared]: self.load(r.name)
    tried: set[str] = set()
    while True:
      table = self.devices()
      cands = [(-i.priority, n, "") for n, (i, _) in table.items() if n == i.name.upper() and i.kind == "real" and n not in tried]
      cands += [(-p, d, r.name) for r in self._listed() for d, p in r.declared.items() if d not in tried and d not in table]
      if not cands: return
      _, dev, plugin = min(cands)
      if plugin: self.load(plugin)   # then rank again, by what it really provides
      else:
        tried.add(dev)
        yield dev

  def probe_hooks(self) -> None:
    """Call the hooks core uses for every device (devices, renderers, interfaces) so a failing one is recorded on its
    plugin before `tinyctl plugins` shows the records."""
    for dev in sorted({i.name.upper() for i, _ in self.devices().values()}):
      self.renderers(dev); self.interfaces(dev)

  def _cached(self, what: str, device: str, compute) -> list:
    if (hit := self._answers.get((what, device := device.upper()))) is not None: return list(hit)
    failures = self._failures
    ans = compute(device)
    if self._failures == failures: self._answers[what, device] = ans   # a failed hook is asked again next time
    return list(ans)
  def renderers(self, device: str) -> list[RendererInfo]: return self._cached("renderers", device, self._renderers)
  def interfaces(self, device: str) -> list[Any]: return self._cached("interfaces", device, self._interfaces)

  def _renderers(self, device: str) -> list[RendererInfo]:
    out = []
    for r, xs in self.call("tinycore_renderers", device=device.upper()):
      try: out += [_as(RendererInfo, x) for x in xs]
      except Exception as e: self._hook_failed(r, "tinycore_renderers", e, "answered something that is not a list of RendererInfo")
    return out

  def _interfaces(self, device: str) -> list[Any]:
    from tinycore.interface import HostInterface
    out = []
    for r, xs in self.call("tinycore_interfaces", device=device.upper()):
      made, err = run_isolated(lambda: [x() if inspect.isclass(x) else x for x in xs])   # instantiating runs plugin code
      if err is not None: self._hook_failed(r, "tinycore_interfaces", err, "answered something unusable")
      else: out += made
    return out or [HostInterface()]

registry = _Registry()
discover, load, load_all = registry.discover, registry.load, registry.load_all
register, unregister, call = registry.register, registry.unregister, registry.call
def plugin_status(import_plugins: bool = True) -> list[PluginRecord]:
  """One record per plugin; with import_plugins every enabled plugin is imported and its hooks called first, so its
  status (hook failures included) is final."""
  if not import_plugins: return registry.discover()
  registry.load_all()
  registry.probe_hooks()
  return list(registry.records.values())
def reset() -> None: registry.reset()
