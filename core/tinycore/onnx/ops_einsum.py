"""Einsum: the equation goes straight to Tensor.einsum (ONNX and numpy share the notation, including '...')."""
from __future__ import annotations
from tinycore.onnx.registry import op
from tinycore.tensor import Tensor

@op("Einsum")
def einsum(ctx, ins, attrs):
  eq = attrs["equation"].replace(" ", "")
  ts = [ctx.tensor(t) for t in ins]
  return Tensor.einsum(eq, *ts).cast(ts[0].dtype)
