"""The shared emulator: a toy GPU plugin run through EMU (Tensor ops vs numpy), and hand-built programs for
out-of-bounds, uninitialized local memory, barriers and tensor cores. Core-only: needs no backend plugin."""
import time
import numpy as np
import pytest
from tinycore import plugins
from tinycore.uop import UOp, Ops, python_alu
from tinycore.dtype import dtypes
from tinycore.device import Device, DeviceUnavailable
from tinycore.interface import Interface
from tinycore.renderer.cstyle import CStyleRenderer
from tinycore.emulator import (ExecModel, TCLayout, layout, EmulatedRenderer, EmulatorProgram,
                               OutOfBounds, UninitializedRead, MissingBarrier, EmulatorError)
from _mma_layout import mma_m16n8k16
from tinycore.emulator.alu import alu

class ToyGPURenderer(CStyleRenderer):
  device, name, has_local, has_shared, local_max, shared_max = "TOYGPU", "TOYC", True, True, (64, 64, 64), 16384
  def render_special(self, u, name, bound): return [f"int {name} = blockIdx * {u.arg[1]} + threadIdx;", f"if ({name} >= {bound}) return;"]

class Emu(Interface): name, kind = "EMU", "emulator"
class Real(Interface): name, default = "REAL", True

class ToyGPUPlugin:
  TINYCORE_PLUGIN_API = (1, 1)
  def tinycore_devices(self): return [{"name": "TOYGPU", "factory": self.open, "priority": 1}]
  def tinycore_interfaces(self, device): return [Real(), Emu()] if device == "TOYGPU" else None
  def tinycore_emulator(self, device): return {"name": "toy", "warp_size": 32, "local_mem": 16384} if device == "TOYGPU" else None
  def tinycore_renderers(self, device): return [{"name": "TOYC", "load": ToyGPURenderer, "default": True}] if device == "TOYGPU" else None
  def open(self, name, spec): raise DeviceUnavailable("no toy GPU here")   # EMU+TOYGPU is core's to open

@pytest.fixture
def toy(no_autoload):
  from tinycore.helpers import DEV
  plugins.register(ToyGPUPlugin(), name="toygpu")
  DEV.value = "EMU+TOYGPU"   # the registry fixture restores it
  return "EMU+TOYGPU"

def T(x, dev, dtype=None):
  from tinycore.tensor import Tensor
  return Tensor(x, device=dev, dtype=dtype)

# ***** through the real pipeline

def test_open_emulated_keeps_capabilities(toy):
  d = Device[toy]
  assert isinstance(d.renderer, EmulatedRenderer) and d.renderer.device == "TOYGPU" and d.renderer.has_local
  assert d.renderer.local_max == (64, 64, 64) and d.spec.iface == "EMU" and d.renderer.model.name == "toy"
  assert d.compiler.cachekey != EmulatedRenderer(CStyleRenderer()).compiler.cachekey   # distinct per base renderer
  with pytest.raises(DeviceUnavailable): Device["REAL+TOYGPU"]

def test_elementwise_reduce(toy):
  a, b = np.random.default_rng(0).standard_normal((2, 37, 19)).astype(np.float32)
  ta, tb = T(a, toy), T(b, toy)
  np.testing.assert_allclose(((ta + tb) * ta - tb.exp()).numpy(), (a + b) * a - np.exp(b), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta.sum(1).numpy(), a.sum(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ta.max(0).numpy(), a.max(0))
  np.testing.assert_allclose(ta.sum().numpy(), a.sum(), rtol=1e-4)

def test_matmul_and_speed(toy):
  a, b = np.random.default_rng(1).standard_normal((2, 64, 64)).astype(np.float32)
  ta, tb = T(a, toy).realize(), T(b, toy).realize()
  out = (ta @ tb)
  # CPU time, not wall: the bound is about the emulator's work, and wall time failed at 1.03-1.6 s on a machine at load 20
  st = time.process_time(); r = out.numpy(); dt = time.process_time() - st
  np.testing.assert_allclose(r, a @ b, rtol=1e-4, atol=1e-4)
  assert dt < 1.5, f"64x64 matmul took {dt:.3f}s of CPU in the emulator"

def test_movement(toy):
  a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  np.testing.assert_equal(T(a, toy).permute(2, 0, 1).contiguous().numpy(), a.transpose(2, 0, 1))
  np.testing.assert_equal(T(a, toy).pad(((0, 0), (1, 2), (0, 1))).numpy(), np.pad(a, ((0, 0), (1, 2), (0, 1))))
  np.testing.assert_equal(T(a, toy)[:, 1:, ::2].numpy(), a[:, 1:, ::2])

def test_half_bf16_int(toy):
  x = np.linspace(-3, 3, 50).astype(np.float32)
  h = (T(x, toy).cast(dtypes.float16) * 3.1 + 1).numpy()
  np.testing.assert_equal(h, (x.astype(np.float16) * np.float16(3.1) + np.float16(1)))
  bf = T(x, toy).cast(dtypes.bfloat16).cast(dtypes.float32).numpy()
  ref = (((x.view(np.uint32).astype(np.uint64) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
  np.testing.assert_equal(bf, ref)
  i = np.array([7, -7, 9, -9, 0, 5], dtype=np.int32)
  np.testing.assert_equal((T(i, toy) * 3 + 1).numpy(), i * 3 + 1)

# ***** hand-built programs

def _g(n, dt=dtypes.float32): return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), n)
def _c(x, dt=dtypes.index): return UOp.const(dt, x)
def _ld(buf, idx, dt=dtypes.float32, *extra): return UOp(Ops.LOAD, dt, (UOp(Ops.INDEX, buf.dtype, (buf, idx)), *extra))
def _st(buf, idx, val): return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, buf.dtype, (buf, idx)), val))
def _run(stores, bufs, gs, ls, model=None):
  uops = [u for u in UOp(Ops.SINK, dtypes.void, tuple(stores)).toposort() if u.op is not Ops.SINK]
  ren = EmulatedRenderer(ToyGPURenderer(), model)
  prg = EmulatorProgram("k", ren.compiler.compile(ren.render("k", uops)), ren.model)
  mvs = [memoryview(b).cast("B") for b in bufs]
  return prg(*mvs, global_size=gs, local_size=ls, wait=True)

def _tid(n=8, local=4): return UOp(Ops.SPECIAL, dtypes.index, (_c(n),), ("gidx0", local))

def test_out_of_bounds_names_buffer_index_thread():
  out, inp = np.zeros(8, np.float32), np.arange(8, dtype=np.float32)
  i = _tid()
  _run([_st(_g(0), i, _ld(_g(1), i))], [out, inp], (2, 1, 1), (4, 1, 1))
  np.testing.assert_equal(out, inp)
  with pytest.raises(OutOfBounds, match=r"load of buffer 1 at index 8 \(size 8\).*group \(1, 0, 0\) local \(3, 0, 0\)"):
    _run([_st(_g(0), i, _ld(_g(1), i + 1))], [out, inp], (2, 1, 1), (4, 1, 1))
  with pytest.raises(OutOfBounds, match=r"store of buffer 0 at index -1"):
    _run([_st(_g(0), i - 1, _c(1.0, dtypes.float32))], [out], (2, 1, 1), (4, 1, 1))
  # threads past the SPECIAL bound and gated-off loads touch nothing
  i6 = _tid(6)
  gated = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, _g(1).dtype, (_g(1), i6 * 2, UOp(Ops.CMPLT, dtypes.bool, (i6, _c(4))))),))
  out[:] = -1
  _run([_st(_g(0), i6, gated)], [out, inp], (2, 1, 1), (4, 1, 1))
  np.testing.assert_equal(out, [0, 2, 4, 6, 0, 0, -1, -1])

def _local_prog(barrier: bool, init: bool = True):
  lds = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(4, "local"), (), 0)
  l = UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0",))
  g = UOp(Ops.SPECIAL, dtypes.index, (), ("gidx0",))   # group id
  st = _st(lds, l, _ld(_g(1), g * 4 + l)) if init else _st(lds, (l + 1) % 4 * 0 + 9, _c(0.0, dtypes.float32))
  dep = (UOp(Ops.BARRIER, dtypes.void, (st,)),) if barrier else (st,)
  return [_st(_g(0), g * 4 + l, _ld(lds, (l + 1) % 4, dtypes.float32, *dep))]

def test_local_memory_and_barrier():
  inp, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
  _run(_local_prog(True), [out, inp], (2, 1, 1), (4, 1, 1))
  np.testing.assert_equal(out, [1, 2, 3, 0, 5, 6, 7, 4])   # each workgroup has its own local memory
  with pytest.raises(MissingBarrier, match=r"missing barrier: read of local \d+ index 1 written by thread group \(0, 0, 0\) local \(1, 0, 0\)"):
    _run(_local_prog(False), [out, inp], (2, 1, 1), (4, 1, 1))

def test_uninitialized_local_read():
  with pytest.raises(OutOfBounds, match="store of local"): _run(_local_prog(True, init=False), [np.zeros(8, np.float32)], (2, 1, 1), (4, 1, 1))
  lds = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(8, "local"), (), 0)
  l = UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0",))
  st = _st(lds, l, _c(1.0, dtypes.float32))   # writes 0..3 of 8
  prog = [_st(_g(0), l, _ld(lds, l + 4, dtypes.float32, UOp(Ops.BARRIER, dtypes.void, (st,))))]
  with pytest.raises(UninitializedRead, match=r"uninitialized local \d+ at index 4.*local \(0, 0, 0\)"):
    _run(prog, [np.zeros(4, np.float32)], (1, 1, 1), (4, 1, 1))

def _wmma_prog(tc: TCLayout):
  """Each lane gathers its fragments through index tables (buffers 4-6) built from the layout, runs one WMMA, scatters D."""
  lane = UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0",))
  ea, eb, ec = len(tc.a[0]), len(tc.b[0]), len(tc.c[0])
  ia, ib, ic = _g(4, dtypes.int32), _g(5, dtypes.int32), _g(6, dtypes.int32)
  def frag(buf, tab, n, dt):
    return UOp(Ops.VECTORIZE, dt.vec(n), tuple(_ld(buf, _ld(tab, lane * n + e, dtypes.int32).cast(dtypes.index), dt) for e in range(n)))
  a, b = frag(_g(1, tc.dtype_in), ia, ea, tc.dtype_in), frag(_g(2, tc.dtype_in), ib, eb, tc.dtype_in)
  c = frag(_g(3, tc.dtype_out), ic, ec, tc.dtype_out)
  d = UOp(Ops.WMMA, tc.dtype_out.vec(ec), (a, b, c), (tc.name,))
  return [_st(_g(0, tc.dtype_out), _ld(ic, lane * ec + e, dtypes.int32).cast(dtypes.index),
              UOp(Ops.GEP, tc.dtype_out, (d,), (e,))) for e in range(ec)]

@pytest.mark.parametrize("tc", [mma_m16n8k16(), TCLayout("toy2x2", (2, 2, 2), dtypes.float32, dtypes.float32, 4,
  layout(4, 1, lambda l, e: (l // 2, l % 2)), layout(4, 1, lambda l, e: (l % 2, l // 2)), layout(4, 1, lambda l, e: (l // 2, l % 2)))])
def test_wmma_hand_built_layout(tc):
  M, N, K = tc.dims
  rng = np.random.default_rng(2)
  A, B, C = rng.standard_normal((M, K)), rng.standard_normal((K, N)), rng.standard_normal((M, N))
  A, B, C = A.astype(tc.dtype_in.np), B.astype(tc.dtype_in.np), C.astype(tc.dtype_out.np)
  tabs = [np.array([[r * cols + c for r, c in lane] for lane in lay], np.int32).reshape(-1) for lay, cols in ((tc.a, K), (tc.b, N), (tc.c, N))]
  D = np.zeros((M, N), tc.dtype_out.np)
  model = ExecModel("tc", warp_size=tc.threads, tensor_cores=(tc,))
  _run(_wmma_prog(tc), [D, A, B, C, *tabs], (1, 1, 1), (tc.threads, 1, 1), model)
  np.testing.assert_allclose(D, A.astype(np.float32) @ B.astype(np.float32) + C, rtol=1e-5, atol=1e-5)
  with pytest.raises(EmulatorError, match="no tensor-core layout"): _run(_wmma_prog(tc), [D, A, B, C, *tabs], (1, 1, 1), (tc.threads, 1, 1))

@np.errstate(all="ignore")
def test_alu_matches_c():
  a, b = np.array([7, -7, 7, -7, 5, -2**31], np.int32), np.array([2, 2, -2, -2, 0, -1], np.int32)
  assert alu(Ops.IDIV, dtypes.int32, [a, b]).tolist() == [3, -3, -3, 3, 0, -2**31]   # C truncation, x/0 = 0, MIN/-1 wraps
  assert alu(Ops.MOD, dtypes.int32, [a, b]).tolist() == [python_alu[Ops.MOD](int(x), int(y)) for x, y in zip(a[:5], b[:5])] + [0]
  m = alu(Ops.MAX, dtypes.float32, [np.array([np.nan, 1.0, 2.0], np.float32), np.array([1.0, np.nan, 1.0], np.float32)])
  assert np.isnan(m[0]) and np.isnan(m[1]) and m[2] == 2.0   # (a>b||a!=a)?a:b

def test_vectors_loops_and_formats():
  f4, i = dtypes.float32.vec(4), _tid(4, 4)
  x = UOp(Ops.LOAD, f4, (UOp(Ops.INDEX, _g(1).dtype, (_g(1), i * 4), ("vec", 4)),))
  y = UOp(Ops.MUL, f4, (x, _ld(_g(1), i)))                      # a per-thread scalar broadcasts over the lanes
  st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, _g(0).dtype, (_g(0), i * 4), ("vec", 4)), y))
  # a loop-carried accumulator: sum_r inp[r] over the loop, stored as bf16 (rounded) and as its bits (bitcast)
  r = UOp(Ops.RANGE, dtypes.index, (_c(16),), ("r", 0, 0))
  red = UOp(Ops.REDUCE, dtypes.float32, (_ld(_g(1), r), r), Ops.ADD)
  acc = UOp(Ops.DEFINE_REG, dtypes.float32, (red,), (0, 0.0))
  upd = UOp(Ops.ADD, dtypes.float32, (acc, red.src[0]))
  loop = [acc, r.src[0], r, red.src[0].src[0], red.src[0], upd, UOp(Ops.ASSIGN, dtypes.float32, (acc, upd)), UOp(Ops.END, dtypes.void, (r,)), red]
  bst = _st(_g(2, dtypes.bfloat16), i, UOp(Ops.CAST, dtypes.bfloat16, (UOp(Ops.ADD, dtypes.float32, (red, _c(1/3, dtypes.float32))),)))
  ist = _st(_g(3, dtypes.int32), i, UOp(Ops.BITCAST, dtypes.int32, (red,)))
  pre = [u for u in UOp(Ops.SINK, dtypes.void, (st,)).toposort() if u.op is not Ops.SINK]
  post = [u for u in UOp(Ops.SINK, dtypes.void, (bst, ist)).toposort() if u.op is not Ops.SINK and u not in pre and u not in loop]
  ren = EmulatedRenderer(ToyGPURenderer())
  prg = EmulatorProgram("k", ren.compiler.compile(ren.render("k", pre + loop + post)))
  inp = np.arange(16, dtype=np.float32)
  out, bf, bits = np.zeros(16, np.float32), np.zeros(4, np.uint16), np.zeros(4, np.int32)
  prg(*[memoryview(b).cast("B") for b in (out, inp, bf, bits)], global_size=(1, 1, 1), local_size=(4, 1, 1))
  np.testing.assert_equal(out, inp * np.repeat(inp[:4], 4))
  s = np.float32(inp.sum())
  assert (bits == s.view(np.int32)).all() and (bf == ((np.float32(s + np.float32(1/3)).view(np.uint32) + 0x7FFF) >> 16)).all()

def test_barrier_in_divergent_code():
  lds = UOp(Ops.DEFINE_LOCAL, dtypes.float32.ptr(4, "local"), (), 0)
  l = UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0",))
  st = _st(lds, l, _c(1.0, dtypes.float32))
  cond = UOp(Ops.IF, dtypes.void, (UOp(Ops.CMPLT, dtypes.bool, (l, _c(2))), st))
  bar = UOp(Ops.BARRIER, dtypes.void, (cond,))
  prog = [u for u in UOp(Ops.SINK, dtypes.void, (bar,)).toposort() if u.op is not Ops.SINK] + [UOp(Ops.ENDIF, dtypes.void, (cond,))]
  prog = [_g(0)] + prog
  ren = EmulatedRenderer(ToyGPURenderer())
  prg = EmulatorProgram("k", ren.compiler.compile(ren.render("k", prog)))
  with pytest.raises(EmulatorError, match=r"barrier in divergent control flow.*local \(2, 0, 0\)"):
    prg(memoryview(np.zeros(4, np.float32)).cast("B"), global_size=(1, 1, 1), local_size=(4, 1, 1))

def _group_loop_prog(per_lane_bound: bool):
  """acc = sum over a loop of (group id + 1) trips of the lane id, then each lane takes its XOR-1 neighbour's acc."""
  from tinycore.codegen.attention import _Program
  from tinycore.codegen.attention_tc import warp_xor
  P = _Program()
  out = P.emit(_g(0))
  g, l = UOp(Ops.SPECIAL, dtypes.index, (), ("gidx0",)), UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0",))
  acc = P.reg(dtypes.float32, 0.0)
  r = P.loop((l if per_lane_bound else g) + 1)
  P.assign(acc, UOp(Ops.ADD, dtypes.float32, (acc, l.cast(dtypes.float32))))
  P.end(r)
  P.store(out, g * 32 + l, warp_xor(acc, 1))
  ren = EmulatedRenderer(ToyGPURenderer())
  return EmulatorProgram("k", ren.compiler.compile(ren.render("k", P.out)), ExecModel(name="toy", warp_size=32, local_mem=16384))

def test_loop_trip_count_per_workgroup_and_warp_shuffle():
  """A loop bound may differ between workgroups (a causal attention block's key tiles), not within one; a warp
  shuffle reads the XOR lane."""
  out = np.zeros(96, np.float32)
  _group_loop_prog(False)(memoryview(out).cast("B"), global_size=(3, 1, 1), local_size=(32, 1, 1), wait=True)
  lane, grp = np.arange(96) % 32, np.arange(96) // 32
  np.testing.assert_equal(out, (lane ^ 1) * (grp + 1))
  with pytest.raises(EmulatorError, match="loop bound differs between threads of a workgroup"):
    _group_loop_prog(True)(memoryview(out).cast("B"), global_size=(3, 1, 1), local_size=(32, 1, 1), wait=True)
