"""Convolution as an implicit GEMM on the shared-memory tensor-core path (codegen/gemm_view.py + opt_smem.py),
provable without a GPU:
- EMU+NV runs forward convolutions bit-exact against torch (small integers: every fp32 sum is exact) for channels that
  aren't multiples of any tile (3, 17, 33), padding 0/1, stride 1/2, NCHW and NHWC inputs; the backward passes
  (input gradient, weight gradient) reduce to the same GEMM shape and run staged too;
- gated copies: the tails of sizes that aren't tile multiples read zeros (cp.async's zero-fill form, source size 0),
  and the emulator checks the bounds of every copy that isn't gated off;
- ptxas -v for sm_90: the default conv tiles have no spills and >= 2 blocks per SM on an H200; the SASS has HMMA,
  LDSM and LDGSTS."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.codegen import get_program, prepare_kernel
from tinycore.codegen.gemm_view import match
from tinycore.codegen.opt_smem import ASYNC
from tinycore.emulator import EmulatedRenderer
from tinycore.uop import Ops
from tinycore_nv.renderer_cuda import CUDARenderer
from tinycore_nv.emulator import model as nv_model
from tinycore_nv.nvrtc import find_nvrtc, NVRTCCompiler
from tinycore_nv.ptxas import find_ptxas, ptxas_with_log
from tinycore_nv.occupancy import ptxas_usage, blocks_per_sm, H200, find_sass_tool

torch = pytest.importorskip("torch")
DEV = "EMU+NV"

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = DEV

def _emu() -> EmulatedRenderer: return EmulatedRenderer(CUDARenderer("sm_90"), nv_model("NV", "sm_90"))
def _staged(ast) -> bool:
  p = get_program(ast, _emu())
  return any(u.op is Ops.DEFINE_LOCAL for u in p.uops) and any(u.op is Ops.WMMA for u in p.uops)

def _input(x: np.ndarray, nhwc: bool) -> Tensor:
  return Tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2) if nhwc else Tensor(x)

CASES = [(3, 16, 1, 1), (17, 17, 0, 2), (33, 33, 1, 2), (17, 8, 1, 1), (33, 16, 0, 1)]

@pytest.mark.needs_device
@pytest.mark.parametrize("nhwc", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("cin,cout,pad,stride", CASES, ids=lambda v: str(v))
def test_conv_forward_bit_exact(cin, cout, pad, stride, nhwc):
  rng = np.random.default_rng(cin * 7 + cout + pad + stride)
  x = rng.integers(-3, 4, (2, cin, 9, 7)).astype(np.float16)
  w = rng.integers(-3, 4, (cout, cin, 3, 3)).astype(np.float16)
  out = _input(x, nhwc).conv2d(Tensor(w), padding=pad, stride=stride)
  assert _staged(out.schedule()[-1].ast), "the convolution was not an implicit GEMM through shared memory"
  ref = torch.nn.functional.conv2d(torch.tensor(x.astype(np.float32)), torch.tensor(w.astype(np.float32)), padding=pad, stride=stride)
  np.testing.assert_array_equal(out.numpy().astype(np.float32), ref.numpy())

@pytest.mark.needs_device
def test_conv_backward_data_and_weight_are_staged_and_exact():
  rng = np.random.default_rng(3)
  x = rng.integers(-3, 4, (2, 17, 8, 8)).astype(np.float16)
  w = rng.integers(-3, 4, (24, 17, 3, 3)).astype(np.float16)
  g = rng.integers(-2, 3, (2, 24, 8, 8)).astype(np.float16)
  tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
  (tx.conv2d(tw, padding=1) * Tensor(g)).float().sum().backward()
  # the input gradient's GEMM (grad_out x weight over the output channels) and the weight gradient's (over n, oh, ow)
  staged = [si.ast for t in (tx.grad, tw.grad) for si in t.schedule() if _staged(si.ast)]
  assert len(staged) >= 2, "both gradient GEMMs should run on the staged tensor-core path"
  xr, wr = torch.tensor(x.astype(np.float32), requires_grad=True), torch.tensor(w.astype(np.float32), requires_grad=True)
  (torch.nn.functional.conv2d(xr, wr, padding=1) * torch.tensor(g.astype(np.float32))).sum().backward()
  np.testing.assert_array_equal(tx.grad.numpy().astype(np.float32), xr.grad.numpy())
  np.testing.assert_array_equal(tw.grad.numpy().astype(np.float32), wr.grad.numpy())

@pytest.mark.needs_device
def test_tails_are_zero_filled_async_copies():
  """Sizes that aren't tile multiples (m 46, n 24, k 40 against 16x16x32-and-up tiles): the copies past an end are
  16-byte cp.async with source size 0 (zero fill), the stores past it are skipped; bit-exact in the emulator, which
  checks the bounds of every copy that isn't gated off, and the CUDA source has the zero-fill form."""
  rng = np.random.default_rng(7)
  a, b = rng.integers(-3, 4, (46, 40)).astype(np.float16), rng.integers(-3, 4, (40, 24)).astype(np.float16)
  out = Tensor(a) @ Tensor(b)
  ast = out.schedule()[-1].ast
  g = match(prepare_kernel(ast, "NV"), CUDARenderer("sm_90"))
  assert g is not None and (g.M, g.N, g.K) == (46, 24, 40) and g.A.copy == 8
  p = get_program(ast, _emu())
  gated = [u for u in p.uops if u.op is Ops.STORE and u.arg == ASYNC and len(u.src[1].src[0].src) == 3]
  assert gated, "no zero-filled asynchronous copy"
  assert "cp.async.cg.shared.global [%0], [%1], 16, %2;" in get_program(ast, CUDARenderer("sm_90")).src
  np.testing.assert_array_equal(out.numpy().astype(np.float32), a.astype(np.float32) @ b.astype(np.float32))

def test_im2col_operands_copy_widths():
  """NCHW input: an element gather (3x3 windows break 16-byte alignment); OIHW weight: k = (c, kh, kw) is one
  contiguous run, so 16-byte copies; NHWC input (no padding): the channels are contiguous, 16-byte copies."""
  def view(nhwc):
    x = Tensor.empty(2, 10, 10, 16, dtype=dtypes.half).permute(0, 3, 1, 2) if nhwc else Tensor.empty(2, 16, 10, 10, dtype=dtypes.half)
    return match(prepare_kernel(x.conv2d(Tensor.empty(32, 16, 3, 3, dtype=dtypes.half)).schedule()[-1].ast, "NV"), CUDARenderer("sm_90"))
  g = view(False)
  assert (g.M, g.N, g.K) == (2 * 8 * 8, 32, 16 * 9) and (g.A.copy, g.B.copy) == (1, 8)
  assert view(True).A.copy == 8

needs_nvrtc = pytest.mark.skipif(find_nvrtc() is None or find_ptxas() is None, reason="NVRTC or ptxas not found (no CUDA toolkit)")

def _compile(ast):
  p = get_program(ast, CUDARenderer("sm_90"))
  cubin, log = ptxas_with_log(NVRTCCompiler("sm_90").to_ptx(p.src), "sm_90")
  return p, cubin, log

def _bench_conv(nhwc: bool):
  # bench/gpu.py's conv (a ResNet stage, 3x3): NCHW with padding 1; NHWC without (the padding kernel would write NCHW)
  N, C, H, K = 32, 256, 56, 256
  if nhwc: x = Tensor.empty(N, H + 2, H + 2, C, dtype=dtypes.half).permute(0, 3, 1, 2)
  else: x = Tensor.empty(N, C, H, H, dtype=dtypes.half)
  return x.conv2d(Tensor.empty(K, C, 3, 3, dtype=dtypes.half), padding=0 if nhwc else 1).schedule()[-1].ast

@needs_nvrtc
@pytest.mark.parametrize("nhwc", [False, True], ids=["nchw", "nhwc"])
def test_conv_ptxas_no_spills_two_blocks_and_sass(nhwc):
  p, cubin, log = _compile(_bench_conv(nhwc))
  assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops)
  use = ptxas_usage(log)
  assert use["spill_stores"] == 0 and use["spill_loads"] == 0 and use["stack"] == 0, log
  assert blocks_per_sm(use["registers"], use["smem"], p.local_size[0], H200) >= 2, use
  if find_sass_tool() is None: pytest.skip("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
  from tinycore_nv.occupancy import sass_counts
  c = sass_counts(cubin)
  assert c["HMMA"] >= 32 and c["LDSM"] > 0 and c["LDGSTS"] > 0 and c["FADD"] == 0, c

# ---- the padding halo read by the staged conv itself (Renderer.prepad_windows = False on NV)

@pytest.mark.needs_device
@pytest.mark.parametrize("nhwc", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.float32], ids=["half", "fp32"])
def test_padding_fuses_into_the_staged_conv(dt, nhwc):
  """conv2d(padding=1): one kernel (no separate pad kernel and buffer), the halo read as zeros by gated copies
  (zero-filling cp.async where a copy moves 4 or 16 bytes), bit-exact; PREPAD's CPU policy would add the pad kernel."""
  from tinycore.helpers import Context
  import tinycore.engine.schedule  # noqa: F401  (defines PREPAD)
  rng = np.random.default_rng(11)
  x, w = rng.integers(-3, 4, (2, 16, 9, 7)).astype(np.float32), rng.integers(-3, 4, (24, 16, 3, 3)).astype(np.float32)
  npdt = np.float16 if dt == dtypes.half else np.float32
  out = _input(x.astype(npdt), nhwc).conv2d(Tensor(w.astype(npdt)), padding=1)
  sched = [si for si in out.schedule() if si.ast.op is Ops.SINK]
  assert len(sched) == 1, [si.ast for si in sched]
  p = get_program(sched[0].ast, _emu())
  assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops), "not staged through shared memory"
  gated = [u for u in p.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_LOCAL and u.src[1].op is Ops.LOAD
           and len(u.src[1].src[0].src) == 3]
  assert gated, "no gated (zero-filling) copy reads the halo"
  if dt == dtypes.float32: assert any(u.arg == ASYNC for u in gated)   # 4- or 16-byte copies: cp.async's zero-fill form
  ref = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64), padding=1).numpy()
  np.testing.assert_array_equal(out.numpy().astype(np.float64), ref)
  with Context(PREPAD=1):   # the renderer's choice, not the PREPAD switch, keeps the pad fused
    assert len([si for si in out.schedule() if si.ast.op is Ops.SINK]) == 1

@pytest.mark.needs_device
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.float32], ids=["half", "fp32"])
def test_nchw_output_stores_16_bytes_along_ow(dt):
  """An NCHW output runs along ow (part of m): the C tile goes out transposed through the panels (codegen/c_tile.py),
  8 halves / 4 floats per store where ow is a multiple of that; bit-exact."""
  rng = np.random.default_rng(12)
  npdt = np.float16 if dt == dtypes.half else np.float32
  x, w = rng.integers(-3, 4, (2, 16, 8, 16)).astype(npdt), rng.integers(-3, 4, (24, 16, 3, 3)).astype(npdt)
  out = Tensor(x).conv2d(Tensor(w), padding=1)
  p = get_program(out.schedule()[-1].ast, _emu())
  vec = [u.src[0].arg for u in p.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
  assert set(vec) == {("vec", 16 // np.dtype(npdt).itemsize, 16)}, set(vec)
  ref = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64), padding=1).numpy()
  np.testing.assert_array_equal(out.numpy().astype(np.float64), ref)
