"""CL on a real OpenCL driver (PoCL on a CPU here): the runtime (buffers, builds, launches, timing) and results against
numpy. Skipped, with the reason, where no OpenCL device opens."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes, Variable, Device
from tinycore.codegen import get_program
from tinycore.compiler import CompileError
from tinycore.device import Buffer
from tinycore.testing.kernel_cases import kernel_cases
from tinycore_opencl import platforms

pytestmark = pytest.mark.skipif(bool(platforms.missing()), reason=f"CL can't open: {platforms.missing()}")
rng = np.random.default_rng(0)

@pytest.fixture(scope="module")
def cl(): return Device["CL"]

def test_matmul_with_ragged_shapes_matches_numpy(cl):
  a, b = rng.standard_normal((130, 70), np.float32), rng.standard_normal((70, 90), np.float32)
  np.testing.assert_allclose((Tensor(a, device="CL") @ Tensor(b, device="CL")).numpy(), a @ b, atol=1e-4, rtol=1e-4)

def test_tiled_matmul_matches_numpy(cl):
  a, b = rng.standard_normal((256, 128), np.float32), rng.standard_normal((128, 256), np.float32)
  np.testing.assert_allclose((Tensor(a, device="CL") @ Tensor(b, device="CL")).numpy(), a @ b, atol=1e-4, rtol=1e-4)

def test_dtypes_round_trip_and_compute(cl):
  h = rng.standard_normal(37).astype(np.float16)
  np.testing.assert_array_equal(Tensor(h, device="CL").numpy(), h)
  np.testing.assert_allclose((Tensor(h, device="CL") * 3 + 1).numpy(), (h.astype(np.float32) * 3 + 1).astype(np.float16), rtol=1e-3)
  i = rng.integers(-2**40, 2**40, 19, dtype=np.int64)
  np.testing.assert_array_equal(((Tensor(i, device="CL") << 3) ^ Tensor(i, device="CL")).numpy(), (i << 3) ^ i)
  f = rng.standard_normal(21).astype(np.float32)
  np.testing.assert_array_equal((Tensor(f, device="CL") > 0).numpy(), f > 0)
  np.testing.assert_array_equal(Tensor(f, device="CL").bitcast(dtypes.int32).numpy(), f.view(np.int32))
  a, b = np.array([7, -7, 5, -9], np.int32), np.array([2, 2, 3, -4], np.int32)
  np.testing.assert_array_equal((Tensor(a, device="CL") // Tensor(b, device="CL")).numpy(), a // b)
  bf = Tensor(f, device="CL").cast(dtypes.bfloat16).cast(dtypes.float32).numpy()
  np.testing.assert_allclose(bf, f, rtol=2**-8)

def test_float64_where_the_device_has_it(cl):
  if dtypes.float64 not in cl.renderer.claimed_dtypes: pytest.skip("this OpenCL device lacks cl_khr_fp64")
  d = rng.standard_normal(33)
  np.testing.assert_allclose(Tensor(d, device="CL").exp().numpy(), np.exp(d), rtol=1e-12)

def test_symbolic_size_is_a_kernel_argument(cl):
  x = rng.standard_normal(40).astype(np.float32)
  n = Variable("n", 1, 40)
  for v in (7, 40):
    out = (Tensor(x, device="CL")[:n.bind(v)] * 2).sum().numpy()
    np.testing.assert_allclose(out, x[:v].sum() * 2, rtol=1e-5)

def test_launch_returns_profiled_seconds(cl):
  p = get_program((Tensor.empty(64, 64, device="CL") @ Tensor.empty(64, 64, device="CL")).schedule()[-1].ast, cl.renderer)
  prg = cl.runtime(p.name, cl.compiler.compile_cached(p.src))
  bufs = [cl.allocator.alloc(64 * 64 * 4) for _ in range(3)]
  t = prg(*bufs, global_size=p.global_size, local_size=p.local_size, wait=True)
  assert isinstance(t, float) and 0 < t < 10

def test_views_are_sub_buffers_at_aligned_offsets(cl):
  align = platforms.describe(cl.c.dev)["mem_align"]
  base = Buffer("CL", 2 * align, dtypes.uint8).ensure_allocated().copyin(memoryview(np.arange(2 * align, dtype=np.uint8) % 251))
  np.testing.assert_array_equal(np.frombuffer(base.view(8, dtypes.uint8, align).as_buffer(), np.uint8), np.arange(align, align + 8) % 251)
  with pytest.raises(NotImplementedError, match="aligned"): base.view(4, dtypes.uint8, 1).ensure_allocated()

def test_a_build_error_shows_the_source_and_the_drivers_log(cl):
  with pytest.raises(CompileError) as e: cl.compiler.compile("__kernel void k(__global float* a) { a[0] = undefined_thing; }")
  assert "1 | __kernel" in str(e.value) and "undefined_thing" in e.value.log

@pytest.mark.parametrize("case", list(kernel_cases("CL")))
def test_every_kernel_case_builds_on_the_driver(cl, case):
  if case == "f64_exp" and dtypes.float64 not in cl.renderer.claimed_dtypes: pytest.skip("no cl_khr_fp64")
  p = get_program(kernel_cases("CL")[case]().schedule()[-1].ast, cl.renderer)
  assert cl.compiler.compile(p.src)

def test_renderer_carries_the_devices_limits_and_extensions(cl):
  info = platforms.describe(cl.c.dev)
  r = cl.renderer
  assert r.shared_max == info["local_mem"] and max(r.local_max) <= info["max_workgroup"]
  assert (dtypes.float64 in r.claimed_dtypes) == ("cl_khr_fp64" in info["extensions"])
  assert r.register_tile == ((8, 8) if info["is_cpu"] else (4, 8))
