"""conv2d forward and both gradients against torch.nn.functional.conv2d in float64: kernel sizes, strides, padding,
dilation, groups (depthwise), channel counts around the vector widths, batch 1, odd sizes; float32 and float16.
The gradients come from conv_backward.py (the transposed conv and the per-sample weight reduce), not autograd."""
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
torch = pytest.importorskip("torch")
F = torch.nn.functional
from tinycore import Tensor, dtypes

# (batch, cin, h, w, cout, kernel, stride, padding, dilation, groups)
CASES = [
  (2, 3, 9, 7, 4, 3, 1, 1, 1, 1), (1, 16, 8, 8, 16, 3, 1, 1, 1, 1), (1, 17, 7, 9, 15, 3, 1, 1, 1, 1),
  (2, 32, 6, 6, 33, 3, 1, 1, 1, 1), (1, 31, 5, 11, 32, 1, 1, 0, 1, 1), (2, 15, 10, 10, 17, 1, 2, 0, 1, 1),
  (1, 1, 13, 13, 1, 5, 1, 2, 1, 1), (2, 3, 12, 11, 8, 5, 2, 2, 1, 1), (1, 16, 11, 11, 16, 3, 2, 1, 1, 1),
  (2, 4, 9, 9, 6, 3, 1, 2, 2, 1), (1, 33, 9, 7, 33, 3, 1, 1, 1, 33), (2, 16, 10, 9, 32, 3, 2, 1, 1, 16),
  (1, 6, 8, 8, 9, 3, 1, 0, 1, 3), (1, 4, 7, 7, 4, 3, 3, 0, 2, 2), (1, 3, 5, 5, 2, 1, 1, 3, 1, 1),
  (1, 64, 14, 14, 64, 3, 1, 1, 1, 1),
  # strided, output channels a multiple of 16: conv_layout.py's channels-last form where the renderer has a register block
  (2, 17, 9, 10, 32, 3, 2, 1, 1, 1), (2, 15, 10, 10, 16, 1, 2, 0, 1, 1), (1, 3, 13, 12, 16, 5, 2, 2, 1, 1),
  (1, 8, 11, 11, 16, 3, 2, 2, 2, 1),
  # stride 1 with output channels a multiple of 16: the same form (channels-last input, (*k, cin, cout) weight, NCHW
  # output stored lane by lane); input channels around the vector width, odd sizes, 1x1/3x3/5x5, padding 0/1/2, dilation
  (1, 1, 9, 9, 16, 3, 1, 1, 1, 1), (2, 3, 9, 11, 16, 3, 1, 1, 1, 1), (1, 15, 7, 13, 32, 3, 1, 1, 1, 1),
  (1, 16, 8, 8, 32, 3, 1, 0, 1, 1), (2, 17, 5, 7, 16, 1, 1, 0, 1, 1), (1, 31, 9, 9, 48, 3, 1, 2, 2, 1),
  (1, 32, 11, 7, 16, 5, 1, 2, 1, 1), (1, 33, 6, 10, 32, 3, 1, 1, 1, 1), (3, 8, 5, 5, 64, 5, 1, 0, 1, 1),
  (2, 5, 10, 16, 32, 3, 1, 1, 1, 1), (1, 3, 7, 7, 128, 3, 1, 1, 1, 1),   # 8-pixel rows (a transposed epilogue); 4 panels
]

def _run(case, dtype):
  n, cin, h, w, cout, k, s, p, dl, g = case
  rng = np.random.default_rng(sum(case))
  xn = rng.standard_normal((n, cin, h, w)).astype(np.float32)
  wn = (rng.standard_normal((cout, cin // g, k, k)) / np.sqrt(cin // g * k * k)).astype(np.float32)
  x = Tensor(xn.astype(dtype)).requires_grad_()
  wt = Tensor(wn.astype(dtype)).requires_grad_()
  out = x.conv2d(wt, stride=s, padding=p, dilation=dl, groups=g)
  gn = rng.standard_normal(out.shape).astype(np.float32)
  out.backward(Tensor(gn.astype(dtype)))
  tx = torch.tensor(xn.astype(dtype).astype(np.float64), requires_grad=True)
  tw = torch.tensor(wn.astype(dtype).astype(np.float64), requires_grad=True)
  tout = F.conv2d(tx, tw, stride=s, padding=p, dilation=dl, groups=g)
  tout.backward(torch.tensor(gn.astype(dtype).astype(np.float64)))
  return [(out, tout), (x.grad, tx.grad), (wt.grad, tw.grad)]

def _check(pairs, dtype, rtol):
  for name, (got, exp) in zip(("output", "input grad", "weight grad"), pairs):
    assert got.dtype == dtypes.from_np(np.dtype(dtype)), f"{name} dtype {got.dtype}"
    g, e = got.numpy().astype(np.float64), exp.detach().numpy()
    assert g.shape == e.shape, f"{name} shape {g.shape} != torch {e.shape}"
    # relative to the tensor's scale: an element that cancels to ~0 has no meaningful relative error
    err = np.abs(g - e).max() / max(np.abs(e).max(), 1e-6)
    assert err < rtol, f"{name}: max error {err:.2e} of its scale (tolerance {rtol:.0e})"

@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_conv2d_float32(case): _check(_run(case, np.float32), np.float32, 2e-6 * max(1, case[1] // case[9] * case[5]) ** 0.5 + 2e-6)

@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[8], CASES[10], CASES[21], CASES[27]], ids=lambda c: "x".join(map(str, c)))
def test_conv2d_float16(case):
  # inputs rounded to half on both sides; the result rounds once more to half (2^-11 relative) after a float32 sum
  _check(_run(case, np.float16), np.float16, 4e-3)

def test_conv_double_backward():
  """The input gradient is itself a convolution with a registered backward: d(sum(dL/dx * v))/dw matches torch."""
  rng = np.random.default_rng(3)
  xn, wn, vn = rng.standard_normal((1, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal((1, 3, 6, 6))
  x, w = Tensor(xn.astype(np.float32)).requires_grad_(), Tensor(wn.astype(np.float32)).requires_grad_()
  gx = x.conv2d(w, padding=1, stride=1).sum().gradient(x)[0]
  got = (gx * Tensor(vn.astype(np.float32))).sum().gradient(w)[0].numpy()
  tx, tw = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
  tgx, = torch.autograd.grad(F.conv2d(tx, tw, padding=1).sum(), tx, create_graph=True)
  exp, = torch.autograd.grad((tgx * torch.tensor(vn)).sum(), tw)
  np.testing.assert_allclose(got, exp.numpy(), rtol=1e-4, atol=1e-4)

def test_conv_takes_channels_last_on_a_register_blocked_renderer():
  """Which form a conv takes follows the renderer's capability (no device name): with a register block the output
  channels go innermost, without one the plain form stays."""
  from tinycore import conv_layout
  from tinycore.device import Device
  x, w = Tensor.empty(2, 8, 10, 10), Tensor.empty(16, 8, 3, 3)
  has_block = Device[x.device].renderer.register_block is not None
  assert conv_layout.wants_channels_last(x, w, 1, (1, 1), None) == has_block
  assert conv_layout.wants_channels_last(x, Tensor.empty(16, 8, 1, 1), 1, (2, 2), None) == has_block
  assert not conv_layout.wants_channels_last(x, Tensor.empty(15, 8, 3, 3), 1, (1, 1), None)   # 15 channels: no whole vectors
  assert not conv_layout.wants_channels_last(x, Tensor.empty(16, 4, 3, 3), 2, (1, 1), None)   # grouped: the plain form
  assert not conv_layout.wants_channels_last(x, Tensor.empty(16, 8, 1, 1), 1, (1, 1), None)   # 1x1 stride 1: a matmul

@pytest.mark.parametrize("stride,cout", [(1, 64), (2, 64), (1, 128), (1, 48)])
def test_conv_takes_the_register_block(stride, cout):
  """The fast path is taken: the conv's reduce kernel vectorizes its 16-lane output channels (stored into NCHW lane by
  lane, VEC_S), widens them to the block's columns and tiles output pixels as its rows; the input is read channels-last."""
  from tinycore.codegen import lower_kernel
  from tinycore.codegen.opt import heuristic_opts
  from tinycore.device import Device
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  from tinycore.codegen.split import split_ranges
  x, w = Tensor.empty(2, 64, 14, 14), Tensor.empty(cout, 64, 3, 3)
  r = Device[x.device].renderer
  if r.register_block is None or not r.vector_types: pytest.skip("the renderer has no register block")
  sched = x.conv2d(w, padding=1, stride=stride).schedule()
  red = [si for si in sched if "r_" in str(getattr(si, "name", "")) or any(u.op.name == "REDUCE_AXIS" for u in si.ast.toposort())]
  assert len(red) == 1, [str(si) for si in sched]
  # (as codegen does: an axis read as c // 32 and c % 32, the weight's panels, split in two ranges first)
  opts = heuristic_opts(split_ranges(graph_rewrite(lower_kernel(red[0].ast), symbolic)), r)
  assert opts[0][0] == "VEC_S" and opts[0][2] == 16, opts
  if cout % 32 == 0: assert opts[1] == ("UPCAST", opts[0][1], r.register_block[1] // 16), opts
  assert any(o[0] == "UPCAST" and o[1] != opts[0][1] and o[2] >= 4 for o in opts[1:]), opts
  # the others are layout copies (the input channels-last and padded, the weight into panels), none of the output
  assert len(sched) == 4

def test_beam_searches_the_conv_tile(tmp_path):
  """BEAM's action space for the channels-last conv has the lane-stored vector (VEC_S) and 7-pixel rows, and what it
  picks computes the conv (float64 torch)."""
  from tinycore import Context
  from tinycore.codegen import prepare_kernel
  from tinycore.codegen.search import next_actions
  from tinycore.codegen import opt as O
  from tinycore.device import Device
  rng = np.random.default_rng(5)
  xn, wn = rng.standard_normal((2, 16, 14, 14)).astype(np.float32), rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
  x, w = Tensor(xn), Tensor(wn)
  r = Device[x.device].renderer
  if r.register_block is not None and r.vector_types:
    k = prepare_kernel(x.conv2d(w, padding=1).schedule()[-1].ast, x.device)
    first = next_actions(k, r, ())
    assert any(a[0] == "VEC_S" and a[2] == 16 for a in first), first
    vs = next(a for a in first if a[0] == "VEC_S")
    assert any(a[0] == "UPCAST" and a[2] == 7 for a in next_actions(O.apply_opts(k, (vs,)), r, (vs,)))
  with Context(BEAM=2, IGNORE_BEAM_CACHE=1, CACHEDB=str(tmp_path)):
    got = x.conv2d(w, padding=1).numpy()
  exp = F.conv2d(torch.tensor(xn, dtype=torch.float64), torch.tensor(wn, dtype=torch.float64), padding=1).numpy()
  assert np.abs(got - exp).max() / np.abs(exp).max() < 1e-5
