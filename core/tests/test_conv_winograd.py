"""Winograd F(2,3) and F(4,3) convolutions (conv_winograd.py): forward and both gradients against torch in float64 at odd
sizes, 1-pixel maps, batch 1, channel counts off the vector width, padding 0/1/asymmetric; which convs take the path
(the eligibility rules and the CPU renderer's choice); and the two codegen/scheduler pieces it relies on.

Tolerances, relative to the largest reference value: the direct conv's float32 error grows like sqrt(reduce length);
Winograd adds the rounding of its transforms, whose entries reach 8 (F(4,3)'s A^T) and 1/24 (its G). Measured against
float64 at unit-variance inputs and weights scaled 1/sqrt(9 cin) (/tmp runs, reported with the branch): F(4,3)
6.5e-6 at cin 64, 1.4e-5 at 256, 1.8e-5 at 512, i.e. ~8e-7 sqrt(cin); F(2,3) 3e-7..1e-6, below the direct conv's
2e-6. The tests allow 3x those (F(4,3): 2.5e-6 sqrt(cin) + 2e-6; F(2,3): 1e-6 sqrt(cin) + 2e-6): tight enough that a
wrong transform coefficient (errors of order 1e-1) or a lost tile row fails by orders of magnitude."""
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
torch = pytest.importorskip("torch")
F = torch.nn.functional
from tinycore import Tensor, Device, dtypes
from tinycore.helpers import Context
from tinycore import conv_winograd

# (batch, cin, h, w, cout, padding)
CASES = [
  (1, 3, 7, 7, 5, 1), (2, 16, 14, 14, 16, 1), (1, 17, 15, 15, 19, 1), (2, 5, 17, 13, 7, 0), (1, 1, 1, 1, 1, 1),
  (3, 2, 3, 3, 4, 0), (1, 33, 9, 16, 31, 1), (2, 8, 56, 56, 8, 1), (1, 4, 6, 11, 3, (1, 0, 2, 1)), (1, 7, 2, 5, 6, 1),
]

def _tol(m: int, cin: int) -> float: return (2.5e-6 if m == 4 else 1e-6) * cin ** 0.5 + 2e-6

def _conv(case, m):
  n, cin, h, w, cout, p = case
  rng = np.random.default_rng(sum(case) if isinstance(p, int) else sum(case[:5]))
  xn = rng.standard_normal((n, cin, h, w)).astype(np.float32)
  wn = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(9 * cin)).astype(np.float32)
  with Context(WINOGRAD=m):
    x, wt = Tensor(xn).requires_grad_(), Tensor(wn).requires_grad_()
    out = x.conv2d(wt, padding=p)
    gn = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(Tensor(gn))
    got = [out.numpy(), x.grad.numpy(), wt.grad.numpy()]
  tx = torch.tensor(xn.astype(np.float64), requires_grad=True)
  tw = torch.tensor(wn.astype(np.float64), requires_grad=True)
  tp = p if isinstance(p, int) else 0
  txp = tx if isinstance(p, int) else F.pad(tx, p)
  tout = F.conv2d(txp, tw, padding=tp)
  tout.backward(torch.tensor(gn.astype(np.float64)))
  return zip(("output", "input grad", "weight grad"), got, [tout.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()])

# F(4,3) (what the CPU renderer picks) at every case, F(2,3) (WINOGRAD=2 only) at every other one
@pytest.mark.parametrize("case,m", [(c, 4) for c in CASES] + [(c, 2) for c in CASES[::2]],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else f"F{v}")
def test_winograd_matches_torch(case, m):
  for name, g, e in _conv(case, m):
    assert g.shape == e.shape, f"{name} shape {g.shape} != torch {e.shape}"
    err = np.abs(g - e).max() / max(np.abs(e).max(), 1e-6)
    # the input gradient is itself a 3x3 stride-1 conv over cout channels (the flipped weight): it takes the same path
    assert err < _tol(m, case[1] if name != "input grad" else case[4]), f"F({m},3) {name}: max error {err:.2e} of its scale"

def test_winograd_path_is_taken(monkeypatch):
  calls = []
  real = conv_winograd.conv_winograd
  monkeypatch.setattr(conv_winograd, "conv_winograd", lambda *a: calls.append(a[3]) or real(*a))
  x, w = Tensor.randn(1, 4, 9, 9), Tensor.randn(4, 4, 3, 3)
  with Context(WINOGRAD=4): x.conv2d(w, padding=1).realize()
  with Context(WINOGRAD=2): x.conv2d(w, padding=1).realize()
  with Context(WINOGRAD=0): x.conv2d(w, padding=1).realize()
  assert calls == [4, 2]

@pytest.mark.parametrize("kw", [dict(stride=2), dict(dilation=2), dict(groups=2)])
def test_not_eligible(kw):
  # strided, dilated and grouped convs are outside F(m,3): even forced, they take the direct path
  x, w = Tensor.randn(1, 4, 9, 9), Tensor.randn(4, 4 // kw.get("groups", 1), 3, 3)
  with Context(WINOGRAD=4):
    assert conv_winograd.winograd_tile(x, w, kw.get("groups", 1), (kw.get("stride", 1),) * 2, (kw.get("dilation", 1),) * 2,
                                       [(1, 1)] * 2, None) == 0
    np.testing.assert_allclose(x.conv2d(w, padding=1, **kw).numpy(),
                               F.conv2d(torch.tensor(x.numpy()), torch.tensor(w.numpy()), padding=1, **kw).numpy(), atol=2e-5, rtol=2e-5)

def test_not_eligible_shapes_and_dtypes():
  def tile(x, w, pads=((1, 1), (1, 1)), dtype=None):
    with Context(WINOGRAD=4): return conv_winograd.winograd_tile(x, w, 1, (1, 1), (1, 1), list(pads), dtype)
  x, w = Tensor.randn(1, 4, 9, 9), Tensor.randn(4, 4, 3, 3)
  assert tile(x, w) == 4
  assert tile(x, Tensor.randn(4, 4, 5, 5)) == 0                       # not 3x3
  assert tile(x.cast(dtypes.float16), w.cast(dtypes.float16)) == 0    # float32 only
  assert tile(x, w, dtype=dtypes.float32) == 0                         # an explicit accumulation dtype keeps the direct sum
  assert tile(Tensor.randn(1, 4, 9), Tensor.randn(4, 4, 3)) == 0       # 1-d
  assert tile(Tensor.randn(1, 4, 1, 1), w, pads=((0, 0), (0, 0))) == 0  # no output

@pytest.mark.skipif(Device.DEFAULT != "CPU", reason="the CPU renderer's crossover")
@pytest.mark.parametrize("shape,want", [((16, 64, 56, 56, 64), 4), ((16, 128, 28, 28, 128), 4), ((1, 64, 56, 56, 64), 4),
                                        ((16, 256, 14, 14, 256), 4), ((1, 64, 28, 28, 64), 4), ((16, 16, 56, 56, 16), 0),
                                        ((1, 512, 7, 7, 512), 0), ((16, 512, 7, 7, 512), 0), ((1, 256, 14, 14, 256), 0),
                                        ((1, 3, 224, 224, 64), 0)])
def test_cpu_choice(shape, want):
  bs, cin, h, w, cout = shape
  assert Device["CPU"].renderer.winograd_tile(bs, cin, cout, h, w) == want

def test_stacked_axis_unrolled():
  # Tensor.stack of computed slices: the stacked axis is unrolled whole (its gates fold away, no gated load is left);
  # a pad along a short axis indexes memory along it, and is not
  from tinycore.codegen import lower_kernel, get_program
  from tinycore.codegen import opt as O
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  xn = np.random.default_rng(0).random((4, 10, 32), dtype=np.float32)
  x = Tensor(xn).realize()
  y = Tensor.stack(*[x[:, i] + 2 * x[:, i + 1] - x[:, i + 2] for i in range(6)], dim=0)
  (si,) = y.schedule()
  r = Device[x.device].renderer
  opts = O.heuristic_opts(graph_rewrite(lower_kernel(si.ast), symbolic), r)
  assert ("UPCAST", opts[0][1], 6) == opts[0], opts
  if r.device == "CPU":
    prog = get_program(si.ast, r)
    assert not any(u.op.name == "INDEX" and len(u.src) > 2 for u in prog.uops), "a gated load survived the unroll"
  np.testing.assert_allclose(y.numpy(), np.stack([xn[:, i] + 2 * xn[:, i + 1] - xn[:, i + 2] for i in range(6)]), rtol=1e-6)
  (si,) = x.pad(((0, 0), (1, 1), (0, 0))).schedule()
  assert not any(o[0] == "UPCAST" for o in O.heuristic_opts(graph_rewrite(lower_kernel(si.ast), symbolic), r))

def test_reshaped_contiguous_is_one_kernel():
  # the output (bs, cout, th, m, tw, m) reshaped to NCHW is that buffer, not a copy into a second one
  xn = np.random.default_rng(1).random((2, 3, 4, 5), dtype=np.float32)
  x = Tensor(xn).realize()
  y = Tensor.stack(x + 1, x * 2, dim=2).contiguous().reshape(2, 3, 40)
  assert len(y.schedule()) == 1
  np.testing.assert_allclose(y.numpy(), np.stack([xn + 1, xn * 2], 2).reshape(2, 3, 40))
  np.testing.assert_allclose((y + 1).numpy(), np.stack([xn + 1, xn * 2], 2).reshape(2, 3, 40) + 1)
