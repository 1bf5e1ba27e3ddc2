"""Shared memory above 48 KB (tinycore_nv/shared_memory.py): bigger or deeper GEMM tiles put their panels in dynamic
shared memory; the kernel declares how much, the loader opts its function in and launches with it. Without a GPU:
the emulator runs such a tile bit-exact with sm_90's 227 KB per block, ptxas shows no spills and 2 blocks/SM counting
the dynamic bytes, and the loader's driver calls are checked against a stand-in driver."""
import ctypes
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.helpers import Context
from tinycore.codegen import get_program
from tinycore.emulator import EmulatedRenderer, serialize
from tinycore.emulator.interp import Interpreter
from tinycore.uop import Ops
from tinycore_nv.renderer_cuda import CUDARenderer
from tinycore_nv.emulator import model as nv_model
from tinycore_nv.nvrtc import find_nvrtc, NVRTCCompiler
from tinycore_nv.ptxas import find_ptxas, ptxas_with_log
from tinycore_nv.occupancy import ptxas_usage, blocks_per_sm, H200
from tinycore_nv.shared_memory import block_limit, symbol, STATIC_MAX

BIG = "128,128,64,2,4,3,1"   # 3 stages of 128x64 + 64x128 halves: 96 KB

def _ast(M, K, N):
  # NULL+NV: the AST alone is needed, and the NV-only CI venv has no device that runs (no CPU plugin, no GPU)
  return (Tensor.empty(M, K, dtype=dtypes.half, device="NULL+NV") @ Tensor.empty(K, N, dtype=dtypes.half, device="NULL+NV")).schedule()[-1].ast

def test_block_limits_per_arch():
  assert block_limit("sm_90") == 227 * 1024 and block_limit("sm_80") == 163 * 1024 and block_limit("sm_89") == 99 * 1024
  assert block_limit("sm_61") == STATIC_MAX and CUDARenderer("sm_90").shared_max == 227 * 1024

@pytest.mark.needs_device
def test_big_tile_runs_bit_exact_in_the_emulator(registry):
  from tinycore.helpers import DEV
  DEV.value = "EMU+NV"
  rng = np.random.default_rng(0)
  a, b = rng.integers(-3, 4, (256, 128)).astype(np.float16), rng.integers(-3, 4, (128, 256)).astype(np.float16)
  with Context(GEMM_TILE=BIG): p = get_program(_ast(256, 128, 256), EmulatedRenderer(CUDARenderer("sm_90"), nv_model("NV", "sm_90")))
  assert sum(u.dtype.size * 2 for u in p.uops if u.op is Ops.DEFINE_LOCAL) == 96 * 1024
  out = np.zeros((256, 256), np.float16)
  name, nodes = serialize.decode(serialize.decode_bytes(p.src))
  Interpreter(nodes, nv_model("NV", "sm_90"), name).run((out, a, b), p.global_size, p.local_size, ())
  np.testing.assert_array_equal(out.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32))

def test_small_tiles_stay_static():
  src = get_program(_ast(4096, 4096, 4096), CUDARenderer("sm_90")).src
  assert "__shared__ __align__(16) half smem0[" in src and "dynamic_smem" not in src

@pytest.mark.skipif(find_nvrtc() is None or find_ptxas() is None, reason="NVRTC or ptxas not found (no CUDA toolkit)")
def test_big_tile_ptxas_no_spills_two_blocks_per_sm():
  with Context(GEMM_TILE=BIG): p = get_program(_ast(4096, 4096, 4096), CUDARenderer("sm_90"))
  assert "extern __shared__ __align__(16) unsigned char tc_dynamic_smem[];" in p.src
  assert f"__device__ unsigned int {symbol(p.name)} = {96 * 1024};" in p.src
  _, log = ptxas_with_log(NVRTCCompiler("sm_90").to_ptx(p.src), "sm_90")
  use = ptxas_usage(log)
  assert use["spill_stores"] == 0 and use["spill_loads"] == 0 and use["stack"] == 0, log
  assert use["smem"] < 1024, use   # the panels are dynamic: ptxas counts only static shared memory
  assert blocks_per_sm(use["registers"], use["smem"] + 96 * 1024, p.local_size[0], H200) == 2, use

class _Driver:
  """Stands in for libcuda: a module that may define the kernel's requirement symbol; records what the loader does."""
  def __init__(self, value: int | None): self.value, self.calls = value, []
  def cuModuleLoadData(self, mod, lib): return 0
  def cuModuleGetFunction(self, fn, mod, name): return 0
  def cuModuleGetGlobal_v2(self, ptr, size, mod, name):
    self.calls.append(("global", name))
    if self.value is None: return 500   # CUDA_ERROR_NOT_FOUND
    ctypes.cast(size, ctypes.POINTER(ctypes.c_size_t))[0] = 4
    return 0
  def cuMemcpyDtoH_v2(self, dst, src, n):
    ctypes.cast(dst, ctypes.POINTER(ctypes.c_uint32))[0] = self.value
    return 0
  def cuFuncSetAttribute(self, fn, attr, val): self.calls.append(("attr", attr, val)); return 0
  def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, args, extra): self.calls.append(("launch", smem)); return 0
  def cuCtxSetCurrent(self, ctx): return 0
  def cuModuleUnload(self, mod): return 0

@pytest.mark.parametrize("value", [None, 96 * 1024])
def test_loader_opts_in_and_launches_with_the_declared_bytes(monkeypatch, value):
  from tinycore_nv import device
  drv = _Driver(value)
  monkeypatch.setattr(device, "libcuda", lambda: drv)
  class Ctx:
    max_grid = (2**31 - 1, 65535, 65535)
    def use(self): pass
  prg = device.NVProgram(Ctx(), "r_k", b"cubin")
  prg(global_size=(1, 1, 1), local_size=(256, 1, 1))
  assert ("global", symbol("r_k").encode()) in drv.calls
  if value is None: assert prg.dynamic_smem == 0 and drv.calls[-1] == ("launch", 0) and not any(c[0] == "attr" for c in drv.calls)
  else: assert ("attr", 8, value) in drv.calls and drv.calls[-1] == ("launch", value)
