"""Shared helpers for the fidelity tests: run the same function on torch and tinycore and compare values, dtypes and
(optionally) gradients, with tolerances tight enough that a wrong edge case (an inf for a nan, -0 for a value) fails."""
import numpy as np
import torch
from tinycore import Tensor

_DT = {torch.float32: np.float32, torch.int32: np.int32, torch.bool: np.bool_, torch.uint8: np.uint8, torch.int64: np.int64,
       torch.float64: np.float64, torch.int8: np.int8, torch.int16: np.int16}

def to_np(t) -> np.ndarray: return t.numpy() if isinstance(t, Tensor) else t.detach().numpy()

def same(got: Tensor, exp: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4, dtype: bool = True) -> None:
  g, e = to_np(got), to_np(exp)
  if e.dtype == np.int64 and g.dtype == np.int32: e = e.astype(np.int32)   # torch's default int is int64, ours int32
  assert g.shape == e.shape, f"shape {g.shape} != torch {e.shape}"
  if dtype: assert g.dtype == e.dtype, f"dtype {g.dtype} != torch {e.dtype}"
  if np.issubdtype(e.dtype, np.floating): np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
  else: np.testing.assert_array_equal(g, e)

def check(fn, *arrays: np.ndarray, grad: bool = True, atol: float = 1e-5, rtol: float = 1e-4, tfn=None) -> None:
  """fn(*tensors) on both libraries (tfn for torch when its spelling differs); float inputs also compare d(sum)/d(input)."""
  tfn = tfn or fn
  tt = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
  ours = [Tensor(a) for a in arrays]
  same(fn(*ours), tfn(*tt), atol, rtol)
  if not grad or not any(t.requires_grad for t in tt): return
  tg = torch.autograd.grad(tfn(*tt).sum(), [t for t in tt if t.requires_grad], allow_unused=True)
  og = fn(*ours).sum().gradient(*[o for o, t in zip(ours, tt) if t.requires_grad])
  for g, e in zip(og, tg): same(g, e if e is not None else torch.zeros(()), atol, rtol)
