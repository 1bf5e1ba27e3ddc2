"""Memory safety on every emulated GPU pipeline: the shared interpreter checks each load and store against its buffer's
size (in elements of the buffer's dtype) and reports kernel, thread and index; a gated-off access is never reported.

Programs come two ways: each device's own pipeline compiles a real kernel and one index is planted out of range, and
hand-written UOp programs (gates, IF, partial elements, a dtype mismatch) run on each device's execution model."""
import re
import numpy as np
import pytest
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.device import Device
from tinycore.emulator import OutOfBounds, EmulatorError
from tinycore.testing.planted import pipeline_program, plant_index

DEVICES = ["EMU+NV", "EMU+AMD::gfx1100", "EMU+AMD::gfx1201", "EMU+METAL"]

@pytest.fixture(params=DEVICES)
def dev(request):
  try: Device[request.param]
  except Exception as e: pytest.skip(f"{request.param} does not open here (its plugin is not installed): {type(e).__name__}: {e}")
  return request.param

def _bufs(dev, *arrays):
  """Device buffers (the device's own allocator) holding `arrays`, and a way to read them back."""
  a = Device[dev].allocator
  out = []
  for x in arrays:
    b = a.alloc(x.nbytes)
    a._copyin(b, memoryview(np.ascontiguousarray(x)).cast("B"))
    out.append(b)
  def read(b, like):
    r = np.empty_like(like)
    a._copyout(memoryview(r).cast("B"), b)
    return r
  return out, read

def _load_program(dev, name, uops):
  d = Device[dev]
  return d.runtime(name, d.compiler.compile(d.renderer.render(name, uops)))

def _thread_of(element: int, local: int) -> str:
  return re.escape(f"thread group ({element // local}, 0, 0) local ({element % local}, 0, 0), global ({element}, 0, 0)")

# ***** the device's own pipeline, one index planted out of range

@pytest.mark.parametrize("what,buf", [("store", 0), ("load", 1)])
def test_pipeline_kernel_with_planted_index(dev, what, buf):
  n = 3000
  p = pipeline_program(dev, n)
  local = p.local_size[0]
  assert p.local_size[1:] == (1, 1) and p.global_size[0] * local >= n   # the thread -> element map used below
  bufs, read = _bufs(dev, np.zeros(n, np.float32), np.arange(n, dtype=np.float32))
  # unplanted, the pipeline's program is right: out = 2x + 1 everywhere
  _load_program(dev, p.name, p.uops)(*bufs, global_size=p.global_size, local_size=p.local_size)
  np.testing.assert_equal(read(bufs[0], np.zeros(n, np.float32)), np.arange(n, dtype=np.float32) * 2 + 1)
  # one element further: the last element's thread steps past the end of the buffer
  prg = _load_program(dev, p.name, plant_index(p.uops, buf, 1))
  with pytest.raises(OutOfBounds, match=rf"^{p.name}: out-of-bounds {what} of buffer {buf} at index {n} \(size {n}\).*"
                                        rf"\({_thread_of(n - 1, local)}\)$"):
    prg(*bufs, global_size=p.global_size, local_size=p.local_size)
  # and one before the start: the first thread reads/writes index -1
  prg = _load_program(dev, p.name, plant_index(p.uops, buf, -1))
  with pytest.raises(OutOfBounds, match=rf"^{p.name}: out-of-bounds {what} of buffer {buf} at index -1 \(size {n}\).*\({_thread_of(0, local)}\)$"):
    prg(*bufs, global_size=p.global_size, local_size=p.local_size)

# ***** hand-written programs

def _g(n, dt=dtypes.float32): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), n)
def _c(x, dt=dtypes.index): return UOp.const(dt, x)
def _index(buf, idx, gate=None): return UOp(Ops.INDEX, buf.dtype, (buf, idx) if gate is None else (buf, idx, gate))
def _tid(bound, local): return UOp(Ops.SPECIAL, dtypes.index, (_c(bound),), ("gidx0", local))
def _program(*stores): return [u for u in UOp(Ops.SINK, dtypes.void, tuple(stores)).toposort() if u.op is not Ops.SINK]

def test_gated_accesses_out_of_range_are_not_reported(dev):
  """out[i] = in[2i] for i < 4, through gated INDEXes whose index is out of range exactly when the gate is false."""
  i = _tid(16, 8)   # 16 threads in 2 groups; out has 4 elements, in has 8
  ok = UOp(Ops.CMPLT, dtypes.bool, (i, _c(4)))
  val = UOp(Ops.LOAD, dtypes.float32, (_index(_g(1), i * 2, ok),))
  prog = _program(UOp(Ops.STORE, dtypes.void, (_index(_g(0), i, ok), val + 1.0)))
  bufs, read = _bufs(dev, np.full(4, -1, np.float32), np.arange(8, dtype=np.float32))
  _load_program(dev, "gated", prog)(*bufs, global_size=(2, 1, 1), local_size=(8, 1, 1))
  np.testing.assert_equal(read(bufs[0], np.zeros(4, np.float32)), [1, 3, 5, 7])
  # the same program with the gate true everywhere: now thread 4 stores out of range
  prog = _program(UOp(Ops.STORE, dtypes.void, (_index(_g(0), i, _c(True, dtypes.bool)), val + 1.0)))
  with pytest.raises(OutOfBounds, match=rf"^gated: out-of-bounds store of buffer 0 at index 4 \(size 4\).*\({_thread_of(4, 8)}\)$"):
    _load_program(dev, "gated", prog)(*bufs, global_size=(2, 1, 1), local_size=(8, 1, 1))

def test_if_guarded_store_is_not_reported(dev):
  """An IF around the store (threads past 3 skip it) guards it as well as a gate does."""
  i = _tid(8, 4)
  cond = UOp(Ops.IF, dtypes.void, (UOp(Ops.CMPLT, dtypes.bool, (i, _c(3))),))
  st = UOp(Ops.STORE, dtypes.void, (_index(_g(0), i * 2), _c(5.0, dtypes.float32), cond))
  prog = _program(st) + [UOp(Ops.ENDIF, dtypes.void, (cond,))]
  bufs, read = _bufs(dev, np.zeros(6, np.float32))
  _load_program(dev, "guarded", prog)(*bufs, global_size=(2, 1, 1), local_size=(4, 1, 1))
  np.testing.assert_equal(read(bufs[0], np.zeros(6, np.float32)), [5, 0, 5, 0, 5, 0])
  bufs, _ = _bufs(dev, np.zeros(5, np.float32))   # threads 0-2 store at 0, 2, 4: all in range
  _load_program(dev, "guarded", prog)(*bufs, global_size=(2, 1, 1), local_size=(4, 1, 1))
  bufs, _ = _bufs(dev, np.zeros(4, np.float32))   # now thread 2's index 4 is past the end
  with pytest.raises(OutOfBounds, match=rf"^guarded: out-of-bounds store of buffer 0 at index 4 \(size 4\).*\({_thread_of(2, 4)}\)$"):
    _load_program(dev, "guarded", prog)(*bufs, global_size=(2, 1, 1), local_size=(4, 1, 1))

def test_vector_load_past_the_end(dev):
  """A 4-wide load is in range only if all four elements are: the report names the first element past the end."""
  i = _tid(3, 4)
  ld = UOp(Ops.LOAD, dtypes.float32.vec(4), (UOp(Ops.INDEX, _g(1).dtype, (_g(1), i * 4), ("vec", 4)),))
  st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, _g(0).dtype, (_g(0), i * 4), ("vec", 4)), ld))
  bufs, read = _bufs(dev, np.zeros(12, np.float32), np.arange(12, dtype=np.float32))
  _load_program(dev, "v4", _program(st))(*bufs, global_size=(1, 1, 1), local_size=(4, 1, 1))
  np.testing.assert_equal(read(bufs[0], np.zeros(12, np.float32)), np.arange(12))
  bufs, _ = _bufs(dev, np.zeros(12, np.float32), np.arange(10, dtype=np.float32))
  with pytest.raises(OutOfBounds, match=rf"^v4: out-of-bounds 4-wide load of buffer 1 at index 10 \(size 10\).*\({_thread_of(2, 4)}\)$"):
    _load_program(dev, "v4", _program(st))(*bufs, global_size=(1, 1, 1), local_size=(4, 1, 1))

def test_partial_trailing_element_is_out_of_bounds(dev):
  """Bounds are whole elements of the buffer's dtype: 6 bytes hold one float32, the bytes of a second are not enough."""
  i = _tid(2, 2)
  prog = _program(UOp(Ops.STORE, dtypes.void, (_index(_g(0), i), _c(1.0, dtypes.float32))))
  bufs, _ = _bufs(dev, np.zeros(6, np.uint8))
  with pytest.raises(OutOfBounds, match=r"^partial: out-of-bounds store of buffer 0 at index 1 \(size 1\): float at byte 4, the buffer has 6 bytes"):
    _load_program(dev, "partial", prog)(*bufs, global_size=(1, 1, 1), local_size=(2, 1, 1))

def test_access_with_the_wrong_dtype_is_rejected_before_running(dev):
  """A load of float32 through an int32 buffer would reinterpret memory on the device: refused at load time."""
  i = _tid(4, 4)
  prog = _program(UOp(Ops.STORE, dtypes.void, (_index(_g(0), i), UOp(Ops.LOAD, dtypes.float32, (_index(_g(1, dtypes.int32), i),)))))
  with pytest.raises(EmulatorError, match=r"^mixed: op \d+ LOAD moves dtypes.float through buffer 1 of dtypes.int"):
    _load_program(dev, "mixed", prog)
  prog = _program(UOp(Ops.STORE, dtypes.void, (_index(_g(0, dtypes.float16), i), _c(1.0, dtypes.float32))))
  with pytest.raises(EmulatorError, match=r"^mixed: op \d+ STORE moves dtypes.float through buffer 0 of dtypes.half"):
    _load_program(dev, "mixed", prog)

# ***** programs come back from a shared on-disk cache: a planted entry must not run anything

class _Planted:
  def __init__(self, path): self.path = path
  def __reduce__(self): return (open, (self.path, "w"))   # unpickling this would create the file

def test_planted_cache_entry_is_refused_without_running_it(tmp_path):
  import pickle
  from tinycore.emulator import serialize
  marker = tmp_path / "ran"
  lib = pickle.dumps(("k", 1, [(Ops.SINK, None, (), _Planted(str(marker)))]), protocol=4)
  with pytest.raises(ValueError, match=r"not a valid emulator program .*names io\.open"): serialize.decode(lib)
  assert not marker.exists()
  # well-formed pickle, malformed program: a source index outside the table
  good = serialize.decode_bytes(serialize.encode("k", _program(UOp(Ops.STORE, dtypes.void, (_index(_g(0), _c(0)), _c(1.0, dtypes.float32))))))
  name, nodes = serialize.decode(good)
  assert name == "k" and nodes[-1].op is Ops.STORE
  bad = pickle.dumps(("k", 1, [(Ops.SINK, dtypes.void, (5,), None)]), protocol=4)
  with pytest.raises(ValueError, match=r"not a valid emulator program"): serialize.decode(bad)
