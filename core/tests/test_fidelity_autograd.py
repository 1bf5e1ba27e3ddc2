"""tinygrad 0.14's autograd rules (backward() fills .grad for every live float tensor in the graph unless
requires_grad is False; gradient() gives zeros for targets reached only through gradient-less ops) and the
tinycore.helpers names tinygrad's tests and examples import."""
import gzip, os
import numpy as np
import pytest
from tinycore import Tensor, dtypes

@pytest.mark.needs_device
def test_backward_fills_plain_tensors_like_tinygrad():
  w = Tensor(np.array([[1., 2.], [3., 4.]], np.float32))      # requires_grad=None: tinygrad 0.14 still fills .grad
  x = Tensor(np.array([1., -1.], np.float32))
  h = w @ x                                                    # a live intermediate gets its grad too
  h.sum().backward()
  np.testing.assert_allclose(w.grad.numpy(), [[1, -1], [1, -1]])
  np.testing.assert_allclose(x.grad.numpy(), [4, 6])
  np.testing.assert_allclose(h.grad.numpy(), [1, 1])

@pytest.mark.needs_device
def test_backward_skips_requires_grad_false_and_non_float():
  w = Tensor(np.array([1., 2.], np.float32), requires_grad=False)
  i = Tensor(np.array([1, 2], np.int32))
  v = Tensor(np.array([3., 4.], np.float32))
  (w * v * i).sum().backward()
  assert w.grad is None and i.grad is None
  np.testing.assert_allclose(v.grad.numpy(), [1, 4])

@pytest.mark.needs_device
def test_backward_accumulates_and_detach_stops():
  x = Tensor(np.array([1., 2.], np.float32), requires_grad=True)
  (x * x).sum().backward()
  (x * 3).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [5, 7])
  y = Tensor(np.array([1., 2.], np.float32))
  (y.detach() * y).sum().backward()
  np.testing.assert_allclose(y.grad.numpy(), [1, 2])   # only the non-detached factor carries a gradient

@pytest.mark.needs_device
def test_tensor_only_reached_through_comparisons_gets_zero_grad():
  x = Tensor(np.array([-1., 0., 2.], np.float32))
  (x.sign() + (x > 0).float()).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 0])

@pytest.mark.needs_device
def test_tensor_outside_the_graph_is_untouched_and_gradient_raises():
  a, b = Tensor([1.0]), Tensor([2.0])
  (a * 2).sum().backward()
  assert b.grad is None
  with pytest.raises(ValueError, match="not part of the graph"): (a * 2).sum().gradient(b)

@pytest.mark.needs_device
def test_gradient_of_int_output_or_target_is_runtime_error():
  i = Tensor([1, 2])
  with pytest.raises(RuntimeError, match="floating-point"): (i * 2).sum().gradient(i)
  with pytest.raises(RuntimeError, match="floating-point"): (i * 2).sum().backward()

@pytest.mark.needs_device
def test_optimizer_step_after_backward_with_default_requires_grad():
  from tinycore.nn.optim import SGD
  w = Tensor(np.array([1., 2.], np.float32))
  opt = SGD([w], lr=0.5)
  opt.zero_grad()
  (w * w).sum().backward()
  opt.step()
  np.testing.assert_allclose(w.numpy(), [0., 0.])

def test_helpers_names_tinygrad_code_imports():
  from tinycore.helpers import (OSX, WIN, getenv, Context, DEBUG, GlobalCounters, Timing, Profiling, colored, prod, flatten, dedup, all_same,
                                partition, get_single_element, unwrap, ceildiv, cdiv, round_up, get_child, ansistrip, temp, time_to_str,
                                tqdm, trange, fetch)
  assert isinstance(OSX, bool) and isinstance(WIN, bool) and callable(fetch) and getenv("TINYCORE_SURELY_UNSET_VAR", 3) == 3
  with Context(DEBUG=0): assert DEBUG.value == 0
  assert GlobalCounters.kernel_count >= 0 and prod([2, 3, 4]) == 24 and flatten([[1], [2, 3]]) == [1, 2, 3] and dedup([3, 1, 3]) == [3, 1]
  assert all_same([2, 2, 2]) and not all_same([1, 2]) and all_same([])
  assert partition([1, 2, 3, 4], lambda v: v % 2 == 0) == ([2, 4], [1, 3])
  assert get_single_element([7]) == 7
  with pytest.raises(ValueError): get_single_element([1, 2])
  with pytest.raises(ValueError): unwrap(None)
  assert ceildiv(7, 2) == 4 and cdiv(-7, 2) == -3 and round_up(9, 4) == 12 and round_up(8, 4) == 8
  class M: pass
  m = M(); m.layers = [M(), M()]; m.layers[1].w = "here"
  assert get_child(m, "layers.1.w") == "here" and get_child({"a": m}, "a.layers.1.w") == "here"
  assert ansistrip("\x1b[31mred\x1b[0m") == "red" and ansistrip(colored("x", "green")) == "x"
  assert temp("f").endswith("f") and "ms" in time_to_str(0.05) and time_to_str(20).strip().endswith("s")
  with Timing("t: ", enabled=False) as t: pass
  assert t.et >= 0
  assert list(tqdm(range(3), disable=True)) == [0, 1, 2] and list(trange(2, disable=True)) == [0, 1]
  with Profiling(enabled=False): pass

def test_fetch_caches_atomically_and_gunzips(tmp_path, monkeypatch):
  from tinycore.helpers import fetch
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  src = tmp_path / "src.bin"; src.write_bytes(b"weights" * 100)
  p = fetch(src.as_uri())
  assert p.read_bytes() == b"weights" * 100 and str(p).startswith(str(tmp_path / "cache"))
  src.write_bytes(b"changed")
  assert fetch(src.as_uri()).read_bytes() == b"weights" * 100                  # cached
  assert fetch(src.as_uri(), allow_caching=False).read_bytes() == b"changed"   # refreshed
  gz = tmp_path / "a.gz"; gz.write_bytes(gzip.compress(b"unzipped"))
  assert fetch(gz.as_uri(), gunzip=True, name="plain.bin", subdir="sub").read_bytes() == b"unzipped"
  assert not [f for f in os.listdir(p.parent) if f.endswith(".tmp")]             # no temporaries left behind

def test_fetch_refuses_other_schemes_and_path_names(tmp_path, monkeypatch):
  from tinycore.helpers import fetch
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  with pytest.raises(ValueError, match="http"): fetch("ftp://example.com/x")
  with pytest.raises(ValueError, match="plain file name"): fetch((tmp_path / "x").as_uri(), name="../escape")
  with pytest.raises(OSError): fetch((tmp_path / "missing").as_uri())
  assert not list((tmp_path / "tinycore" / "downloads").glob("*")) if (tmp_path / "tinycore" / "downloads").exists() else True

def test_dtype_min_max_properties():
  assert dtypes.int8.min == -128 and dtypes.int8.max == 127 and dtypes.uint16.max == 65535 and dtypes.bool.max is True

@pytest.mark.needs_device
def test_plain_tensors_hold_the_latest_gradient_not_a_growing_sum():
  # requires_grad=None (never asked): each backward replaces .grad, so a frozen weight outside any optimizer doesn't
  # chain one lazy add per training step; requires_grad=True accumulates as in torch
  frozen = Tensor(np.array([1., 2.], np.float32))
  trained = Tensor(np.array([1., 2.], np.float32), requires_grad=True)
  for _ in range(3): (frozen * trained).sum().backward()
  np.testing.assert_allclose(frozen.grad.numpy(), [1, 2])
  np.testing.assert_allclose(trained.grad.numpy(), [3, 6])
