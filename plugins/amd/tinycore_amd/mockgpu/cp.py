"""The mock command processor: reads an AQL queue from its read index up to the packet the doorbell names, runs each
kernel-dispatch packet on the ISA emulator, honours barrier-AND packets, and completes every packet's signal the way
the hardware does (decrement the value, write the event id to the mailbox, raise the event)."""
from __future__ import annotations
import ctypes, hashlib, inspect, json, os, struct, time
from dataclasses import dataclass, field
from tinycore_amd.kfd import aql, loader
from tinycore_amd.mockgpu.memory import MockGPUMemory

class MockGPUError(RuntimeError):
  """A packet the mock GPU could not run: a malformed packet, a kernel the emulator rejected, a memory fault."""

@dataclass
class MockQueue:
  queue_id: int
  gpu: dict                 # the topology node it runs on
  ring: int
  ring_size: int
  rptr: int                 # GPU addresses of the read / write dispatch ids
  wptr: int
  doorbell_offset: int
  doorbell: int = 0         # host address of its doorbell, once the page is mapped

@dataclass
class Coverage:
  """What the emulator reported over every dispatch: counts, time, the distinct opcodes it executed per arch, and the
  code objects it ran (so the opcodes our compilers emitted can be counted too)."""
  dispatches: int = 0
  instructions: int = 0
  seconds: float = 0.0
  opcodes: dict = field(default_factory=dict)   # arch -> set of executed opcode names (lower case)
  libs: dict = field(default_factory=dict)      # arch -> {sha1: code object}
  def seen(self, arch: str, lib: bytes) -> None:
    """A code object about to run: its opcodes count as emitted even if the emulator then fails on one."""
    self.libs.setdefault(arch, {})[hashlib.sha1(lib).hexdigest()] = lib
  def add(self, arch: str, lib: bytes, stats, seconds: float) -> None:
    self.dispatches += 1
    self.seconds += seconds
    self.seen(arch, lib)
    if stats is None: return
    self.instructions += int(getattr(stats, "instructions", 0) or 0)
    ops = getattr(stats, "opcodes", None) or ()
    from tinycore_amd.mockgpu.disasm import normalize
    self.opcodes.setdefault(arch, set()).update(n for o in (ops.keys() if isinstance(ops, dict) else ops) for n in normalize(str(o)))
  def summary(self) -> dict:
    from tinycore_amd.mockgpu.disasm import emitted_opcodes
    return {"dispatches": self.dispatches, "instructions": self.instructions, "emulator_seconds": round(self.seconds, 3),
            "archs": {a: {"code_objects": len(libs), "executed": sorted(self.opcodes.get(a, ())),
                          "emitted": sorted(emitted_opcodes(list(libs.values()), a))} for a, libs in self.libs.items()}}
  def dump(self, directory: str) -> None:
    """Writes summary() to DIR/mockgpu-PID.json (one file per process: pytest-xdist workers each write theirs)."""
    if not self.dispatches: return
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".mockgpu-{os.getpid()}.json.tmp")
    with open(tmp, "w") as f: json.dump(self.summary(), f)
    os.replace(tmp, os.path.join(directory, f"mockgpu-{os.getpid()}.json"))

def _takes_dispatch_ptr(fn) -> bool:
  try: return "dispatch_ptr" in inspect.signature(fn).parameters
  except (TypeError, ValueError): return False

class CommandProcessor:
  def __init__(self, mem: MockGPUMemory, dispatch, signal_event):
    self.mem, self.dispatch, self.signal_event = mem, dispatch, signal_event
    self.coverage = Coverage()
    self._code: dict[tuple[int, int], tuple[bytes, dict]] = {}   # (region va, handle) -> (code object, {kd offset: name})
  def u64(self, addr: int) -> int: return struct.unpack("<Q", self.mem.read(addr, 8))[0]

  def run(self, q: MockQueue) -> list[str]:
    """Processes every packet the doorbell has announced; returns the errors of packets that failed."""
    errors: list[str] = []
    if not q.doorbell: return errors
    rung = struct.unpack("<Q", ctypes.string_at(q.doorbell, 8))[0]
    rd, wr, n = self.u64(q.rptr), self.u64(q.wptr), q.ring_size // aql.PACKET_SIZE
    while rd <= rung and rd < wr:
      slot = q.ring + (rd % n) * aql.PACKET_SIZE
      pkt = self.mem.read(slot, aql.PACKET_SIZE)
      hdr, setup = struct.unpack_from("<HH", pkt)
      kind = hdr & 0xff
      if kind == aql.TYPE_INVALID: break   # announced but not yet written
      signal = struct.unpack_from("<Q", pkt, 56)[0]
      try:
        if kind == aql.TYPE_KERNEL_DISPATCH: self._dispatch(q, pkt, slot)
        elif kind == aql.TYPE_BARRIER_AND:
          for dep in struct.unpack_from("<5Q", pkt, 8):
            if dep and struct.unpack("<q", self.mem.read(dep + aql.SIG_VALUE, 8))[0] > 0:
              raise MockGPUError(f"barrier-AND packet {rd} waits on signal 0x{dep:x}, which nothing queued before it will complete")
        else: raise MockGPUError(f"AQL packet {rd} has type {kind}, which this packet processor does not run")
      except Exception as e: errors.append(f"packet {rd}: {type(e).__name__}: {e}")
      self.mem.write(slot, struct.pack("<H", aql.TYPE_INVALID))   # consumed
      rd += 1
      self.mem.write(q.rptr, struct.pack("<Q", rd))
      if signal: self._complete(signal)
    return errors

  def _complete(self, signal: int) -> None:
    kind, value, mailbox, event_id = struct.unpack("<qqQI", self.mem.read(signal, 28))
    self.mem.write(signal + aql.SIG_VALUE, struct.pack("<q", value - 1))
    if mailbox:
      self.mem.write(mailbox, struct.pack("<Q", event_id))
      self.signal_event(event_id)

  def _dispatch(self, q: MockQueue, pkt: bytes, slot: int) -> None:
    bx, by, bz, _, gx, gy, gz, priv, group, kobj, kernarg, _, _ = aql.DISPATCH_BODY.unpack_from(pkt, 4)
    block, items = (bx, by, bz), (gx, gy, gz)
    if (struct.unpack_from("<H", pkt, 2)[0] & 3) == 0 or not all(block) or not all(items):
      raise MockGPUError(f"dispatch packet with grid {items}, work-group {block}: every size must be at least 1")
    if bx * by * bz > 1024: raise MockGPUError(f"work-group {block} has {bx * by * bz} work-items; the hardware allows 1024")
    r = self.mem.region_of(kobj, 64)
    key = (r.va, r.handle)
    if key not in self._code: self._code[key] = (loader.loaded_file(r.data.tobytes()), {})
    lib, names = self._code[key]
    if (off := kobj - r.va) not in names: names[off] = loader.kernel_at(lib, off)
    grid = tuple((i + b - 1) // b for i, b in zip(items, block))
    self.coverage.seen(q.gpu["gfx"], lib)
    t0 = time.perf_counter()
    # the packet's own address is what the hardware hands a kernel that asks for the dispatch pointer
    extra = {"dispatch_ptr": slot} if _takes_dispatch_ptr(self.dispatch) else {}
    try: stats = self.dispatch(lib, names[off], q.gpu["gfx"], grid, block, kernarg, self.mem, **extra)
    except Exception as e:
      raise MockGPUError(f"kernel {names[off]} ({q.gpu['gfx']}, grid {grid}, work-group {block}): {type(e).__name__}: {e}") from e
    self.coverage.add(q.gpu["gfx"], lib, stats, time.perf_counter() - t0)

