"""codegen/split.py: an output range read as g // c and g % c is split in two, so the optimizer sees the unit stride;
and the panel-packed matmul operand (Tensor._panels) that relies on it."""
import numpy as np
import pytest
from tinycore import Tensor, Device
from tinycore.uop import Ops
from tinycore.codegen import get_program
pytestmark = pytest.mark.needs_device

def test_panel_packed_matmul_splits_and_vectorizes():
  n, P = 64, 16
  a, b = np.random.default_rng(0).standard_normal((2, n, n)).astype(np.float32)
  bp = Tensor(b).reshape(n, n // P, P).permute(1, 0, 2).contiguous()          # panels [N/16][K][16]
  out = Tensor(a) @ bp.permute(1, 0, 2).reshape(n, n)
  p = get_program(out.schedule()[-1].ast, Device[Device.DEFAULT].renderer)
  ranges = [u for u in p.uops if u.op is Ops.RANGE and u.arg[0] == "g"]
  assert not any(u.op in (Ops.IDIV, Ops.MOD) and u.src[0] in ranges for u in p.uops)   # no n // 16, n % 16 left
  if Device[Device.DEFAULT].renderer.supports_float4:   # the 16 columns of a panel are one vector load
    assert any(u.op is Ops.LOAD and u.dtype.count > 1 for u in p.uops)
  np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("panels", [2, 3, 5])
def test_two_or_three_panels_split_too(panels):
  """A right operand of 2 or 3 panels (N = 50 padded to 64, N = 96) is split as well, its outer range under 4 long: left
  whole it had no unit-stride axis, and the matmul ran as scalar dot products (1000x1000 @ 1000x50: 63 ms, 30x slower)."""
  n, P = 48, 16
  rng = np.random.default_rng(panels)
  a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, panels * P)).astype(np.float32)
  bp = Tensor(b).reshape(n, panels, P).permute(1, 0, 2).contiguous()          # panels [N/16][K][16]
  out = Tensor(a) @ bp.permute(1, 0, 2).reshape(n, panels * P)
  p = get_program(out.schedule()[-1].ast, Device[Device.DEFAULT].renderer)
  ranges = [u for u in p.uops if u.op is Ops.RANGE and u.arg[0] == "g"]
  assert not any(u.op in (Ops.IDIV, Ops.MOD) and u.src[0] in ranges for u in p.uops)
  if Device[Device.DEFAULT].renderer.supports_float4:
    assert any(u.op is Ops.LOAD and u.dtype.count > 1 for u in p.uops)
  np.testing.assert_allclose(out.numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)

def test_split_keeps_values_and_loop_names():
  x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
  t = Tensor(x).permute(3, 2, 1, 0).reshape(24, 1, 6)   # (w h) merged: read back as g // 4, g % 4
  np.testing.assert_array_equal(t.numpy(), x.transpose(3, 2, 1, 0).reshape(24, 1, 6))
  p = get_program((t + 1).schedule()[-1].ast, Device[Device.DEFAULT].renderer)
  names = [u.arg for u in p.uops if u.op is Ops.RANGE]
  assert len(names) == len(set(names))

def test_big_matmul_reads_b_through_panels():
  """Where the device asks for it (Renderer.matmul_panels, the C renderer), a matmul's right operand is copied into
  panels first when that pays: a transposed B (x @ W.T) from 64 rows of x, a row-major B once it outgrows half of L2.
  One more kernel, the same values; small matmuls and a row-major B of 64 KB (under half of any L2) are left alone."""
  p = Device[Device.DEFAULT].renderer.matmul_panels(512, 256, 768, True)
  rng = np.random.default_rng(1)
  a, b = rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((256, 768)).astype(np.float32)
  big = rng.standard_normal((1024, 1024)).astype(np.float32)
  a64, b64 = a[:, :64], b[:64, :256]
  for ta, tb, ref, packs in [(Tensor(a), Tensor(b.T.copy()).T, a @ b, True), (Tensor(a64), Tensor(b64), a64 @ b64, False),
                             (Tensor(a[:32]), Tensor(b.T.copy()).T, a[:32] @ b, False), (Tensor(big), Tensor(big), big @ big, True)]:
    out = ta @ tb
    assert len([si for si in out.schedule() if not si.is_copy]) == (2 if p and packs else 1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=2e-3)

def test_matvec_never_packs(monkeypatch):
  """Decode (one row of x against a big transposed weight) must not copy the weight every call."""
  w = Tensor(np.random.default_rng(2).standard_normal((2816, 1024)).astype(np.float32))
  x = Tensor(np.ones((1, 1024), np.float32))
  n = len(( x @ w.T).schedule())
  monkeypatch.setattr(Device[Device.DEFAULT].renderer, "matmul_panels", lambda *a: 0)
  assert len((x @ w.T).schedule()) == n

def _global_bounds(out: Tensor) -> list[int]:
  from tinycore.codegen import prepare_kernel
  r = Device[Device.DEFAULT].renderer
  ast = next(si.ast for si in out.schedule() if not si.is_copy and any(u.op is Ops.REDUCE_AXIS for u in si.ast.toposort()))
  k = prepare_kernel(ast, Device.DEFAULT, r)
  return [u.src[0].arg for u in sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda u: u.arg)]

def test_a_reductions_pixel_ranges_merge():
  """merge_ranges: a 1x1 conv's output pixels (H, W) are one range where every buffer reads them as one (its 28-wide
  rows took 4-wide scalar unrolls: 8x128x28x28 -> 256 ran at 2.8 GFLOP/s on a CPU core, 53 merged); a 3x3 conv's
  window reads rows W+2 apart, so its ranges stay. Values against numpy either way."""
  if Device[Device.DEFAULT].renderer.has_local: pytest.skip("a GPU maps output ranges to thread dimensions itself")
  rng = np.random.default_rng(3)
  x, w1, w3 = (rng.standard_normal(s).astype(np.float32) for s in ((2, 8, 12, 12), (16, 8, 1, 1), (16, 8, 3, 3)))
  pw = Tensor(x).conv2d(Tensor(w1))
  assert _global_bounds(pw) == [2, 16, 144]
  np.testing.assert_allclose(pw.numpy(), np.einsum("bchw,oc->bohw", x.astype(np.float64), w1[:, :, 0, 0]), rtol=1e-4, atol=1e-4)
  c3 = Tensor(x).conv2d(Tensor(w3))
  assert _global_bounds(c3)[-2:] == [10, 10]
  from numpy.lib.stride_tricks import sliding_window_view
  ref = np.einsum("bchwij,ocij->bohw", sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3)), w3)
  np.testing.assert_allclose(c3.numpy(), ref, rtol=1e-4, atol=1e-4)
