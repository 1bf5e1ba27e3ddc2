"""The fidelity tests' one comparison with torch: run the same function on torch and tinycore from the same numpy inputs
and compare values, dtypes and (for float inputs) the gradients of out.sum(), with tolerances tight enough that a wrong
edge case (an inf for a nan, -0 for a value) fails."""
import numpy as np
import torch
from tinycore import Tensor

_DT = {torch.float32: np.float32, torch.int32: np.int32, torch.bool: np.bool_, torch.uint8: np.uint8, torch.int64: np.int64,
       torch.float64: np.float64, torch.int8: np.int8, torch.int16: np.int16}

def to_np(t) -> np.ndarray: return t.numpy() if isinstance(t, Tensor) else t.detach().numpy()

def same(got: Tensor, exp: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4, dtype: bool = True, err: str = "") -> None:
  g, e = to_np(got), to_np(exp)
  if e.dtype == np.int64 and g.dtype == np.int32: e = e.astype(np.int32)   # torch's default int is int64, ours int32
  assert g.shape == e.shape, f"{err} shape {g.shape} != torch {e.shape}"
  if dtype: assert g.dtype == e.dtype, f"{err} dtype {g.dtype} != torch {e.dtype}"
  if np.issubdtype(e.dtype, np.floating): np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, equal_nan=True, err_msg=err)
  else: np.testing.assert_array_equal(g, e, err_msg=err)

def check(fn, *arrays: np.ndarray, grad: bool = True, atol: float = 1e-5, rtol: float = 1e-4, tfn=None,
          grad_atol: float | None = None) -> None:
  """fn(*tensors) on both libraries (tfn for torch when its spelling differs); float inputs also compare d(sum)/d(input),
  within grad_atol (default: atol). An input torch's graph doesn't use has a zero gradient of its shape."""
  tfn = tfn or fn
  tt = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
  ours = [Tensor(a) for a in arrays]
  exp, got = tfn(*tt), fn(*ours)
  same(got, exp, atol, rtol)
  diff = [i for i, t in enumerate(tt) if t.requires_grad]
  if not diff: return
  tg = torch.autograd.grad(exp.sum(), [tt[i] for i in diff], allow_unused=True)
  og = got.sum().gradient(*[ours[i] for i in diff])
  for i, g, e in zip(diff, og, tg):
    ref = e if e is not None else torch.zeros(arrays[i].shape, dtype=tt[i].dtype)
    same(g, ref, atol if grad_atol is None else grad_atol, rtol, err=f"gradient of input {i}")
