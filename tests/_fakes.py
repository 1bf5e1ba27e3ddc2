"""A hand-registered fake device: host memory, no compiler. Enough for registry and Buffer tests."""
from tinycore.device import LRUAllocator, Compiled, DeviceUnavailable
from tinycore.interface import Interface
from tinycore.plugins import DeviceInfo, RendererInfo
from tinycore.renderer import Renderer

class FakeAllocator(LRUAllocator):
  def __init__(self):
    super().__init__()
    self.allocs = 0
  def _alloc(self, size, options=None):
    self.allocs += 1
    return memoryview(bytearray(size))
  def _copyin(self, dest, src): dest[:] = src
  def _copyout(self, dest, src): dest[:] = src
  def _as_buffer(self, opaque): return opaque
  def _offset(self, opaque, size, offset): return opaque[offset:offset + size]

class Emu(Interface): name, kind = "EMU", "emulator"
class FakeRenderer(Renderer): name = "R1"   # EMU+FAKE: core builds it for the emulator
class Host(Interface): name, default = "HOST", True
class Bus(Interface):
  name = "BUS"
  def count(self): return 2

class FakePlugin:
  """Device `name` with renderers R1 (default) and R2 (alias RTWO), interfaces HOST, BUS, EMU."""
  TINYCORE_PLUGIN_API = (1, 1)
  def __init__(self, name="FAKE", priority=5, kind="real", fail=None):
    self.name, self.priority, self.kind, self.fail, self.opened = name, priority, kind, fail, []
  def tinycore_devices(self): return [DeviceInfo(self.name, self.open, self.priority, self.kind)]
  def tinycore_renderers(self, device):
    return [RendererInfo("R1", load=FakeRenderer, default=True), RendererInfo("R2", aliases=("RTWO",))] if device == self.name else None
  def tinycore_interfaces(self, device): return [Host(), Bus(), Emu()] if device == self.name else None
  def tinycore_smi(self, device): return [{"device": self.name, "index": 0, "mem_used": 1, "mem_total": 2}] if device == self.name else None
  def open(self, name, spec):
    if self.fail: raise DeviceUnavailable(self.fail)
    self.opened.append((name, spec))
    return Compiled(name, FakeAllocator(), None, None)
