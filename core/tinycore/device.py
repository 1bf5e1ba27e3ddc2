"""Devices: the registry (`Device`), buffers, allocators and the opened-device object (`Compiled`).

Core knows no device. Names come from plugins (tinycore.plugins); which renderer, arch and interface a device
uses comes from `DEV` (tinycore.devspec), resolved here and handed to the plugin's factory."""
from __future__ import annotations
import functools, os
from collections import defaultdict
from typing import Any, TYPE_CHECKING
from tinycore.helpers import DEV, GlobalCounters
from tinycore.devspec import DevSpec, DevSpecError, parse_dev, parse_target, check_legacy_env
from tinycore.isolation import call_plugin
if TYPE_CHECKING:
  import numpy as np
  from tinycore.dtype import DType

# the user-facing errors live in tinycore.errors (one module, messages that name the fix); re-exported here for plugins
from tinycore.errors import DeviceUnavailable, UnknownDeviceError, emulator_hint, missing_module, unknown_device_hint  # noqa: F401

# ***** allocators *****

class Allocator:
  """Device memory. Subclasses implement _alloc/_free/_copyin/_copyout (sizes in bytes); handles are opaque."""
  def alloc(self, size: int, options=None) -> Any:
    if not isinstance(size, int) or size <= 0: raise ValueError(f"alloc size must be a positive int, got {size!r}")
    return self._alloc(size, options)
  def free(self, opaque, size: int, options=None) -> None: self._free(opaque, size, options)
  def _alloc(self, size: int, options=None) -> Any: raise NotImplementedError(f"{type(self).__name__} must implement _alloc")
  def _free(self, opaque, size: int, options=None) -> None: pass
  def _copyin(self, dest_opaque, src: memoryview) -> None: raise NotImplementedError(f"{type(self).__name__} must implement _copyin")
  def _copyout(self, dest: memoryview, src_opaque) -> None: raise NotImplementedError(f"{type(self).__name__} must implement _copyout")
  def _as_buffer(self, opaque) -> memoryview: raise NotImplementedError(f"{type(self).__name__} has no zero-copy host view")
  def _offset(self, opaque, size: int, offset: int) -> Any: raise NotImplementedError(f"{type(self).__name__} does not support sub-buffers")
  def _transfer(self, dest_opaque, src_opaque, size: int, src_dev: Compiled, dest_dev: Compiled) -> None:
    raise NotImplementedError(f"{type(self).__name__} has no direct device-to-device transfer")

class LRUAllocator(Allocator):
  """Keeps freed blocks by (size, options) and hands them out again: device allocation is slow, reuse is not."""
  def __init__(self):
    self.cache: dict[tuple[int, Any], list[Any]] = defaultdict(list)
    self.reuse = os.getenv("LRU", "1") != "0"   # read once: every free of an eager realize passes here
  def alloc(self, size: int, options=None) -> Any:
    if (c := self.cache.get((size, options))): return c.pop()
    try: return super().alloc(size, options)
    except MemoryError:   # the cache may be what is holding the memory
      self.free_cache()
      return super().alloc(size, options)
  def free(self, opaque, size: int, options=None) -> None:
    if self.reuse and not getattr(options, "nolru", False): self.cache[(size, options)].append(opaque)
    else: super().free(opaque, size, options)
  def free_cache(self) -> None:
    for (size, options), opaques in self.cache.items():
      for o in opaques: super().free(o, size, options)
    self.cache.clear()

# ***** buffers *****

class Buffer:
  """`size` elements of `dtype` on `device`. A view (`base` given) shares its base's memory at byte `offset`."""
  _buf: Any   # the allocator's handle, once allocated
  def __init__(self, device: str, size: int, dtype: DType, opaque=None, options=None, base: Buffer | None = None, offset: int = 0,
               compiled: Compiled | None = None):
    self.device, self.size, self.dtype, self.options, self.offset = device, size, dtype, options, offset
    # the opened device, looked up once when the buffer is allocated (or handed in by whoever already holds it): it
    # also pins the allocator, so a Context(DEV=...) change later can't send the free to another device's allocator
    self.compiled: Compiled | None = compiled
    self._base: Buffer | None = None if base is None else base.base
    # checks that guard memory: real exceptions, not asserts (python -O drops those)
    if size < 0 or offset < 0: raise ValueError(f"a buffer of {size} elements at byte offset {offset}: both must be >= 0")
    if base is not None:
      # raises, not asserts: these guard raw memory copies and must hold under `python -O` too
      if base.device != device: raise ValueError(f"view on {device} of a buffer on {base.device}")
      if not (0 <= offset and offset + self.nbytes <= self._base.nbytes):
        raise ValueError(f"view of {self.nbytes} bytes at {offset} exceeds its base of {self._base.nbytes}")
    if opaque is not None: self.allocate(opaque)
  @property
  def base(self) -> Buffer: return self._base if self._base is not None else self
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  def is_allocated(self) -> bool: return hasattr(self, "_buf")
  def ensure_allocated(self) -> Buffer: return self if self.is_allocated() else self.allocate()
  def allocate(self, opaque=None) -> Buffer:
    if self.is_allocated(): raise RuntimeError(f"{self} is already allocated")
    if self._base is not None: self.compiled = self._base.ensure_allocated().compiled   # a view lives in its base's memory
    elif self.compiled is None: self.compiled = Device[self.device]
    self.allocator = self.compiled.allocator
    if self._base is not None:
      self._buf = self.allocator._offset(self._base._buf, self.nbytes, self.offset)
    elif opaque is not None: self._buf, self._owned = opaque, False   # someone else's memory: never freed here
    else:
      self._buf, self._owned = self.allocator.alloc(max(self.nbytes, 1), self.options), True   # empty tensors still get a handle
      GlobalCounters.mem_used += self.nbytes
      GlobalCounters.mem_peak = max(GlobalCounters.mem_peak, GlobalCounters.mem_used)
    return self
  def deallocate(self) -> None:
    if not self.is_allocated(): return
    if self._base is None and self._owned:
      GlobalCounters.mem_used -= self.nbytes
      self.allocator.free(self._buf, max(self.nbytes, 1), self.options)
    del self._buf
  def __del__(self):
    try: self.deallocate()
    except Exception: pass   # interpreter shutdown: the device may already be gone
  def copyin(self, mv: memoryview) -> Buffer:
    mv = memoryview(mv).cast("B")
    if mv.nbytes != self.nbytes: raise ValueError(f"copyin of {mv.nbytes} bytes into a buffer of {self.nbytes}")
    self.ensure_allocated().allocator._copyin(self._buf, mv)
    return self
  def copyout(self, mv: memoryview) -> memoryview:
    mv = memoryview(mv).cast("B")
    if mv.nbytes != self.nbytes: raise ValueError(f"copyout of a buffer of {self.nbytes} bytes into {mv.nbytes}")
    self.ensure_allocated().compiled.synchronize()
    self.allocator._copyout(mv, self._buf)
    return mv
  def as_buffer(self) -> memoryview:
    """A host view: zero-copy when the allocator has one (CPU), otherwise a copy. A view's is that slice of its base's
    (an allocator knows the sizes of the blocks it handed out, not of views into them: several can start at one address)."""
    self.ensure_allocated()
    try:
      self.compiled.synchronize()
      if self._base is None: return self.allocator._as_buffer(self._buf)
      return memoryview(self._base.allocator._as_buffer(self._base._buf)).cast("B")[self.offset:self.offset + self.nbytes]
    except NotImplementedError: return self.copyout(memoryview(bytearray(self.nbytes)))
  def numpy(self) -> np.ndarray:
    import numpy as np
    return np.frombuffer(self.as_buffer(), dtype=self.dtype.np, count=self.size).copy()
  def view(self, size: int, dtype: DType, offset: int) -> Buffer:
    """A buffer of `size` elements of `dtype` starting `offset` bytes into this one, sharing its memory."""
    return Buffer(self.device, size, dtype, base=self.base, offset=self.offset + offset)
  def __repr__(self):
    return f"<buf device:{self.device} size:{self.size} dtype:{self.dtype}" + (f" offset:{self.offset}" if self._base is not None else "") + ">"

# ***** an opened device *****

class Compiled:
  """An opened device. `runtime(name, lib) -> Program`, where a Program is called as
  `prg(*bufs, global_size=(1,1,1), local_size=(1,1,1), vals=(), wait=False) -> float|None` (seconds when wait).
  `graph(kernels, inputs) -> replay`, optional: launches a TinyJit batch of kernels in one call (engine/jit_graph.py)."""
  def __init__(self, device: str, allocator: Allocator, renderer, runtime, graph=None):
    self.device, self.allocator, self.renderer, self.runtime, self.graph = device, allocator, renderer, runtime, graph
    self.spec: DevSpec | None = None     # filled in by the registry: the resolved DEV target
    self.plugin = None                   # the PluginRecord of the plugin that opened it
  @property
  def compiler(self): return getattr(self.renderer, "compiler", None)
  def synchronize(self) -> None: pass
  def __repr__(self): return f"<Compiled {self.device} {self.spec or ''}>"

# ***** the registry *****

def _suggest(name: str, names) -> str:
  import difflib   # only for an error message: ~0.2 MiB that a process which never mistypes a name needn't hold
  near = difflib.get_close_matches(name.upper(), [n.upper() for n in names], 1, 0.5)
  return f" Did you mean {near[0]!r}?" if near else ""

@functools.lru_cache(None)
def _targets(dev: str) -> tuple[DevSpec, ...]: return parse_dev(dev)

class _Device:
  """`Device["CPU"]`, `Device["NV:1"]`, `Device["EMU+NV"]` open (once) and return a `Compiled`; `Device.DEFAULT` is the default."""
  def __init__(self):
    self._opened: dict[tuple[str, int], Compiled] = {}
    # resolved once per (name, DEV value, plugin registry): a lookup is a dict hit, not a DEV parse and plugin hook calls
    self._resolved: dict[tuple, Compiled] = {}
    self._defaults: dict[tuple, str] = {}
    self._aliases: dict[tuple, str] = {}
    self._auto: str | None = None
    self._default_iface: dict[str, str] = {}
  @staticmethod
  def _plugins():
    from tinycore import plugins
    return plugins.registry

  def canonicalize(self, name: str) -> str:
    """'cpu' -> 'CPU', 'cpu:0' -> 'CPU', 'nv:1' -> 'NV:1'. Non-index suffixes (e.g. 'DISK:/path') are kept as written."""
    head, colon, tail = name.partition(":")
    if "+" in head or (tail and not tail.isdigit() and tail.split(":")[0].isidentifier()): return str(parse_target(name))
    return self._canonical_name(head.upper()) + ("" if not colon or tail == "0" else ":" + tail)

  def _canonical_name(self, name: str) -> str:
    """A device alias ('GPU' for CL) as the name its plugin registered, so tensors made with either share a device.
    Cached; a name no plugin knows stays as it is (the error comes when it is opened)."""
    reg = self._plugins()
    if (hit := self._aliases.get(key := (name, reg.pm))) is not None: return hit
    try: found = reg.devices().get(name) or reg.find_device(name)
    except Exception: found = None
    self._aliases[key] = out = found[0].name.upper() if found is not None else name
    return out

  def installed(self) -> list[str]:
    """Names of every device that installed, enabled plugins provide."""
    return self._plugins().device_names()

  def _unknown(self, what: str, name: str, have, device: str = "") -> UnknownDeviceError:
    reg, where = self._plugins(), f" for {device}" if device else ""
    msg = f"unknown {what} {name!r}{where}. Installed: {', '.join(sorted(have)) or 'none'}.{_suggest(name, have)}"
    if what == "device":
      bad = [r for r in reg.records.values() if r.status in ("broken", "skipped")]
      if bad: msg += " Not loaded: " + "; ".join(f"{r.name} ({f'{r.dist} {r.version}'.strip()}) {r.status}: {r.reason}" for r in bad) + "."
      if (off := [r for r in reg.records.values() if r.status == "disabled"]):
        msg += f" Disabled: {', '.join(r.name for r in off)} ({'; '.join(sorted({r.reason for r in off}))})."
      msg += unknown_device_hint(name, {r.dist for r in reg.records.values()})
    return UnknownDeviceError(msg)

  def resolve(self, spec: DevSpec) -> DevSpec:
    """Check `spec` against what is installed and fill in default interface and renderer; canonical names only."""
    reg = self._plugins()
    if (hit := reg.find_device(spec.device)) is None: raise self._unknown("device", spec.device, reg.device_names())
    info = hit[0]
    ifaces = reg.interfaces(info.name)
    if spec.iface == "NULL": iface = None   # core's compile-only mode exists for every device (tinycore.nulldev)
    elif spec.iface is None:
      iface = next((i for i in ifaces if i.default), None) or next((i for i in ifaces if i.kind == "real"), None) or ifaces[0]
    elif (iface := next((i for i in ifaces if i.name.upper() == spec.iface), None)) is None:
      raise self._unknown("interface", spec.iface, [i.name for i in ifaces], info.name)
    rens = reg.renderers(info.name)
    by_name = {n.upper(): r for r in rens for n in (r.name, *r.aliases)}
    if spec.renderer is None: ren = next((r for r in rens if r.default), rens[0] if rens else None)
    elif (ren := by_name.get(spec.renderer)) is None: raise self._unknown("renderer", spec.renderer, [r.name for r in rens], info.name)
    self._default_iface[info.name.upper()] = (next((i for i in ifaces if i.default), None) or ifaces[0]).name.upper()
    return spec.replace(device=info.name.upper(), iface=iface.name.upper() if iface is not None else "NULL",
                        renderer=ren.name.upper() if ren else spec.renderer)

  def dev_string(self, spec: DevSpec) -> str:
    """The DEV= a user types for a resolved spec: the default interface is left out."""
    if spec.iface is not None and spec.indices is None and self._default_iface.get(spec.device) == spec.iface: spec = spec.replace(iface=None)
    return str(spec)

  def renderer_for(self, name: str):
    """The RendererInfo that DEV selects for device `name` (None when the device declares no renderers)."""
    from tinycore.renderer.build import renderer_info
    return renderer_info(self.spec_for(name)[0])

  def spec_for(self, name: str) -> tuple[DevSpec, int]:
    """The DEV target a device name uses (its entry in DEV, else the plugin defaults) and its index."""
    check_legacy_env()
    head, _, tail = name.partition(":")
    if "+" in head or (tail and not tail.isdigit()): spec, idx = parse_target(name), 0
    else:
      base, idx = head.upper(), int(tail or 0)
      if not base.isidentifier(): raise DevSpecError(f"malformed device name {name!r}: expected DEVICE or DEVICE:INDEX, e.g. 'CPU' or 'NV:1'")
      spec = next((t for t in _targets(DEV.value) if t.device == base), DevSpec(base))
    return self.resolve(spec), idx

  def __getitem__(self, name: str) -> Compiled:
    if (dev := self._resolved.get(key := (name, DEV.value, self._plugins().pm))) is not None: return dev
    self._resolved[key] = dev = self._open(name)
    return dev

  def _open(self, name: str) -> Compiled:
    spec, idx = self.spec_for(name)
    if (dev := self._opened.get(key := (str(spec), idx))) is not None: return dev
    info, rec = self._plugins().find_device(spec.device)
    dname = spec.device + (f":{idx}" if idx else "")
    from tinycore.renderer.build import renderer_info
    try:
      # compile-only and emulated devices are core's to open, from what the plugin declares
      if spec.iface == "NULL":
        from tinycore.nulldev import open_null
        dev = open_null(dname, spec, renderer_info(spec))
      elif spec.iface == "EMU":
        from tinycore.emudev import open_emu
        dev = open_emu(dname, spec, renderer_info(spec))
      else: dev = call_plugin(info.factory, dname, spec)   # SystemExit & co. from plugin code arrive as PluginError
    except ModuleNotFoundError as e: raise missing_module(e, f"{dname} (DEV={self.dev_string(spec)})", rec.dist) from None
    except DeviceUnavailable as e:
      err = DeviceUnavailable(f"{dname} (DEV={self.dev_string(spec)}) is not available on this machine: {e}".rstrip(".") + "."
                              + emulator_hint(spec.device, spec.iface))
      err.cause = e
      raise err from None   # the reason is the message; the plugin's stack adds nothing for the user
    except Exception as e:
      raise RuntimeError(f"{dname} (DEV={self.dev_string(spec)}): plugin {rec.name} ({rec.dist} {rec.version}) failed to open it: "
                         f"{type(e).__name__}: {e}") from e
    dev.spec, dev.plugin = spec, rec
    self._opened[key] = dev
    return dev

  def open_devices(self) -> list[Compiled]: return list(self._opened.values())

  def _select_default(self) -> str:
    errors = []
    for name in self._plugins().default_order():   # imports a plugin only when its device is next in line
      try:
        self[name]
        return name
      except Exception as e: errors.append(f"{name}: {e}")
    raise RuntimeError("no device could be opened" + (":\n  " + "\n  ".join(errors) if errors else
                       "; no backend plugin is installed (e.g. `pip install ./plugins/cpu` for tinycore-cpu)"))

  @property
  def DEFAULT(self) -> str:
    """The default device name without renderer: the first DEV target, else the highest-priority device that opens."""
    if (d := self._defaults.get(key := (DEV.value, self._plugins().pm))) is not None: return d
    self._defaults[key] = d = self._default()
    return d
  @DEFAULT.setter
  def DEFAULT(self, name: str) -> None:
    new, ts = parse_target(name), _targets(DEV.value)
    if ts and (ts[0] == new or (ts[0].device == new.device and str(new) == new.device)): return   # keep DEV's renderer
    DEV.value = ";".join([str(new)] + [str(t) for t in ts if t.device != new.device])

  def _default(self) -> str:
    check_legacy_env()
    if (ts := _targets(DEV.value)):
      reg = self._plugins()
      if (hit := reg.find_device(ts[0].device)) is None: raise self._unknown("device", ts[0].device, reg.device_names())
      self[name := hit[0].name.upper()]   # DEV names it: a device that can't open says so here, not at the first allocation
      return name
    if self._auto is None: self._auto = self._select_default()
    return self._auto
  def reset(self) -> None:
    """Forget opened devices and the chosen default (tests, or after installing a plugin)."""
    self._opened.clear()
    self._resolved.clear(); self._defaults.clear(); self._aliases.clear()
    self._auto = None
    from tinycore.engine import schedule_cache
    schedule_cache.clear()   # its entries hold opened devices for the buffers they create

Device = _Device()
