"""GPU optimizations (codegen/opt_gpu.py, opt_tc.py) on a toy GPU run through the shared emulator (core-only), and on
EMU+NV where the NV plugin is installed: numbers vs numpy, and the shape of the generated program (register tile,
loads per FMA, workgroup shape, WMMA)."""
import numpy as np
import pytest
from tinycore import plugins
from tinycore.uop import Ops
from tinycore.dtype import dtypes
from tinycore.helpers import Context
from tinycore.device import Device, DeviceUnavailable
from tinycore.interface import Interface
from tinycore.renderer import TensorCore
from tinycore.renderer.cstyle import CStyleRenderer

from _mma_layout import mma_m16n8k16, MMA_M16N8K16
from tinycore.codegen import get_program

TC = TensorCore((16, 8, 16), dtypes.float16, dtypes.float32, 32, (8, 4, 4), "mma_m16n8k16_half_float", MMA_M16N8K16)

class ToyGPU(CStyleRenderer):
  device, name, has_local, has_shared, local_max, shared_max = "TOYGPU", "TOYC", True, True, (1024, 1024, 64), 48 * 1024
  tensor_cores = [TC]
  def render_special(self, u, name, bound): return [f"int {name} = 0;"]

class Emu(Interface): name, kind = "EMU", "emulator"

class ToyPlugin:
  TINYCORE_PLUGIN_API = (1, 1)
  def tinycore_devices(self): return [{"name": "TOYGPU", "factory": self.open, "priority": 1}]
  def tinycore_interfaces(self, device): return [Emu()] if device == "TOYGPU" else None
  def tinycore_emulator(self, device):
    return {"name": "toy", "warp_size": 32, "local_mem": 48 * 1024, "tensor_cores": (mma_m16n8k16(),)} if device == "TOYGPU" else None
  def tinycore_renderers(self, device): return [{"name": "TOYC", "load": ToyGPU, "default": True}] if device == "TOYGPU" else None
  def open(self, name, spec): raise DeviceUnavailable("no toy GPU here")   # EMU+TOYGPU is core's to open

@pytest.fixture
def toy(no_autoload):
  from tinycore.helpers import DEV
  plugins.register(ToyPlugin(), name="toygpu")
  DEV.value = "EMU+TOYGPU"
  return "EMU+TOYGPU"

def T(x, dev):
  from tinycore.tensor import Tensor
  return Tensor(x, device=dev)

def prog(out, dev):
  return get_program(out.schedule()[-1].ast, Device[dev].renderer)

def inner_loop(uops):
  """(loads, FMAs) in the innermost reduce loop of a linearized program."""
  rs = [i for i, u in enumerate(uops) if u.op is Ops.RANGE and u.arg[0] == "r"]
  body = uops[rs[-1]:next(i for i, u in enumerate(uops) if u.op is Ops.END and u.src[0] is uops[rs[-1]])]
  return sum(u.op is Ops.LOAD for u in body), sum(u.op is Ops.MUL and u.dtype != dtypes.index for u in body)

rng = np.random.default_rng(0)
def R(*s, dt=np.float32): return rng.standard_normal(s).astype(dt)

# ***** register tiles and workgroup shape

@pytest.mark.parametrize("shapes", [((64, 32), (32, 48)), ((37, 29), (29, 50)), ((3, 16, 24), (3, 24, 32)), ((8, 128), (128, 256))])
def test_matmul_numbers(toy, shapes):
  a, b = R(*shapes[0]), R(*shapes[1])
  np.testing.assert_allclose((T(a, toy) @ T(b, toy)).numpy(), a @ b, rtol=1e-4, atol=1e-4)

def test_register_tile_shares_loads(toy):
  a, b = R(64, 32), R(32, 64)
  p = prog(T(a, toy) @ T(b, toy), toy)
  assert sum(u.op is Ops.DEFINE_REG for u in p.uops) == 32        # a 4x8 tile of accumulators per thread
  assert inner_loop(p.uops) == (12, 32)                            # 4+8 loads for 32 FMAs (was 2 per FMA)
  assert p.local_size == (8, 16, 1) and p.global_size == (1, 1, 1)
  with Context(GPU_TILE="4,4"):
    p4 = prog(T(a, toy) @ T(b, toy), toy)
  assert inner_loop(p4.uops) == (8, 16) and p4.local_size == (16, 16, 1)
  with Context(GPU_TILE="1,1"):
    p1 = prog(T(a, toy) @ T(b, toy), toy)
  assert inner_loop(p1.uops) == (2, 1) and p1.local_size == (16, 16, 1) and p1.global_size == (4, 4, 1)
  with Context(NOGPUOPT=1):
    assert prog(T(a, toy) @ T(b, toy), toy).local_size == (64, 1, 1)   # gpudims' default: 1-D

def test_tile_x_axis_strided(toy):
  # copy u of the x axis covers columns u*N/4 + x: neighbouring threads keep neighbouring addresses (coalesced)
  a, b = R(32, 16), R(16, 64)
  p = prog(T(a, toy) @ T(b, toy), toy)
  sp = next(u for u in p.uops if u.op is Ops.SPECIAL and u.arg[0] == "gidx0")
  assert sp.src[0].arg == 8
  cols = sorted(int(u.src[0].src[1].src[1].arg) for u in p.uops
                if u.op is Ops.STORE and u.src[0].src[1].op is Ops.ADD and u.src[0].src[1].src[1].op is Ops.CONST)
  assert len([u for u in p.uops if u.op is Ops.STORE]) == 32 and {8, 16, 24} <= set(cols)   # copies 8 columns apart

def test_conv_and_reduce_shapes(toy):
  x, w = R(2, 3, 10, 12), R(8, 3, 3, 3)
  got = T(x, toy).conv2d(T(w, toy), padding=1).numpy()
  import itertools
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  ref = np.zeros((2, 8, 10, 12), np.float32)
  for i, j in itertools.product(range(3), range(3)): ref += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 10, j:j + 12], w[:, :, i, j])
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
  a = R(40, 24)
  np.testing.assert_allclose(T(a, toy).sum(1).numpy(), a.sum(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(T(a, toy).max(0).numpy(), a.max(0))
  np.testing.assert_allclose((T(a, toy) * 2 + 1).numpy(), a * 2 + 1)
  assert prog(T(a, toy) * 2, toy).local_size == (24, 1, 1)   # elementwise keeps gpudims' 1-D default

# ***** tensor cores (WMMA mma.m16n8k16)

@pytest.mark.parametrize("sa,sb,wmma", [((32, 32), (32, 16), 4), ((64, 48), (48, 32), 4), ((2, 32, 16), (2, 16, 24), 2),
                                        ((16, 16), (16, 8), 1), ((37, 20), (20, 29), 0)])
def test_half_matmul_tensor_cores(toy, sa, sb, wmma):
  a, b = R(*sa, dt=np.float16), R(*sb, dt=np.float16)
  out = T(a, toy) @ T(b, toy)
  p = prog(out, toy)
  assert sum(u.op is Ops.WMMA for u in p.uops) == wmma   # WM x WN mma tiles per warp; none where shapes don't fit
  if wmma: assert p.local_size[0] % 32 == 0               # whole warps along dim 0
  ref = a.astype(np.float32) @ b.astype(np.float32)
  np.testing.assert_allclose(out.numpy().astype(np.float32), ref, rtol=1e-2, atol=2e-2 if wmma else 5e-2)
  with Context(TC=0): assert not any(u.op is Ops.WMMA for u in prog(out, toy).uops)

def test_tensor_cores_bf16_and_float_out(toy):
  a, b = R(32, 32), R(32, 16)
  ta, tb = T(a, toy).cast(dtypes.float16), T(b, toy).cast(dtypes.float16)
  out = ta.float() @ tb.float()                            # half operands widened to float: still a tensor-core matmul
  assert any(u.op is Ops.WMMA for u in prog(out, toy).uops)
  np.testing.assert_allclose(out.numpy(), a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32), rtol=1e-4, atol=1e-4)
  assert not any(u.op is Ops.WMMA for u in prog(T(a, toy).cast(dtypes.bfloat16) @ T(b, toy).cast(dtypes.bfloat16), toy).uops)  # toy declares f16 only

def test_nv_renders_and_compiles_mma():
  pytest.importorskip("tinycore_nv")
  from tinycore_nv.renderer_cuda import CUDARenderer
  from tinycore_nv.nvrtc import find_nvrtc, nvrtc_compile, find_cuda_include
  from tinycore.tensor import Tensor
  with Context(DEV="EMU+NV"):
    for dt in (dtypes.float16, dtypes.bfloat16):
      a, b = Tensor.empty(64, 32, dtype=dt), Tensor.empty(32, 48, dtype=dt)
      ast = (a @ b).schedule()[-1].ast
      assert not CUDARenderer("sm_75").tensor_cores
      for native in (True, False):
        if native and find_cuda_include() is None: continue
        p = get_program(ast, CUDARenderer("sm_80", native_half=native))
        assert "mma.sync.aligned.m16n8k16.row.col.f32" in p.src
        try: find_nvrtc()
        except Exception: continue
        ptx = nvrtc_compile(p.src, "sm_80", False, find_cuda_include() if native else None)
        assert b"mma.sync.aligned.m16n8k16" in ptx

def test_nv_emulated_tensor_core_matmul():
  pytest.importorskip("tinycore_nv")
  from tinycore.tensor import Tensor
  a, b = R(2, 48, 64, dt=np.float16), R(2, 64, 40, dt=np.float16)
  with Context(DEV="EMU+NV"):
    out = Tensor(a) @ Tensor(b)
    assert any(u.op is Ops.WMMA for u in prog(out, "EMU+NV").uops)
    np.testing.assert_allclose(out.numpy().astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=2e-2)
