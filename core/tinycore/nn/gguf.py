"""gguf_load: GGUF (llama.cpp) files: metadata key/values and tensors, with the block-quantized types dequantized to float32.
Layouts follow ggml's reference dequantizers (ggml-quants.c); a block is decoded for all blocks at once with numpy."""
from __future__ import annotations

import bisect
import struct
import sys
from array import array
from collections.abc import Collection
from typing import Any

import numpy as np

from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.nn.file_errors import CorruptFileError, UnsupportedFileError
from tinycore.nn.packed_strings import PackedStrings
from tinycore.tensor import Tensor

QK, QK_K = 32, 256
# ggml type id -> (name, elements per block, bytes per block)
GGML_TYPES: dict[int, tuple[str, int, int]] = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", QK, 18), 3: ("Q4_1", QK, 20), 6: ("Q5_0", QK, 22),
  7: ("Q5_1", QK, 24), 8: ("Q8_0", QK, 34), 10: ("Q2_K", QK_K, 84), 11: ("Q3_K", QK_K, 110), 12: ("Q4_K", QK_K, 144), 13: ("Q5_K", QK_K, 176),
  14: ("Q6_K", QK_K, 210), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
  28: ("F64", 1, 8), 30: ("BF16", 1, 2)}
# ggml types tinycore knows by name but doesn't decode (the IQ formats' lattice codebooks, ternary and fp4 blocks)
UNSUPPORTED_TYPES = {9: "Q8_1", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
  23: "IQ4_XS", 29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4", 40: "NVFP4"}
_PLAIN = {0: dtypes.float32, 1: dtypes.float16, 24: dtypes.int8, 25: dtypes.int16, 26: dtypes.int32, 27: dtypes.int64, 28: dtypes.float64,
          30: dtypes.bfloat16}

def _f16(b: np.ndarray) -> np.ndarray: return np.ascontiguousarray(b).view(np.float16).astype(np.float32)

def dequant_q4_0(blk: np.ndarray) -> np.ndarray:
  d, qs = _f16(blk[:, :2]), blk[:, 2:18]
  q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.int8) - 8  # low nibbles are elements 0..15, high 16..31
  return d * q

def dequant_q4_1(blk: np.ndarray) -> np.ndarray:
  d, m, qs = _f16(blk[:, :2]), _f16(blk[:, 2:4]), blk[:, 4:20]
  return d * np.concatenate([qs & 0xF, qs >> 4], axis=1) + m

def dequant_q8_0(blk: np.ndarray) -> np.ndarray: return _f16(blk[:, :2]) * blk[:, 2:].view(np.int8)

def _scale_min_k4(sc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """The 8 six-bit (scale, min) pairs packed in 12 bytes of a Q4_K/Q5_K block."""
  s, m = np.empty((sc.shape[0], 8), np.uint8), np.empty((sc.shape[0], 8), np.uint8)
  s[:, :4], m[:, :4] = sc[:, 0:4] & 63, sc[:, 4:8] & 63
  s[:, 4:] = (sc[:, 8:12] & 0xF) | ((sc[:, 0:4] >> 6) << 4)
  m[:, 4:] = (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)
  return s.astype(np.float32), m.astype(np.float32)

def dequant_q4_k(blk: np.ndarray) -> np.ndarray:
  d, dmin = _f16(blk[:, 0:2]), _f16(blk[:, 2:4])
  sc, mn = _scale_min_k4(blk[:, 4:16])
  qs = blk[:, 16:144].reshape(-1, 4, 32)  # 4 chunks of 32 bytes; each gives 2 sub-blocks: low nibbles then high
  q = np.stack([qs & 0xF, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float32)
  return ((d * sc)[:, :, None] * q - (dmin * mn)[:, :, None]).reshape(-1, QK_K)

def dequant_q6_k(blk: np.ndarray) -> np.ndarray:
  ql, qh, sc, d = blk[:, 0:128], blk[:, 128:192], blk[:, 192:208].view(np.int8).astype(np.float32), _f16(blk[:, 208:210])
  out = np.empty((blk.shape[0], QK_K), np.float32)
  for h in range(2):  # two halves of 128 elements: 64 bytes of ql, 32 of qh, 8 scales each
    l, hh, s = ql[:, 64 * h:64 * h + 64], qh[:, 32 * h:32 * h + 32], sc[:, 8 * h:8 * h + 8]
    q = [(l[:, :32] & 0xF) | (((hh >> 0) & 3) << 4), (l[:, 32:] & 0xF) | (((hh >> 2) & 3) << 4),
         (l[:, :32] >> 4) | (((hh >> 4) & 3) << 4), (l[:, 32:] >> 4) | (((hh >> 6) & 3) << 4)]
    for k in range(4):
      # element j of quarter k uses scale index j // 16 + 2k
      qq = q[k].astype(np.int8).astype(np.float32) - 32
      out[:, 128 * h + 32 * k:128 * h + 32 * (k + 1)] = d * np.repeat(s[:, 2 * k:2 * k + 2], 16, axis=1) * qq
  return out

def _bits(b: np.ndarray, width: int, count: int) -> np.ndarray:
  """Bytes (n, k) -> (n, count, k): field i (of `width` bits, lowest first) of every byte, field-major as ggml lays them."""
  return (b[:, None, :] >> (width * np.arange(count, dtype=np.uint8))[None, :, None]) & ((1 << width) - 1)

def _q5_high(qh: np.ndarray) -> np.ndarray:
  """Q5_0/Q5_1: the 4 qh bytes -> the fifth bit of each of the 32 elements (bit j of the little-endian u32 -> element j)."""
  return _bits(qh, 1, 8).transpose(0, 2, 1).reshape(-1, 32)

def dequant_q5_0(blk: np.ndarray) -> np.ndarray:
  q = np.concatenate([blk[:, 6:22] & 0xF, blk[:, 6:22] >> 4], axis=1) | (_q5_high(blk[:, 2:6]) << 4)
  return _f16(blk[:, :2]) * (q.astype(np.float32) - 16)

def dequant_q5_1(blk: np.ndarray) -> np.ndarray:
  q = np.concatenate([blk[:, 8:24] & 0xF, blk[:, 8:24] >> 4], axis=1) | (_q5_high(blk[:, 4:8]) << 4)
  return _f16(blk[:, :2]) * q.astype(np.float32) + _f16(blk[:, 2:4])

def dequant_q2_k(blk: np.ndarray) -> np.ndarray:
  sc, d, dmin = blk[:, 0:16], _f16(blk[:, 80:82]), _f16(blk[:, 82:84])
  q = _bits(blk[:, 16:80].reshape(-1, 32), 2, 4).reshape(-1, 16, 16).astype(np.float32)   # 2 halves x 4 crumbs x 32 bytes
  return ((d * (sc & 0xF).astype(np.float32))[:, :, None] * q - (dmin * (sc >> 4).astype(np.float32))[:, :, None]).reshape(-1, QK_K)

def dequant_q3_k(blk: np.ndarray) -> np.ndarray:
  sc = blk[:, 96:108]
  s = (_bits(sc[:, 0:8], 4, 2).reshape(-1, 16) | (_bits(sc[:, 8:12], 2, 4).reshape(-1, 16) << 4)).astype(np.float32) - 32
  ql = _bits(blk[:, 32:96].reshape(-1, 32), 2, 4).reshape(-1, 16, 16).astype(np.float32)
  hm = _bits(blk[:, 0:32], 1, 8).reshape(-1, 16, 16).astype(np.float32)   # a set bit means no -4 offset
  return ((_f16(blk[:, 108:110]) * s)[:, :, None] * (ql - (1 - hm) * 4)).reshape(-1, QK_K)

def dequant_q5_k(blk: np.ndarray) -> np.ndarray:
  d, dmin = _f16(blk[:, 0:2]), _f16(blk[:, 2:4])
  sc, mn = _scale_min_k4(blk[:, 4:16])
  ql = np.stack([blk[:, 48:176].reshape(-1, 4, 32) & 0xF, blk[:, 48:176].reshape(-1, 4, 32) >> 4], axis=2).reshape(-1, 8, 32)
  q = (ql | (_bits(blk[:, 16:48], 1, 8) << 4)).astype(np.float32)
  return ((d * sc)[:, :, None] * q - (dmin * mn)[:, :, None]).reshape(-1, QK_K)

DEQUANT = {2: dequant_q4_0, 3: dequant_q4_1, 6: dequant_q5_0, 7: dequant_q5_1, 8: dequant_q8_0, 10: dequant_q2_k, 11: dequant_q3_k,
           12: dequant_q4_k, 13: dequant_q5_k, 14: dequant_q6_k}

class _Reader:
  """Reads little-endian fields from the file's bytes; every read is checked against the end of the file first, so a
  count or length field can never make it allocate more than the file holds."""
  def __init__(self, mv: memoryview, name: str): self.mv, self.name, self.off = mv, name, 0
  def left(self) -> int: return len(self.mv) - self.off
  def take(self, n: int, what: str) -> memoryview:
    if n > self.left():
      raise CorruptFileError(f"{self.name}: truncated GGUF file: reading {what} needs {n} bytes at offset {self.off}, file has {len(self.mv)}")
    r = self.mv[self.off:self.off + n]; self.off += n
    return r
  def unpack(self, fmt: str, what: str): return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))[0]
  def count(self, what: str, min_item_bytes: int) -> int:
    """A u64 count of items that each take at least `min_item_bytes`: one the rest of the file can't hold is corrupt."""
    at, n = self.off, self.unpack("Q", what)
    if min_item_bytes and n > self.left() // min_item_bytes:
      raise CorruptFileError(f"{self.name}: truncated or corrupt GGUF file: {what} {n} at offset {at} can't fit in the {self.left()} bytes left")
    return n
  def string(self, what: str) -> str:
    n = self.count(what + " length", 1)
    try: return bytes(self.take(n, what)).decode("utf-8")
    except UnicodeDecodeError as e: raise CorruptFileError(f"{self.name}: {what} at offset {self.off - n} is not UTF-8: {e}") from None

  def _spans(self, n: int, what: str):
    """(index, offset, length) of n length-prefixed strings in a row, each checked to fit before it is yielded; the
    reader's offset moves past them all at the end. One loop, not a call per field: strings() and packed_strings() read
    ~50k-250k of them."""
    mv, off, end, u64 = self.mv, self.off, len(self.mv), _U64.unpack_from
    for i in range(n):
      if end - off < 8:
        raise CorruptFileError(f"{self.name}: truncated GGUF file: reading {what} length needs 8 bytes at offset {off}, file has {end}")
      k = u64(mv, off)[0]
      off += 8
      if k > end - off:
        raise CorruptFileError(f"{self.name}: truncated or corrupt GGUF file: {what} length {k} at offset {off - 8} can't fit in "
                               f"the {end - off} bytes left")
      yield i, off, k
      off += k
    self.off = off   # reached once the caller has taken all n

  def strings(self, n: int, what: str) -> list[str]:
    """n strings in a row (a vocabulary: ~50k-250k of them), each checked as string() does, in one loop: a call per
    field made reading a 49k-token vocabulary ~0.2 s of the time to the first token."""
    mv, out = self.mv, []
    for _, off, k in self._spans(n, what):
      try: out.append(str(mv[off:off + k], "utf-8"))
      except UnicodeDecodeError as e: raise CorruptFileError(f"{self.name}: {what} at offset {off} is not UTF-8: {e}") from None
    return out

  def packed_strings(self, n: int, what: str) -> PackedStrings:
    """n strings in a row, checked as strings() does, into one blob + offsets: no Python object per string (and no
    numpy: its code pages for the few array ops this would take were ~0.4 MiB of the process's RSS)."""
    mv = self.mv
    blob, offsets = bytearray(), array("q", [0])   # C values: appending leaves no int object behind
    for i, off, k in self._spans(n, what):
      # each item must be UTF-8 on its own: with the whole blob decoding (below), that is no item starting on a
      # continuation byte, inside a character an earlier item began
      if k and mv[off] & 0xC0 == 0x80:
        raise CorruptFileError(f"{self.name}: {what} item {i} at offset {off} is not UTF-8: it starts inside a character")
      blob += mv[off:off + k]
      offsets.append(len(blob))
    data = bytes(blob)
    del blob
    try: data.decode("utf-8")
    except UnicodeDecodeError as e:
      i = bisect.bisect_right(offsets, e.start) - 1
      raise CorruptFileError(f"{self.name}: {what} item {i} is not UTF-8: {e.reason} at byte {e.start - offsets[i]}") from None
    return PackedStrings(data, offsets if len(data) >= 2**31 else array("i", offsets))

_U64 = struct.Struct("<Q")
_KV_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_MIN_BYTES = {**{t: struct.calcsize("<" + f) for t, f in _KV_FMT.items()}, 8: 8, 9: 12}   # a string is >= its length field
MAX_NESTING = 8   # arrays of arrays: real files use one level

# GGUF numeric item type -> array typecode of the same size (no bool: array has none)
_ARRAY_CODE = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 10: "Q", 11: "q", 12: "d"}

def _read_value(r: _Reader, vtype: int, what: str, depth: int = 0, packed: bool = False) -> Any:
  """One value. `packed`: an array comes back compact, strings as PackedStrings and numbers as an array.array, not a list."""
  if vtype in _KV_FMT: return r.unpack(_KV_FMT[vtype], what)
  if vtype == 8: return r.string(what)
  if vtype == 9:
    if depth >= MAX_NESTING: raise CorruptFileError(f"{r.name}: {what} at offset {r.off} nests arrays more than {MAX_NESTING} deep")
    at, itype = r.off, r.unpack("I", what + " item type")
    if itype not in _MIN_BYTES: raise CorruptFileError(f"{r.name}: unknown GGUF value type {itype} for the items of {what} at offset {at}")
    n = r.count(what + " length", _MIN_BYTES[itype])
    if packed and itype in _ARRAY_CODE and array(_ARRAY_CODE[itype]).itemsize == _MIN_BYTES[itype]:
      a = array(_ARRAY_CODE[itype])
      a.frombytes(r.take(n * _MIN_BYTES[itype], what))
      if sys.byteorder == "big": a.byteswap()
      return a
    if itype in _KV_FMT:  # numeric arrays in one read
      return list(struct.unpack(f"<{n}{_KV_FMT[itype]}", r.take(n * _MIN_BYTES[itype], what)))
    if itype == 8: return r.packed_strings(n, what) if packed else r.strings(n, what)
    return [_read_value(r, itype, what, depth + 1) for _ in range(n)]
  raise CorruptFileError(f"{r.name}: unknown GGUF value type {vtype} for {what} at offset {r.off - 4}")

MAX_DIMS = 8   # ggml's GGML_MAX_DIMS is 4

def gguf_tensors(fn, packed: Collection[str] = ()):
  """Read a GGUF file's header: (metadata, [(name, shape in torch order, ggml type, raw bytes)], keepalive). Every count,
  length, type, dimension, alignment and byte range is checked against the file before it is used; `keepalive` holds
  the file mapping the bytes live in. The array values of the keys in `packed` come back compact (a PackedStrings of
  strings, an array.array of numbers) instead of as lists: a vocabulary's 50k+ pieces and scores without an object each."""
  from tinycore.nn.state import _open_bytes
  mv, name, keep = _open_bytes(fn)
  r = _Reader(mv, name)
  if bytes(r.take(4, "magic")) != b"GGUF": raise CorruptFileError(f"{name}: not a GGUF file (bad magic at offset 0)")
  version = r.unpack("I", "version")
  if version not in (2, 3): raise UnsupportedFileError(f"{name}: unsupported GGUF version {version} at offset 4 (tinycore reads 2 and 3)")
  # a tensor info is >= 8 (name length) + 4 (ndim) + 4 (type) + 8 (offset) bytes; a key/value >= 8 + 4 + 1
  n_tensors, n_kv = r.count("tensor count", 24), r.count("metadata count", 13)
  kv: dict[str, Any] = {}
  for _ in range(n_kv):
    key = r.string("metadata key")
    kv[key] = _read_value(r, r.unpack("I", f"type of {key!r}"), f"value of {key!r}", packed=key in packed)
  infos = []
  for _ in range(n_tensors):
    tname = r.string("tensor name")
    at, nd = r.off, r.unpack("I", f"ndim of {tname!r}")
    if nd > MAX_DIMS: raise CorruptFileError(f"{name}: tensor {tname!r} has {nd} dimensions at offset {at}, more than {MAX_DIMS}")
    dims = [r.unpack("Q", f"dims of {tname!r}") for _ in range(nd)]
    infos.append((tname, dims, r.unpack("I", f"type of {tname!r}"), r.unpack("Q", f"offset of {tname!r}")))
  align = kv.get("general.alignment", 32)
  # a zero alignment divided by zero; an odd one is not what any writer produces
  if not (isinstance(align, int) and not isinstance(align, bool) and 0 < align <= 1 << 16 and align & (align - 1) == 0):
    raise CorruptFileError(f"{name}: general.alignment is {align!r}; it must be a power of two up to 65536")
  start = -(-r.off // align) * align
  out = []
  for tname, dims, ttype, off in infos:
    if ttype in UNSUPPORTED_TYPES:
      quant = ", ".join(n for n, bs, _ in GGML_TYPES.values() if bs > 1)
      raise UnsupportedFileError(f"{name}: tensor {tname!r} is {UNSUPPORTED_TYPES[ttype]} (ggml type {ttype}), a format tinycore doesn't decode; "
                                 f"use a file quantized as one of {quant} (e.g. a Q4_K_M or Q8_0 download)")
    if ttype not in GGML_TYPES: raise UnsupportedFileError(f"{name}: tensor {tname!r} has ggml type {ttype}, which tinycore can't decode")
    tn, bs, bb = GGML_TYPES[ttype]
    n = prod(dims)
    # ggml blocks run along the innermost dimension: each row is whole blocks
    if dims and dims[0] % bs:
      raise CorruptFileError(f"{name}: tensor {tname!r} ({tn}) has rows of {dims[0]} elements, not a multiple of its block size {bs}")
    if n % bs: raise CorruptFileError(f"{name}: tensor {tname!r} ({tn}) has {n} elements, not a multiple of its block size {bs}")
    nbytes, b = n // bs * bb, start + off
    if b + nbytes > len(mv):
      raise CorruptFileError(f"{name}: tensor {tname!r} ({tn}, {nbytes} bytes at offset {b}) runs past the end of the file ({len(mv)} bytes)")
    out.append((tname, tuple(reversed(dims)), ttype, mv[b:b + nbytes]))
  return kv, out, keep

def gguf_load(fn) -> tuple[dict[str, Any], dict[str, Tensor]]:
  """(metadata, tensors) of a GGUF file (a path, bytes, or a uint8 Tensor of the file). Shapes are torch order (ggml's reversed);
  quantized tensors come back as float32."""
  from tinycore.nn.state import tensor_from_bytes
  kv, infos, _keep = gguf_tensors(fn)
  out: dict[str, Tensor] = {}
  for tname, shape, ttype, raw in infos:
    if ttype in _PLAIN: out[tname] = tensor_from_bytes(raw, _PLAIN[ttype], shape)
    else: out[tname] = Tensor(DEQUANT[ttype](np.frombuffer(raw, np.uint8).reshape(-1, GGML_TYPES[ttype][2])).astype(np.float32).reshape(shape))
  return kv, out
