"""A small GGUF (v3) writer: metadata key/values and F32/F16/Q8_0/Q4_0 tensors. Used by tests and examples to build
tiny llama models (no model can be downloaded here). Quantizers follow ggml's reference ones (quantize_row_*_ref)."""
from __future__ import annotations
import struct
from typing import Any
import numpy as np
from tinycore.fileio import atomic_write

TYPE_ID = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 8}

def quant_q8_0(x: np.ndarray) -> bytes:
  b = x.astype(np.float32).reshape(-1, 32)
  d = np.abs(b).max(1, keepdims=True) / 127
  q = np.round(b / np.where(d == 0, 1, d)).astype(np.int8)
  return (np.concatenate([d.astype(np.float16).view(np.uint8), q.view(np.uint8)], 1)).tobytes()

def quant_q4_0(x: np.ndarray) -> bytes:
  b = x.astype(np.float32).reshape(-1, 32)
  mx = np.take_along_axis(b, np.abs(b).argmax(1)[:, None], 1)  # signed value of largest magnitude
  d = mx / -8
  q = np.clip(np.floor(b / np.where(d == 0, 1, d) + 8.5), 0, 15).astype(np.uint8)
  packed = q[:, :16] | (q[:, 16:] << 4)   # element j in the low nibble of byte j, element j+16 in the high one
  return np.concatenate([d.astype(np.float16).view(np.uint8), packed], 1).tobytes()

def _s(x: str) -> bytes: return struct.pack("<Q", len(b := x.encode())) + b

def _val(v: Any) -> tuple[int, bytes]:
  if isinstance(v, bool): return 7, struct.pack("<?", v)
  if isinstance(v, int): return (4, struct.pack("<I", v)) if 0 <= v < 2**32 else (11, struct.pack("<q", v))
  if isinstance(v, float): return 6, struct.pack("<f", v)
  if isinstance(v, str): return 8, _s(v)
  if isinstance(v, (list, tuple)):
    items = [_val(x) for x in v]
    it = items[0][0] if items else 4
    if any(t != it for t, _ in items): it, items = 6, [_val(float(x)) for x in v]   # mixed int/float -> float32
    return 9, struct.pack("<IQ", it, len(v)) + b"".join(b for _, b in items)
  raise TypeError(f"can't write a {type(v).__name__} as GGUF metadata")

def gguf_write(path: str, kv: dict[str, Any], tensors: dict[str, tuple[np.ndarray, str]], align: int = 32) -> None:
  """kv: metadata; tensors: name -> (array in torch order, one of F32/F16/Q8_0/Q4_0)."""
  infos, blobs, off = [], [], 0
  for name, (a, t) in tensors.items():
    raw = {"F32": lambda: a.astype(np.float32).tobytes(), "F16": lambda: a.astype(np.float16).tobytes(),
           "Q8_0": lambda: quant_q8_0(a), "Q4_0": lambda: quant_q4_0(a)}[t]()
    dims = a.shape[::-1]   # ggml lists the fastest-moving dim first
    infos.append(_s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", TYPE_ID[t], off))
    pad = -len(raw) % align
    blobs.append(raw + b"\0" * pad); off += len(raw) + pad
  kvb = b"".join(_s(k) + struct.pack("<I", (tv := _val(v))[0]) + tv[1] for k, v in kv.items())
  head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + kvb + b"".join(infos)
  atomic_write(path, head + b"\0" * (-len(head) % align) + b"".join(blobs))   # a failed write leaves an existing file whole
