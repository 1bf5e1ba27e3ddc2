"""Transposing copies on the C renderer (codegen/opt_elementwise.py): 16 lanes along the input's contiguous axis, runs
of 8 outputs along the output's grouped into vector stores through an 8x16 shuffle transpose. Values against numpy at
sizes where the rule applies and around its edges (an axis 16 or 8 doesn't divide keeps the scalar copy), padded copies
(attention's keys packed per tile with the last tile padded), and every dtype such a copy can carry."""
import numpy as np
import pytest
from tinycore import Tensor, Device, dtypes
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
  """Transposed copies with padding (gated loads, a select of 0) against numpy: a pad along the lanes' axis keeps the
  scalar loop (a gate per lane), one along the output's last axis gates whole vectors. (A padded copy in fused
  attention's backward once rendered lane reads of a scalar constant, which gcc refused: the select past the pad folds
  to a scalar 0.)"""
  rng = np.random.default_rng(9)
  x = rng.standard_normal(shape).astype(np.float32)
  out = Tensor(x, device="CPU").T.pad(pad).contiguous()
  np.testing.assert_array_equal(out.numpy(), np.pad(x.T, pad))

def _kt_packed(k: Tensor, keys: int = 64) -> Tensor:
  """Fused attention's key packing (tensor_attention.py): k (..., S, D) -> (..., S/keys, D, keys), keys zero-padded to
  whole tiles, each tile transposed."""
  *b, s, d = k.shape
  skp = -(-s // keys) * keys
  kt = k.cast(dtypes.float32).transpose(-1, -2)
  if skp != s: kt = kt.pad(((0, 0),) * len(b) + ((0, 0), (0, skp - s)))
  nb = len(b)
  return kt.reshape(*b, d, skp // keys, keys).permute(*range(nb), nb + 1, nb, nb + 2).contiguous()

def _kt_packed_np(k: np.ndarray, keys: int = 64) -> np.ndarray:
  *b, s, d = k.shape
  skp = -(-s // keys) * keys
  kt = np.pad(k.astype(np.float32).swapaxes(-1, -2), [(0, 0)] * len(b) + [(0, 0), (0, skp - s)])
  return kt.reshape(*b, d, skp // keys, keys).swapaxes(-2, -3)

@pytest.mark.parametrize("s", [1, 7, 8, 15, 17, 40, 63, 64, 65, 500, 511, 513])
@pytest.mark.parametrize("d", [16, 17, 64, 80, 128])
def test_attention_key_packing(s, d):
  """The packed keys against numpy at every tail length: where D takes 16 lanes the copy is in lanes whether or not the
  keys are padded (the pad's gate is the same for every lane: a whole vector read or zero), else it stays scalar. (One
  key reads no memory along the key axis: that is a stack of one value and 63 zeros, unrolled whole instead.)"""
  rng = np.random.default_rng(s * 1000 + d)
  x = rng.standard_normal((1, 2, s, d)).astype(np.float32)
  out = _kt_packed(Tensor(x, device="CPU"))
  if _lanes_taken() and s > 1: assert any(o[0] == "VEC_S" for o in _opts(out)) == (d % 16 == 0), _opts(out)
  np.testing.assert_array_equal(out.numpy(), _kt_packed_np(x))

@pytest.mark.parametrize("s,d", [(500, 64), (513, 80), (17, 16), (1, 32), (65, 17)])
def test_padded_rows_copy(s, d):
  """v padded to whole key tiles: a contiguous copy gated along the rows takes vector lanes along D (16 | D). (One row
  is a stack of one value and 63 zeros, unrolled whole instead.)"""
  rng = np.random.default_rng(s + d)
  x = rng.standard_normal((2, s, d)).astype(np.float32)
  skp = -(-s // 64) * 64
  out = Tensor(x, device="CPU").pad(((0, 0), (0, skp - s), (0, 0))).contiguous()
  if _lanes_taken() and s > 1: assert any(o[0] == "VEC" for o in _opts(out)) == (d % 16 == 0), _opts(out)
  np.testing.assert_array_equal(out.numpy(), np.pad(x, ((0, 0), (0, skp - s), (0, 0))))

def _sample(dt: str, shape, rng) -> np.ndarray:
  if dt == "bool": return rng.random(shape) < 0.5
  if dt in ("int8", "uint8", "int32"): return rng.integers(-100 if dt != "uint8" else 0, 100, shape).astype(dt)
  return rng.standard_normal(shape).astype(dt)

@pytest.mark.parametrize("dt", ["float16", "int8", "uint8", "int32", "bool", "float32"])
@pytest.mark.parametrize("s", [15, 64, 500])
def test_key_packing_dtypes(dt, s):
  """Half and 8-bit keys widen to float lanes on the way (attention casts k to float32), the others go scalar; every
  element lands where numpy puts it, padding zero."""
  rng = np.random.default_rng(s)
  x = _sample(dt, (1, 2, s, 32), rng)
  out = _kt_packed(Tensor(x, device="CPU"))
  np.testing.assert_array_equal(out.numpy(), _kt_packed_np(x))

@pytest.mark.parametrize("dt", ["float16", "int8", "uint8", "bool", "float32"])
@pytest.mark.parametrize("shape,pad", [((32, 16), ((0, 0), (0, 8))), ((48, 33), ((0, 0), (0, 31))), ((16, 16), ((0, 3), (0, 0)))])
def test_padded_transpose_dtypes(dt, shape, pad):
  """Transposing copies that keep their dtype, padded along either axis, against numpy."""
  rng = np.random.default_rng(len(dt))
  x = _sample(dt, shape, rng)
  out = Tensor(x, device="CPU").T.pad(pad).contiguous()
  np.testing.assert_array_equal(out.numpy(), np.pad(x.T, pad))

@pytest.mark.parametrize("s", [7, 500])
def test_padded_copy_opts_replay(s):
  """The actions chosen for a padded copy (gated vector loads) applied again by hand (BEAM's and the opts cache's path)
  give the kernel the heuristic built."""
  from tinycore.codegen.opt import _heuristic, optimize
  x = Tensor(np.random.default_rng(s).standard_normal((1, 2, s, 64)).astype(np.float32), device="CPU")
  k = split_ranges(graph_rewrite(lower_kernel(_kt_packed(x).schedule()[-1].ast), symbolic))
  r = Device["CPU"].renderer
  opts, _ = _heuristic(k, r)
  if _lanes_taken(): assert any(o[0] == "VEC_S" for o in opts), opts
  assert optimize(k, r, opts) is optimize(k, r)
