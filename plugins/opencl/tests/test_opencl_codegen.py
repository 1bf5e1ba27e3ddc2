"""The OpenCL C renderer, checked without a driver (kernels scheduled on EMU+CL, rendered by CLRenderer): core's shared
GPU optimizations reach it through its declared capabilities alone, and dtypes follow the device's extensions."""
import pathlib
import pytest
from tinycore import Tensor, dtypes, Context
from tinycore.codegen import get_program
from tinycore.testing.kernel_cases import kernel_cases
from tinycore_opencl.renderer_cl import CLRenderer

DEV = "EMU+CL"   # scheduling needs some device; the core+opencl venv has no CPU backend

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = DEV   # the registry fixture restores it
CASES = kernel_cases(DEV)
def ast(case: str): return CASES[case]().schedule()[-1].ast
def matmul_ast(m, k, n): return (Tensor.empty(m, k, device=DEV) @ Tensor.empty(k, n, device=DEV)).schedule()[-1].ast

def test_matmul_gets_cores_register_tile_and_workgroup_shape():
  """codegen/opt_gpu.py: each work-item keeps a 4x8 tile of outputs in registers, work-groups are 16x16."""
  p = get_program(matmul_ast(128, 64, 128), CLRenderer())
  assert p.src.count("float acc") == 32, p.src
  assert "reqd_work_group_size(16, 16, 1)" in p.src and p.local_size == (16, 16, 1)
  assert "get_local_id(0)" in p.src and "get_local_id(1)" in p.src
  # the same kernel without core's GPU pass: one accumulator per work-item, a 1-D work-group
  with Context(NOGPUOPT=1): q = get_program(matmul_ast(128, 64, 128), CLRenderer())
  assert q.src.count("float acc") == 1 and q.local_size[1] == 1

def test_workgroups_follow_the_declared_limits():
  p = get_program(matmul_ast(128, 64, 128), CLRenderer(local_max=(8, 8, 8)))
  assert p.local_size == (8, 8, 1) and "reqd_work_group_size(8, 8, 1)" in p.src

def test_core_never_names_this_backend():
  core = pathlib.Path(__import__("tinycore").__file__).parent
  for f in core.rglob("*.py"):
    text = f.read_text()
    assert "tinycore_opencl" not in text and "CLRenderer" not in text and "pyopencl" not in text, f

def test_kernel_signature_and_bool_buffers_as_bytes():
  p = get_program(ast("where_bool"), CLRenderer())
  assert p.src.count("__kernel ") == 1 and "__global float* restrict data" in p.src
  q = get_program((Tensor.empty(16, device=DEV) < 2).schedule()[-1].ast, CLRenderer())
  assert "__global uchar* restrict data0" in q.src, q.src   # OpenCL leaves sizeof(bool) open: bytes in memory

def test_float64_needs_cl_khr_fp64():
  with pytest.raises(NotImplementedError, match=r"does not support float64 \(the device lacks cl_khr_fp64\)"):
    get_program(ast("f64_exp"), CLRenderer())
  src = get_program(ast("f64_exp"), CLRenderer(extensions="cl_khr_fp64")).src
  assert "#pragma OPENCL EXTENSION cl_khr_fp64 : enable" in src and "double" in src

def test_half_native_with_cl_khr_fp16_else_through_vload_half():
  native = CLRenderer(extensions={"cl_khr_fp16"})
  assert dtypes.float16 in native.claimed_dtypes and dtypes.float64 not in native.claimed_dtypes
  src = get_program(ast("half"), native).src
  assert "cl_khr_fp16 : enable" in src and "__global half*" in src and "vload_half" not in src
  src = get_program(ast("half"), CLRenderer()).src
  assert "cl_khr_fp16" not in src and "__global ushort*" in src and "vload_half" in src and "vstore_half_rte" in src

@pytest.mark.parametrize("case", [c for c in CASES if c != "f64_exp"])
def test_every_kernel_case_renders(case):
  p = get_program(ast(case), CLRenderer())
  assert f"void {p.name}(" in p.src and "long long" not in p.src   # OpenCL C reserves long long

def test_int64_literals_use_the_l_suffix():
  r = CLRenderer()
  assert r.literal(3, dtypes.int64) == "3l" and r.literal(2**64 - 1, dtypes.uint64) == "18446744073709551615ul"
  assert r.literal(-2**63, dtypes.int64) == "(-9223372036854775807l-1)"

def test_only_a_partial_last_workgroup_has_work_items_to_retire():
  even = get_program((Tensor.empty(128, 64, device=DEV) @ Tensor.empty(64, 128, device=DEV)).schedule()[-1].ast, CLRenderer()).src
  ragged = get_program((Tensor.empty(130, 64, device=DEV) @ Tensor.empty(64, 90, device=DEV)).schedule()[-1].ast, CLRenderer()).src
  assert "return;" not in even and "return;" in ragged

def test_flop_estimate_counts_every_work_item():
  """GlobalCounters and DEBUG=2's GFLOP/s use the program's estimate: 2*M*N*K for a matmul, not one work-item's share."""
  assert get_program(matmul_ast(128, 64, 128), CLRenderer()).ops == 2 * 128 * 64 * 128

def test_the_tile_is_the_renderers_and_GPU_TILE_overrides_it():
  r = CLRenderer()
  r.register_tile = (8, 8)   # what device.py declares for a CPU driver such as PoCL
  assert get_program(matmul_ast(128, 64, 128), r).src.count("float acc") == 64
  with Context(GPU_TILE="2,2"): assert get_program(matmul_ast(128, 64, 128), r).src.count("float acc") == 4
