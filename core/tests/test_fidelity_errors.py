"""Every error path of this cluster raises the class tinygrad raises (RuntimeError for most, IndexError for dims, ValueError
for shapes given wrong) and stays a subclass of the Python-conventional one, with a message in the user's terms."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.tensor_errors import ArgumentError, DTypeError, ShapeError

pytestmark = pytest.mark.needs_device
def ones(*s): return Tensor.ones(*s)

# (what, call, tinygrad's class, our conventional class, a phrase the message must contain)
CASES = [
  ("matmul inner dims", lambda: ones(2, 4).dot(ones(1, 3)), RuntimeError, ValueError, "(4 != 1)"),
  ("matmul 1-d", lambda: ones(4).dot(ones(1, 2)), RuntimeError, ValueError, "shape mismatch"),
  ("matmul 0-d", lambda: Tensor(3.14) @ ones(3, 3), RuntimeError, ValueError, "at least 1-d"),
  ("permute too few", lambda: ones(3, 4, 5, 6).permute(0, 2), RuntimeError, ValueError, "not a permutation"),
  ("permute repeated", lambda: ones(3, 4, 5, 6).permute(0, 0, 1, 2, 3), RuntimeError, ValueError, "not a permutation"),
  ("reshape two -1", lambda: ones(3, 4).reshape(-1, -1, 2), RuntimeError, ValueError, "only one dimension can be -1"),
  ("reshape numel", lambda: ones(4, 3).reshape(5, 2), RuntimeError, ValueError, "12 elements"),
  ("expand non-1", lambda: ones(4, 3, 1, 6).expand(4, 1, 1, 6), RuntimeError, ValueError, "is not 1"),
  ("expand fewer dims", lambda: ones(4, 3, 1, 6).expand(3, 1, 6), RuntimeError, ValueError, "fewer dimensions"),
  ("flip repeated", lambda: ones(3, 4).flip(1, -1), RuntimeError, ValueError, "twice"),
  ("div rounding typo", lambda: ones(3).div(2, rounding_mode="typo"), RuntimeError, ValueError, "'typo'"),
  ("int ** negative", lambda: Tensor([1, 2]) ** -2, RuntimeError, TypeError, "negative"),
  ("float shift", lambda: Tensor([1.0]) << 2, RuntimeError, TypeError, "integer or bool"),
  ("shift by float", lambda: Tensor([1], dtype=dtypes.uint32) << 1.0, RuntimeError, TypeError, "integer or bool"),
  ("pad odd flat", lambda: ones(3, 3).pad((2, 0, 2)), RuntimeError, ValueError, "even length"),
  ("pad too many", lambda: ones(3, 3).pad((0, 0, 0, 0, 1, 0, 3, 0)), RuntimeError, ValueError, "even length"),
  ("pad mode typo", lambda: ones(3, 3, 3).pad((3, 0), mode="typo"), NotImplementedError, ValueError, "'typo'"),
  ("reflect too wide", lambda: ones(1, 1, 5, 5).pad((3, 5, 0, 0), mode="reflect"), RuntimeError, ValueError, "smaller than"),
  ("circular twice", lambda: ones(1, 1, 5, 5).pad((3, 6, 0, 0), mode="circular"), RuntimeError, ValueError, "exceed"),
  ("unfold too big", lambda: ones(8).unfold(0, 9, 3), RuntimeError, ValueError, "exceeds"),
  ("unfold step", lambda: ones(8).unfold(0, 1, -1), RuntimeError, ValueError, "step"),
  ("diagonal same dims", lambda: ones(3, 3).diagonal(dim1=0, dim2=0), RuntimeError, ValueError, "must differ"),
  ("roll shifts w/o dims", lambda: ones(2, 4).roll((1, 2)), RuntimeError, ValueError, "one shift"),
  ("roll count mismatch", lambda: ones(3, 3).roll(1, (0, 1)), RuntimeError, ValueError, "as many shifts"),
  ("meshgrid indexing", lambda: ones(3).meshgrid(indexing="bad"), RuntimeError, ValueError, "'bad'"),
  ("einsum two ellipses", lambda: Tensor.einsum("...ik...,...jk->", ones(2, 3, 4), ones(2, 3, 4)), RuntimeError, ValueError, "more than once"),
  ("einsum ellipsis broadcast", lambda: Tensor.einsum("i...j,ji...->...", ones(2, 3, 4), ones(2, 3, 4)), RuntimeError, ValueError, "has size"),
  ("einsum sizes", lambda: Tensor.einsum("pqrs,tuqvr->pstuv", ones(3, 8, 10, 5), ones(11, 5, 13, 16, 8)), RuntimeError, ValueError, "'q'"),
  ("conv kernel too big", lambda: ones(1, 1, 6, 7).conv2d(ones(6, 1, 3, 3), dilation=3), RuntimeError, ValueError, "doesn't fit"),
  ("conv padding length", lambda: ones(2, 16, 2, 2).conv2d(ones(32, 16, 3, 3), padding=(1, 1, 1)), RuntimeError, ValueError, "padding"),
  ("linspace bool", lambda: Tensor.linspace(5, 10, 3, dtype=dtypes.bool), RuntimeError, ValueError, "bool"),
  ("scatter_reduce name", lambda: ones(3).scatter_reduce(0, Tensor([0]), ones(3), "INVALID"), RuntimeError, ValueError, "'INVALID'"),
  ("scatter dtype", lambda: ones(3).half().scatter(0, Tensor([0]), ones(3)), RuntimeError, TypeError, "half"),
  ("gather ndim", lambda: ones(4, 5).gather(0, Tensor([1])), RuntimeError, ValueError, "same number of dims"),
  ("masked_select mask", lambda: ones(3).masked_select(Tensor([1, 0, 1])), RuntimeError, TypeError, "bool"),
  ("stack seq + tensor", lambda: Tensor.stack((Tensor([1, 2]), Tensor([3, 4])), Tensor([5, 6])), RuntimeError, ValueError, "sequence"),
  ("one_hot negative", lambda: Tensor([1, 2]).one_hot(-1), RuntimeError, ValueError, "non-negative"),
]

@pytest.mark.parametrize("what,call,tg_cls,py_cls,phrase", CASES, ids=[c[0] for c in CASES])
def test_error_class_and_message(what, call, tg_cls, py_cls, phrase):
  with pytest.raises(tg_cls) as e: call()
  assert isinstance(e.value, py_cls), f"{what}: {type(e.value).__name__} is not a {py_cls.__name__}"
  assert phrase in str(e.value), f"{what}: {str(e.value)!r} doesn't say {phrase!r}"

@pytest.mark.parametrize("call", [lambda: ones(4, 3, 6, 6).squeeze(50), lambda: Tensor(1.0).squeeze(1), lambda: Tensor(1.0).squeeze(-2),
                                  lambda: ones(8).unfold(1, 8, 3), lambda: Tensor.stack(ones(4, 5, 3), dim=77),
                                  lambda: Tensor(3.14).cat(Tensor(3.14))])
def test_dim_errors_are_index_errors(call):
  with pytest.raises(IndexError): call()

def test_bad_shape_entries_are_value_and_type_errors():
  for bad in (((-3, 3), 3), ((-3, -3), 3)):
    with pytest.raises(ValueError): Tensor.kaiming_uniform(*bad)
    with pytest.raises(TypeError): Tensor.kaiming_normal(*bad)
  with pytest.raises(ValueError): Tensor.kaiming_uniform(-3, 3)
  with pytest.raises(ValueError): ones(4, 3, 6, 6).reshape([])

def test_error_classes_are_both():
  assert issubclass(ShapeError, ValueError) and issubclass(ShapeError, RuntimeError)
  assert issubclass(ArgumentError, ValueError) and issubclass(ArgumentError, RuntimeError)
  assert issubclass(DTypeError, TypeError) and issubclass(DTypeError, RuntimeError)

def test_no_error_on_valid_edges():
  # the forms next to the errors still work: 0-d squeeze of dim 0/-1, flip(()), stack of 0-d, an in-range reflect pad
  assert Tensor(2.0).squeeze(0).shape == () and Tensor(2.0).squeeze(-1).shape == ()
  np.testing.assert_array_equal(Tensor.stack(Tensor(3.0), Tensor(4.0)).numpy(), [3.0, 4.0])
  assert ones(1, 1, 5, 5).pad((4, 4, 0, 4), mode="reflect").shape == (1, 1, 9, 13)
  assert ones(2, 3).flip(()).shape == (2, 3)
