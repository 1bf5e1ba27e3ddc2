"""Movement and composite ops against torch, with gradients: pad modes (negative pads too), unfold, diagonal, roll, flip,
meshgrid, einsum (ellipsis, trace, diagonal), attention (causal, grouped-query), uint8 bilinear resize, zero-size cat/expand,
negative dims in reshape/permute/squeeze/expand."""
import numpy as np
import pytest
torch = pytest.importorskip("torch")
F = torch.nn.functional
from tinycore import Tensor
from _torch_ref import check, same

pytestmark = pytest.mark.needs_device
R = np.random.default_rng(2)
def rnd(*s): return R.standard_normal(s).astype(np.float32)

@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", [(0, 2, 3, 2), (1, 2), (-1, 2, 2, -1), (1, -2, 2, -1), (3, -3, 0, -3), (2, 2, 2, 2)], ids=str)
def test_pad_modes(mode, pads):
  if mode == "circular" and pads == (3, -3, 0, -3):
    # cropped to 2 wide, a wrap of 3 goes round more than once: torch returns what its overlapping copy leaves, we refuse
    with pytest.raises(ValueError, match="wraps at most once"): Tensor(rnd(1, 2, 5, 5)).pad(pads, mode=mode)
    return
  x = rnd(1, 2, 5, 5) if len(pads) == 4 else rnd(2, 5, 5)
  check(lambda t: t.pad(pads, mode=mode) if isinstance(t, Tensor) else F.pad(t, pads, mode=mode), x)

def test_pad_replicate_far_and_value():
  check(lambda t: t.pad((3, 11, 0, 30), mode="replicate") if isinstance(t, Tensor) else F.pad(t, (3, 11, 0, 30), mode="replicate"), rnd(1, 1, 5, 5))
  check(lambda t: t.pad((-1, 2, -3, 4), value=np.inf) if isinstance(t, Tensor) else F.pad(t, (-1, 2, -3, 4), value=np.inf), rnd(3, 3, 3, 3))

@pytest.mark.parametrize("args", [(0, 2, 1), (0, 2, 2), (0, 7, 3), (-1, 2, 2), (1, 0, 8), (2, 3, 1)], ids=str)
def test_unfold(args):
  check(lambda t: t.unfold(*args), rnd(8, 3, 4) if args[0] == 0 else rnd(3, 3, 4))

@pytest.mark.parametrize("shape,kw", [((5, 5), {}), ((3, 4), {}), ((4, 3), {"offset": -1}), ((3, 5), {"offset": 2}), ((3, 5), {"offset": 7}),
                                      ((2, 3, 4, 5), {"dim1": -2, "dim2": -1}), ((4, 5, 6), {"dim1": 2, "dim2": 0, "offset": 1})], ids=str)
def test_diagonal(shape, kw):
  check(lambda t: t.diagonal(**kw), rnd(*shape))

@pytest.mark.parametrize("shape,args", [((2, 4), (1,)), ((2, 4), (-5, 0)), ((2, 4, 6), ((2, -3), (0, 2))), ((2, 0, 3), (1, 1)), ((0,), (1, 0))],
                         ids=str)
def test_roll(shape, args):
  check(lambda t: t.roll(*args), rnd(*shape))

@pytest.mark.parametrize("dims", [(0,), (0, 1, 3), (-1,), ()], ids=str)
def test_flip(dims):
  check(lambda t: t.flip(dims), rnd(2, 3, 4, 5))

@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
  a, b, c = rnd(3), rnd(4), rnd(2)
  ours = Tensor(a).meshgrid(Tensor(b), Tensor(np.float32(1.5)), Tensor(c), indexing=indexing)
  theirs = torch.meshgrid(torch.tensor(a), torch.tensor(b), torch.tensor(1.5), torch.tensor(c), indexing=indexing)
  assert len(ours) == len(theirs)
  for o, t in zip(ours, theirs): same(o, t)
  pairs = zip(Tensor.meshgrid(Tensor(a), Tensor(b), indexing=indexing), torch.meshgrid(torch.tensor(a), torch.tensor(b), indexing=indexing))
  for o, t in pairs: same(o, t)

@pytest.mark.parametrize("formula,shapes", [
  ("...id,...jd->...ij", [(3, 4, 5), (3, 2, 5)]), ("...id,...jd", [(3, 4, 5), (3, 2, 5)]), ("i...j,ji...->...", [(2, 3, 4, 5), (5, 2, 4)]),
  ("ij...,ij...->ij", [(2, 3, 4, 2), (2, 3, 4, 2)]), ("i,i", [(5,), (5,)]), ("ii->i", [(4, 4)]), ("ii->", [(4, 4)]), ("...ii->...i", [(3, 5, 5)]),
  ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("iij->ji", [(3, 3, 2)]), ("ij->", [(3, 4)]), ("i,j->ij", [(3,), (4,)])], ids=str)
def test_einsum(formula, shapes):
  arrs = [rnd(*s) for s in shapes]
  check(lambda *ts: Tensor.einsum(formula, *ts) if isinstance(ts[0], Tensor) else torch.einsum(formula, *ts), *arrs, atol=1e-4)

def test_sdpa_causal_and_gqa():
  q, k, v = rnd(2, 4, 6, 8), rnd(2, 4, 6, 8), rnd(2, 4, 6, 8)
  def attn(a, b, c, **kw):
    return a.scaled_dot_product_attention(b, c, **kw) if isinstance(a, Tensor) else F.scaled_dot_product_attention(a, b, c, **kw)
  check(lambda a, b, c: attn(a, b, c, is_causal=True), q, k, v, atol=1e-4)
  k2, v2 = rnd(2, 2, 6, 8), rnd(2, 2, 6, 8)
  check(lambda a, b, c: attn(a, b, c, enable_gqa=True), q, k2, v2, atol=1e-4)
  with pytest.raises(RuntimeError): Tensor(rnd(2, 3, 6, 8)).scaled_dot_product_attention(Tensor(k2), Tensor(v2), enable_gqa=True)
  with pytest.raises(RuntimeError): Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True, attn_mask=Tensor(rnd(6, 6)))

@pytest.mark.parametrize("size", [(10, 10), (13, 5), (5, 12), (64, 64)], ids=str)
def test_interpolate_uint8_bilinear_bit_exact(size):
  x = (R.uniform(0, 255, (2, 3, 17, 23))).astype(np.uint8)
  same(Tensor(x).interpolate(size, mode="linear"), F.interpolate(torch.tensor(x), size=size, mode="bilinear"))

def test_zero_size_cat_expand_slices():
  check(lambda a, b, c: a.cat(b, c, dim=0) if isinstance(a, Tensor) else torch.cat((a, b, c), 0), rnd(4, 0, 3), rnd(4, 0, 3), rnd(4, 0, 3))
  check(lambda a, b, c: a.cat(b, c, dim=1) if isinstance(a, Tensor) else torch.cat((a, b, c), 1), rnd(4, 0, 3), rnd(4, 1, 3), rnd(4, 2, 3))
  check(lambda a: a.expand(0, 1, 4, 3, 2, 6), rnd(4, 3, 1, 6))
  check(lambda a: a[1:1], rnd(5, 5))
  check(lambda a: a[-2:-5], rnd(3, 3, 3))
  check(lambda a: a ** 0, rnd(3))   # a target the output doesn't depend on: zero gradient

def test_negative_dims():
  check(lambda a: a.permute(-2, -1, 1, 0), rnd(2, 3, 4, 5))
  check(lambda a: a.reshape(-1, 1, 6), rnd(4, 3, 6))
  check(lambda a: a.squeeze(-1), rnd(4, 3, 1))
  check(lambda a: a.unsqueeze(-1), rnd(4, 3))
  check(lambda a: a.transpose(-1, -3), rnd(2, 3, 4))
  check(lambda a: a.squeeze(0), rnd())
  for fn in (Tensor.kaiming_uniform, Tensor.kaiming_normal):
    for bad in ((-3, 3), ((-3, 3), 3), ((-3, -3), 3)):
      with pytest.raises(ValueError): fn(*bad)

def test_reshape_none_keeps_dim():
  x = rnd(4, 3, 6, 6)
  same(Tensor(x).reshape(None, None, 36), torch.tensor(x).reshape(4, 3, 36))
