"""GGUF tensors for the LLM runner, kept as stored where the graph can decode them: Q8_0 as int8 values + f16 block
scales, Q4_0 as packed nibbles + scales, F16/BF16 as is. `QWeight.dequant()` is a lazy expression, so the scheduler
fuses the decode into the matmul that reads it (no float32 copy of the weights ever lives in memory). Other block
types (Q4_1, Q4_K, Q6_K) are decoded to float32 at load with nn.gguf's dequantizers."""
from __future__ import annotations
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.gguf import gguf_tensors, GGML_TYPES, _PLAIN, DEQUANT

class QWeight:
  """A 2-d weight (out, in) in a block format; dequant() -> float32 lazy Tensor of shape (out, in)."""
  def __init__(self, kind: str, shape: tuple, parts: dict[str, Tensor], nbytes: int):
    self.kind, self.shape, self.parts, self.nbytes = kind, shape, parts, nbytes
  def dequant(self) -> Tensor:
    p, (o, i) = self.parts, (self.shape if len(self.shape) == 2 else (0, 0))
    if self.kind == "Q8_0": return (p["q"].cast(dtypes.float32) * p["d"].cast(dtypes.float32)).reshape(o, i)
    if self.kind == "Q4_0":
      q = p["q"]   # (o, i/32, 16) bytes: low nibbles are elements 0..15 of a block, high nibbles 16..31
      nib = (q & 0xF).cat(q >> 4, dim=-1).cast(dtypes.float32) - 8
      return (nib * p["d"].cast(dtypes.float32)).reshape(o, i)
    return p["w"].cast(dtypes.float32)
  def numpy(self) -> np.ndarray: return self.dequant().numpy()
  def realize(self) -> QWeight:
    Tensor.realize(*self.parts.values())
    return self

def _blocks(raw, bb: int) -> np.ndarray: return np.frombuffer(raw, np.uint8).reshape(-1, bb)

def load_gguf_raw(fn) -> tuple[dict[str, Any], dict[str, QWeight]]:
  """(metadata, name -> QWeight) of a GGUF file; 1-d tensors (norms, biases) come back as float32 QWeights of kind F32."""
  from tinycore.nn.state import tensor_from_bytes
  kv, infos, _keep = gguf_tensors(fn)
  out: dict[str, QWeight] = {}
  for tn, shape, tt, raw in infos:
    kind, bs, bb = GGML_TYPES[tt]
    nbytes = len(raw)
    if kind in ("Q8_0", "Q4_0") and len(shape) == 2:
      blk = _blocks(raw, bb)
      g = (shape[0], shape[1] // 32)
      d = Tensor(np.ascontiguousarray(blk[:, :2]).view(np.float16).reshape(*g, 1))
      q = Tensor(np.ascontiguousarray(blk[:, 2:]).view(np.int8).reshape(*g, 32)) if kind == "Q8_0" else Tensor(np.ascontiguousarray(blk[:, 2:]).reshape(*g, 16))
      out[tn] = QWeight(kind, shape, {"q": q, "d": d}, nbytes)
    elif tt in _PLAIN: out[tn] = QWeight(kind, shape, {"w": tensor_from_bytes(raw, _PLAIN[tt], shape)}, nbytes)
    else:  # Q4_1/Q4_K/Q6_K (and 1-d quantized tensors): decode once here
      w = DEQUANT[tt](_blocks(raw, bb)).astype(np.float32).reshape(shape)
      out[tn] = QWeight("F32", shape, {"w": Tensor(w)}, w.nbytes)
  return kv, out
