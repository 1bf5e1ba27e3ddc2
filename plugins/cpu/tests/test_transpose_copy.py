"""Transposing copies on the C renderer (codegen/opt_elementwise.py): 16 lanes along the input's contiguous axis, runs
of 8 outputs along the output's grouped into vector stores through an 8x16 shuffle transpose. Values against numpy at
sizes where the rule applies and around its edges (an axis 16 or 8 doesn't divide keeps the scalar copy)."""
import numpy as np
import pytest
from tinycore import Tensor, Device
from tinycore.codegen import lower_kernel
from tinycore.codegen.opt import heuristic_opts
from tinycore.codegen.split import split_ranges
from tinycore.rewrite import graph_rewrite
from tinycore.symbolic import symbolic
pytestmark = pytest.mark.needs_device

def _opts(out: Tensor):
  k = split_ranges(graph_rewrite(lower_kernel(out.schedule()[-1].ast), symbolic))
  return heuristic_opts(k, Device["CPU"].renderer)

def _lanes_taken() -> bool:
  r = Device["CPU"].renderer
  return bool(r.vector_types) and r.register_block is not None

@pytest.mark.parametrize("shape", [(8, 16), (16, 8), (32, 48), (48, 64), (40, 1024), (1024, 40), (17, 16), (16, 17), (15, 9),
                                   (1, 32), (64, 1)])
def test_transpose_values(shape):
  rng = np.random.default_rng(sum(shape))
  x = rng.standard_normal(shape).astype(np.float32)
  out = Tensor(x, device="CPU").T.contiguous()
  opts = _opts(out)
  # lanes along x's rows (the output's first axis, a multiple of 16), runs of 8 along the output's rows
  applies = _lanes_taken() and shape[1] % 16 == 0 and shape[0] % 8 == 0
  assert any(o[0] == "VEC_S" for o in opts) == applies, opts
  np.testing.assert_array_equal(out.numpy(), x.T)

def test_transpose_with_math_and_batch():
  """Math on the way (scale and shift) and a batch axis outside: the lanes carry the math, each image transposed."""
  rng = np.random.default_rng(7)
  x = rng.standard_normal((3, 24, 32)).astype(np.float32)
  out = (Tensor(x, device="CPU").transpose(-1, -2) * 2.0 + 1.0).contiguous()
  if _lanes_taken(): assert any(o[0] == "VEC_S" for o in _opts(out))
  np.testing.assert_allclose(out.numpy(), x.transpose(0, 2, 1) * 2.0 + 1.0, rtol=1e-6, atol=1e-6)

def test_transposed_operand_panels(monkeypatch):
  """x @ W.T with W copied into 32-wide panels: the copy is a transpose, and the product matches numpy in float64."""
  monkeypatch.setattr(Device["CPU"].renderer, "matmul_panels", lambda *a: 32)
  rng = np.random.default_rng(8)
  a, w = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((96, 48)).astype(np.float32)
  out = Tensor(a, device="CPU") @ Tensor(w, device="CPU").T
  kernels = [si for si in out.schedule() if not si.is_copy]
  assert len(kernels) == 2   # the panel copy, then the matmul
  if _lanes_taken():
    k = split_ranges(graph_rewrite(lower_kernel(kernels[0].ast), symbolic))
    assert any(o[0] == "VEC_S" for o in heuristic_opts(k, Device["CPU"].renderer))
  np.testing.assert_allclose(out.numpy(), a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("shape,pad", [((16, 8), ((0, 0), (0, 8))), ((32, 16), ((0, 8), (0, 0))), ((7, 70), ((0, 9), (0, 0)))])
def test_padded_transpose(shape, pad):
  """Transposed copies with padding (gated loads, a select of 0) keep the scalar loop, against numpy. (A padded copy
  in fused attention's backward, test_fused_attention.py, once took the lanes and rendered lane reads of a scalar
  constant, which gcc refused.)"""
  rng = np.random.default_rng(9)
  x = rng.standard_normal(shape).astype(np.float32)
  out = Tensor(x, device="CPU").T.pad(pad).contiguous()
  np.testing.assert_array_equal(out.numpy(), np.pad(x.T, pad))
