"""The device registry (names, DEV resolution, default selection) and Buffer/Allocator, on a hand-registered fake device."""
import pytest
from tinycore import plugins, Context
from tinycore.device import Device, Buffer, DeviceUnavailable, UnknownDeviceError, LRUAllocator
from tinycore.devspec import DevSpecError
from tinycore.dtype import dtypes
from tinycore.helpers import GlobalCounters
from _fakes import FakePlugin

@pytest.fixture
def fake(no_autoload):
  p = FakePlugin()
  plugins.register(p, name="fake")
  return p

def test_canonicalize():
  assert Device.canonicalize("cpu") == "CPU" and Device.canonicalize("cpu:0") == "CPU" and Device.canonicalize("nv:1") == "NV:1"
  assert Device.canonicalize("cpu:llvm") == "CPU:LLVM" and Device.canonicalize("disk:/tmp/x") == "DISK:/tmp/x"

def test_open_and_cache(fake):
  d = Device["fake"]
  assert d.device == "FAKE" and d is Device["FAKE:0"] and d is Device["FAKE"]
  assert d.spec.renderer == "R1" and d.spec.iface == "HOST" and Device.dev_string(d.spec) == "FAKE:R1"
  d1 = Device["FAKE:1"]
  assert d1.device == "FAKE:1" and d1 is not d and len(fake.opened) == 2

def test_dev_selects_renderer_and_interface(fake):
  with Context(DEV="BUS:1+FAKE:rtwo:arch9"):
    d = Device["FAKE"]
    assert (d.spec.renderer, d.spec.arch, d.spec.iface, d.spec.indices) == ("R2", "arch9", "BUS", (1,))   # alias RTWO -> R2
    assert Device.DEFAULT == "FAKE"
  assert Device["FAKE"].spec.renderer == "R1" and Device["FAKE"] is not d
  assert Device["EMU+FAKE"].spec.iface == "EMU"

@pytest.mark.parametrize("name,err", [
  ("FAK", "unknown device 'FAK'. Installed: FAKE. Did you mean 'FAKE'?"),
  ("FAKE:R3", "unknown renderer 'R3' for FAKE. Installed: R1, R2. Did you mean 'R2'?"),
  ("BSU+FAKE", "unknown interface 'BSU' for FAKE. Installed: BUS, EMU, HOST. Did you mean 'BUS'?"),
  ("ZZZZZZ", "unknown device 'ZZZZZZ'. Installed: FAKE."),
])
def test_unknown_names(fake, name, err):
  with pytest.raises(UnknownDeviceError) as e: Device[name]
  assert str(e.value).startswith(err) and e.value.__cause__ is None

def test_unknown_lists_broken_plugins(no_autoload):
  class Bad: TINYCORE_PLUGIN_API = (7, 9)
  with pytest.warns(UserWarning): plugins.register(Bad, name="bad")
  with pytest.raises(UnknownDeviceError, match=r"Installed: none\. Not loaded: bad \(\(manual\)\) skipped: supports plugin API 7\.\.9"): Device["NV"]

def test_malformed_and_legacy(fake, monkeypatch):
  with pytest.raises(DevSpecError, match="malformed"): Device["FAKE:R1:x:y"]
  with Context(DEV="FAKE;;"):
    with pytest.raises(DevSpecError, match="empty target"): Device.DEFAULT
  monkeypatch.setenv("NV_PTX", "1")
  with pytest.raises(DevSpecError, match="use DEV=NV:PTX instead"): Device["FAKE"]

def test_unavailable_has_reason_and_no_plugin_trace(no_autoload):
  plugins.register(FakePlugin("GONE", fail="libgone.so not found"), name="gone")
  with pytest.raises(DeviceUnavailable) as e: Device["GONE"]
  assert str(e.value) == ("GONE (DEV=GONE:R1) is not available on this machine: libgone.so not found. Without the hardware, "
                          "try DEV=EMU+GONE (its pipeline run by the emulator) or DEV=NULL+GONE (compile only).")
  assert e.value.__suppress_context__ and str(e.value.cause) == "libgone.so not found"

def test_default_by_priority_skipping_unavailable_and_emulators(no_autoload):
  plugins.register(FakePlugin("LOW", priority=1), name="low")
  plugins.register(FakePlugin("EMUD", priority=1000, kind="emulator"), name="emud")
  plugins.register(FakePlugin("NULLD", priority=999, kind="compile-only"), name="nulld")
  plugins.register(FakePlugin("BROKE", priority=500, fail="no driver"), name="broke")
  plugins.register(FakePlugin("HIGH", priority=100), name="high")
  assert Device.DEFAULT == "HIGH"
  with Context(DEV="LOW"): assert Device.DEFAULT == "LOW"
  with Context(DEV="EMUD"): assert Device.DEFAULT == "EMUD"   # asked for by name: allowed
  assert Device.DEFAULT == "HIGH"

def test_default_none_opens(no_autoload):
  plugins.register(FakePlugin("BROKE", fail="no driver"), name="broke")
  with pytest.raises(RuntimeError, match="no device could be opened:\n  BROKE: .*no driver"): Device.DEFAULT

def test_default_setter(fake):
  plugins.register(FakePlugin("OTHER"), name="other")
  with Context(DEV="FAKE:R2"):
    Device.DEFAULT = "OTHER"
    assert Device.DEFAULT == "OTHER" and Device["FAKE"].spec.renderer == "R2"   # other targets keep their renderer
    Device.DEFAULT = "FAKE"
    assert Device.DEFAULT == "FAKE"

def test_buffer_roundtrip(fake):
  GlobalCounters.mem_used = 0
  b = Buffer("FAKE", 4, dtypes.float32)
  assert not b.is_allocated() and b.nbytes == 16
  b.copyin(memoryview(bytearray(b"\x00\x00\x80\x3f" * 4)))
  assert b.is_allocated() and GlobalCounters.mem_used == 16
  assert b.numpy().tolist() == [1.0] * 4
  out = bytearray(16); b.copyout(memoryview(out))
  assert out == bytearray(b"\x00\x00\x80\x3f" * 4)
  v = b.view(2, dtypes.int32, 8)
  assert v.base is b and v.offset == 8 and v.numpy().tolist() == [0x3f800000] * 2
  v.copyin(memoryview(bytearray(8)))
  assert b.numpy().tolist() == [1.0, 1.0, 0.0, 0.0]   # the view shares the base's memory
  assert bytes(b.as_buffer()) == bytes(b"\x00\x00\x80\x3f" * 2 + b"\x00" * 8)
  b.deallocate()
  assert GlobalCounters.mem_used == 0 and not b.is_allocated()

def test_buffer_wrong_sizes(fake):
  b = Buffer("FAKE", 2, dtypes.float32)
  with pytest.raises(ValueError, match="copyin of 4 bytes"): b.copyin(memoryview(bytearray(4)))
  with pytest.raises(ValueError, match="exceeds its base"): b.view(4, dtypes.float32, 0)

def test_lru_reuses_freed_blocks(fake):
  alloc = Device["FAKE"].allocator
  assert isinstance(alloc, LRUAllocator)
  Buffer("FAKE", 8, dtypes.uint8).allocate().deallocate()
  n = alloc.allocs
  Buffer("FAKE", 8, dtypes.uint8).allocate()
  assert alloc.allocs == n   # served from the cache
  alloc.free_cache()
  assert not alloc.cache

def test_lookup_is_resolved_once(fake):
  """Device[name] is a cache hit after the first lookup (no DEV parse, no plugin hooks), re-resolved when DEV changes."""
  import time
  d = Device["FAKE"]
  t0 = time.perf_counter()
  for _ in range(1000): assert Device["FAKE"] is d
  assert (time.perf_counter() - t0) / 1000 < 50e-6   # ~1-5 us; the old path parsed DEV and called hooks (~450 us)
  with Context(DEV="BUS:1+FAKE"): assert Device["FAKE"].spec.iface == "BUS" and Device["FAKE"] is not d
  assert Device["FAKE"] is d

def test_alias_names_one_device(no_autoload):
  """A device alias ('GPU' for CL in tinygrad's old spelling) canonicalizes to the registered name, so tensors made with
  either name are on one device (they used to be 'different devices')."""
  from tinycore.plugins import DeviceInfo
  class Aliased(FakePlugin):
    def tinycore_devices(self): return [DeviceInfo(self.name, self.open, self.priority, self.kind, aliases=("FK",))]
  plugins.register(Aliased(), name="fake")
  assert Device.canonicalize("fk") == "FAKE" and Device.canonicalize("FK:1") == "FAKE:1" and Device.canonicalize("fake") == "FAKE"
  assert Device.canonicalize("unknownthing") == "UNKNOWNTHING"   # unknown names stay; opening them is the error
