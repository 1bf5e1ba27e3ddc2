"""Index math past int32 (issue 18): a tensor of 2**31+ elements must not read back zeros or wrapped offsets.

Codegen picks int32 or int64 per kernel (codegen/index_width.py). These tests check the choice, the rendered source of
every renderer (64-bit or a clear error naming the limit), and real runs on the CPU's C and LLVM renderers with a 2 GiB
uint8 tensor, compared against numpy."""
import gc
import numpy as np
import pytest
from tinycore import Tensor, dtypes, Variable, Context
from tinycore.uop import UOp
from tinycore.codegen import get_program
from tinycore.codegen.index_width import IndexWidthError

BIG = 2 ** 31 + 64   # elements: past int32's largest index
pytestmark = pytest.mark.needs_device   # scheduling names the CPU device; a core-only install has none

def _ast(t: Tensor) -> UOp:
  sched = t.schedule()
  return sched[-1].ast

def _cpu_renderer(name: str):
  if name == "C": return pytest.importorskip("tinycore_cpu.renderer_c").CRenderer()
  pytest.importorskip("llvmlite")
  from tinycore_cpu.renderer_llvm import LLVMRenderer
  return LLVMRenderer()

def _big_slice_ast() -> UOp:
  # reads 56 elements at offset 2**31+8 of a buffer that is never allocated (scheduling doesn't allocate)
  src = Tensor.empty(BIG, dtype=dtypes.uint8, device="CPU")
  return _ast(src[2 ** 31 + 8:] + 1)

# ---- the choice
def test_index_constants_do_not_wrap():
  c = UOp.const(dtypes.index, 2 ** 31 + 5)
  assert c.arg == 2 ** 31 + 5
  assert (c * 4).simplify().arg == (2 ** 31 + 5) * 4
  assert (UOp.variable("i", 0, 10) + 2 ** 40).vmax == 2 ** 40 + 10

def test_fixed_width_range_that_overflows_is_the_whole_dtype():
  # int32 arithmetic wraps in a kernel, so a range past int32 can't be trusted (the simplifier must not fold on it)
  x = UOp.variable("x", 0, 2 ** 30, dtypes.int32)
  s = x * UOp.const(dtypes.int32, 4)
  assert (s.vmin, s.vmax) == (-2 ** 31, 2 ** 31 - 1)
  assert (x * UOp.const(dtypes.int32, 1)).vmax == 2 ** 30

@pytest.mark.parametrize("renderer", ["C", "LLVM"])
def test_small_kernel_stays_int32(renderer):
  r = _cpu_renderer(renderer)
  p = get_program(_ast((Tensor.ones(64, 64, device="CPU") * 2).sum(axis=1)), r)
  assert p.index_dtype == dtypes.int32
  if renderer == "C": assert "long long gidx" not in p.src and "int gidx0 = (int)core_start" in p.src
  else: assert "phi i32" in p.src and "phi i64" not in p.src

@pytest.mark.parametrize("renderer", ["C", "LLVM"])
def test_big_offset_renders_int64(renderer):
  p = get_program(_big_slice_ast(), _cpu_renderer(renderer))
  assert p.index_dtype == dtypes.int64
  if renderer == "C":
    assert "long long gidx0" in p.src and "2147483656ll" in p.src   # the offset, unwrapped
    assert "-2147483" not in p.src
  else:
    assert "phi i64" in p.src and "2147483656" in p.src

def test_variable_range_past_int32_is_int64():
  n = Variable("n", 1, 2 ** 40)
  t = Tensor.arange(10, device="CPU").contiguous()
  p = get_program(_ast(t.shrink(((0, n.bind(7)),)).sum()), _cpu_renderer("C"))
  assert p.index_dtype == dtypes.int64
  assert "const long long n_arg" in p.src

def test_debug3_names_the_index_type(capsys):
  with Context(DEBUG=3): get_program(_big_slice_ast(), _cpu_renderer("C"))
  assert "index math in int64" in capsys.readouterr().out

# ---- GPU renderers: 64-bit index math, or a clear error naming the limit
def _gpu(name):
  if name == "CUDA": return pytest.importorskip("tinycore_nv.renderer_cuda").CUDARenderer("sm_90")
  if name == "PTX": return pytest.importorskip("tinycore_nv.renderer_ptx").PTXRenderer("sm_90")
  if name == "HIP": return pytest.importorskip("tinycore_amd.renderer_hip").HIPRenderer("gfx1100")
  if name == "AMDLLVM": return pytest.importorskip("tinycore_amd.renderer_llvm").AMDLLVMRenderer("gfx1100")
  if name == "METAL": return pytest.importorskip("tinycore_metal.renderer_metal").MetalRenderer()
  return pytest.importorskip("tinycore_webgpu.renderer_wgsl").WGSLRenderer()

@pytest.mark.parametrize("name", ["CUDA", "HIP"])
def test_gpu_c_dialects_render_int64(name):
  r = _gpu(name)
  small = get_program(_ast(Tensor.ones(256, device="CPU") * 3), r)
  assert small.index_dtype == dtypes.int32 and "long long" not in small.src
  p = get_program(_big_slice_ast(), r)
  assert p.index_dtype == dtypes.int64
  decl = next(l for l in p.src.splitlines() if "gidx0 =" in l)
  assert decl.strip().startswith("long long gidx0 = ") and "(long long)" in decl   # the block id widened before the multiply
  assert "2147483656ll" in p.src

def _toolchain(name) -> bool:
  if name == "CUDA":
    from tinycore_nv.nvrtc import find_nvrtc
    return find_nvrtc() is not None
  from tinycore_amd.compiler import find_clang
  return bool(find_clang("gfx1100"))

@pytest.mark.parametrize("name", ["CUDA", "HIP"])
def test_gpu_c_dialects_int64_source_compiles(name):
  r = _gpu(name)
  if not _toolchain(name): pytest.skip(f"no {name} compiler on this machine")
  for ast in (_big_slice_ast(), _ast(Tensor.ones(BIG, dtype=dtypes.uint8, device="CPU") * 7)):
    assert len(r.compiler.compile(get_program(ast, r).src)) > 0

@pytest.mark.parametrize("name", ["PTX", "AMDLLVM", "METAL", "WGSL"])
def test_gpu_32bit_renderers_refuse_clearly(name):
  r = _gpu(name)
  assert get_program(_ast(Tensor.ones(256, device="CPU") * 3), r).index_dtype == dtypes.int32
  with pytest.raises(IndexWidthError, match=r"2\*\*31-1"):
    get_program(_big_slice_ast(), r)

# ---- real runs on 2 GiB
def test_two_gib_uint8_reads_back():
  """The reported bug: (Tensor.ones(2**31+, uint8)*7) read back zeros. Default CPU renderer, ~5 s."""
  t = (Tensor.ones(BIG, dtype=dtypes.uint8, device="CPU") * 7).realize()
  assert (t[2 ** 31 - 4:2 ** 31 + 4].numpy() == 7).all() and t[-1].item() == 7 and t[0].item() == 7
  del t
  gc.collect()

@pytest.mark.slow
@pytest.mark.parametrize("dev", ["CPU", "CPU:LLVM"])
def test_two_gib_distinct_values_past_int32(dev):
  if dev == "CPU:LLVM": pytest.importorskip("llvmlite")
  with Context(DEV=dev):
    t = (Tensor.ones(BIG, dtype=dtypes.uint8) * 7).realize()
    assert (t[2 ** 31 - 4:2 ** 31 + 4].numpy() == 7).all() and t[-1].item() == 7
    del t
    # distinct values past 2**31: a concatenation whose kernel reads the tail at offset -2**31 (the slice bug wrapped it)
    tail = np.arange(1, 65, dtype=np.uint8)
    c = Tensor.zeros(2 ** 31, dtype=dtypes.uint8).cat(Tensor(tail)).realize()
    np.testing.assert_array_equal(c[2 ** 31 - 2:].numpy(), np.concatenate([[0, 0], tail]))
    np.testing.assert_array_equal((c[2 ** 31 + 8:] + 1).numpy(), tail[8:] + 1)
    assert c.max().item() == 64
    del c
  gc.collect()
