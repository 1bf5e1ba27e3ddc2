"""One comparison for the fidelity tests: run a function on tinycore and on torch from the same numpy inputs, compare
the forward values and (for float inputs) the gradients of out.sum() with respect to every input."""
from __future__ import annotations
from typing import Callable
import numpy as np
import torch
from tinycore import Tensor

def compare(tc_fn: Callable, torch_fn: Callable, *inputs: np.ndarray, grad: bool = True, atol: float = 1e-5, rtol: float = 1e-4,
            grad_atol: float = 1e-5) -> None:
  tt = [torch.tensor(x, requires_grad=grad and x.dtype.kind == "f") for x in inputs]
  ct = [Tensor(x) for x in inputs]
  exp, got = torch_fn(*tt), tc_fn(*ct)
  e, g = exp.detach().numpy(), got.numpy()
  assert g.shape == e.shape, f"shape {g.shape} != torch {e.shape}"
  if e.dtype.kind == "f": np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
  else: np.testing.assert_array_equal(g, e.astype(g.dtype))
  if not grad or not any(t.requires_grad for t in tt): return
  diff = [i for i, t in enumerate(tt) if t.requires_grad]
  tg = torch.autograd.grad(exp.sum(), [tt[i] for i in diff], allow_unused=True)
  cg = got.sum().gradient(*[ct[i] for i in diff])
  for i, a, b in zip(diff, cg, tg):
    ref = np.zeros(inputs[i].shape, np.float32) if b is None else b.detach().numpy()
    np.testing.assert_allclose(a.numpy(), ref, atol=grad_atol, rtol=rtol, equal_nan=True, err_msg=f"gradient of input {i}")
