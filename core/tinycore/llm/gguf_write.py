"""A small GGUF (v3) writer: metadata key/values and F32/F16 tensors or any block format of llm/quant_encode.py. Used by tests and examples to build
tiny llama models (no model can be downloaded here)."""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tinycore.fileio import atomic_write
from tinycore.llm.quant_encode import quantize

TYPE_ID = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}

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
  """kv: metadata; tensors: name -> (array in torch order, F32/F16 or a block format such as Q4_K)."""
  infos, blobs, off = [], [], 0
  for name, (a, t) in tensors.items():
    if t not in TYPE_ID: raise ValueError(f"tensor {name!r}: can't write type {t!r}; types: {', '.join(TYPE_ID)}")
    raw = a.astype(np.float32).tobytes() if t == "F32" else a.astype(np.float16).tobytes() if t == "F16" else quantize(a, t)
    dims = a.shape[::-1]   # ggml lists the fastest-moving dim first
    infos.append(_s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", TYPE_ID[t], off))
    pad = -len(raw) % align
    blobs.append(raw + b"\0" * pad); off += len(raw) + pad
  kvb = b"".join(_s(k) + struct.pack("<I", (tv := _val(v))[0]) + tv[1] for k, v in kv.items())
  head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + kvb + b"".join(infos)
  atomic_write(path, head + b"\0" * (-len(head) % align) + b"".join(blobs))   # a failed write leaves an existing file whole
