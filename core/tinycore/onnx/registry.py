"""The op registry: each op-family file registers handlers with `@op("Name", ...)`; the runner looks them up by op type.

A handler is `fn(ctx, inputs, attrs) -> value | tuple[value, ...]`. Inputs are tinycore Tensors, numpy arrays (values
known while building the graph: initializers, Shape results, folded constants) or None for an omitted optional input.
`ctx` (an OpContext) turns either kind into what the handler needs: `ctx.tensor(x)` for compute, `ctx.ints(x)` for
shapes/axes, so a handler doesn't care which it got."""
from __future__ import annotations
from typing import Any, Callable
import numpy as np

Handler = Callable[..., Any]
HANDLERS: dict[str, Handler] = {}
SINCE: dict[str, int] = {}   # op -> the lowest opset our handler follows (older opsets with other semantics are refused)

def op(*names: str, since: int = 1):
  def register(fn: Handler) -> Handler:
    for n in names: HANDLERS[n], SINCE[n] = fn, since
    return fn
  return register

class UnsupportedOpError(NotImplementedError):
  """The model uses an op (or an op's attribute/mode) tinycore.onnx doesn't implement; the message names it."""

def attr_value(a) -> Any:
  """Decode one AttributeProto to a Python value (graphs stay GraphProto; tensors become numpy)."""
  from tinycore.onnx.loader import tensor_to_numpy
  t = a.type
  if t == 1: return float(a.f)
  if t == 2: return int(a.i)
  if t == 3: return a.s.decode("utf-8", "replace")
  if t == 4: return tensor_to_numpy(a.t, where=f"attribute {a.name!r}")
  if t == 5: return a.g
  if t == 6: return [float(x) for x in a.floats]
  if t == 7: return [int(x) for x in a.ints]
  if t == 8: return [x.decode("utf-8", "replace") for x in a.strings]
  if t == 9: return [tensor_to_numpy(x, where=f"attribute {a.name!r}") for x in a.tensors]
  if t == 10: return list(a.graphs)
  raise UnsupportedOpError(f"attribute {a.name!r} has type {t}, which tinycore.onnx doesn't read")

def is_static(x) -> bool: return isinstance(x, np.ndarray)

# modules that register handlers (imported for their side effect by load_all)
FAMILIES = ("elementwise", "nn", "shape", "resize", "reduce", "indexing", "control", "quant", "einsum", "attention", "detection", "spectral",
            "sequence", "ml")

def load_all() -> dict[str, Handler]:
  import importlib
  for fam in FAMILIES: importlib.import_module(f"tinycore.onnx.ops_{fam}")
  return HANDLERS
