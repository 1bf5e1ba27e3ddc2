"""ggml's block-quantized weight formats decoded with tensor ops (byte slices, same-size bitcasts, shifts, masks, scales).
The input is the raw block bytes as a uint8 Tensor; the output is a lazy float32 Tensor, so a matmul that reads it gets
the decode fused into its reduce and no float32 copy of the weight is ever stored. Layouts follow ggml-quants.c; element
order inside a block matches ggml's reference dequantizers (and the `gguf` package's)."""
from __future__ import annotations

import numpy as np

from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.tensor import Tensor

QK, QK_K = 32, 256
# name -> (elements per block, bytes per block) for every format decoded here
BLOCK_FORMATS: dict[str, tuple[int, int]] = {"Q4_0": (QK, 18), "Q4_1": (QK, 20), "Q5_0": (QK, 22), "Q5_1": (QK, 24), "Q8_0": (QK, 34),
  "Q2_K": (QK_K, 84), "Q3_K": (QK_K, 110), "Q4_K": (QK_K, 144), "Q5_K": (QK_K, 176), "Q6_K": (QK_K, 210)}

def _f16(b: Tensor, at: int) -> Tensor:
  """The little-endian float16 at byte `at` of every block, as float32 (..., 1). Built from two bytes and a same-size
  bitcast, which stays elementwise (a bitcast to a wider type would need the bytes as their own buffer)."""
  u = b[..., at:at + 1].cast(dtypes.uint16) | (b[..., at + 1:at + 2].cast(dtypes.uint16) << 8)
  return u.bitcast(dtypes.float16).cast(dtypes.float32)

def _fields(b: Tensor, bits: int, count: int) -> Tensor:
  """Split every byte of b (..., n) into `count` fields of `bits` bits, lowest first: (..., count, n) uint8. Field k of
  all n bytes comes before field k+1, which is how ggml lays out nibbles, crumbs and high bits."""
  shifts = (Tensor.arange(count, dtype=dtypes.int32) * bits).cast(dtypes.uint8).reshape(count, 1)
  x = b.unsqueeze(-2).expand(*b.shape[:-1], count, b.shape[-1])
  return (x >> shifts) & ((1 << bits) - 1)

_Q5_MASKS: dict[str, tuple[Tensor, Tensor, Tensor]] = {}

def _q5_masks(device: str) -> tuple[Tensor, Tensor, Tensor]:
  """Per-element constants for Q5's fifth bits (32 bytes each, kept per device): element j's bit is bit j % 8 of qh byte
  j // 8; elements 16h..16h+15 read bytes 2h and 2h+1, picked by a mask each, and the bit's value is scaled to 16."""
  if device not in _Q5_MASKS:
    j = np.arange(32)
    bit = (1 << (j % 8)).astype(np.uint8)
    even = (j // 8) % 2 == 0
    _Q5_MASKS[device] = (Tensor(np.where(even, bit, 0).astype(np.uint8), device=device).realize(),
                         Tensor(np.where(even, 0, bit).astype(np.uint8), device=device).realize(),
                         Tensor((16.0 / bit).astype(np.float32), device=device).realize())
  return _Q5_MASKS[device]

def _q5_high(b: Tensor, at: int) -> Tensor:
  """Q5_0/Q5_1: 16 x the fifth bit of each element (bit j of the little-endian u32 at `at`), as float32 (..., 32).
  Built from the two qh bytes a run of 16 elements shares and constant masks, so every lane reads the same byte and
  the CPU vectorizes it (a per-element byte j // 8 is a gather)."""
  lead = b.shape[:-1]
  qh = b[..., at:at + 4].reshape(*lead, 2, 2)
  pick = lambda k: qh[..., k:k + 1].expand(*lead, 2, 16).reshape(*lead, 32)
  lo_mask, hi_mask, scale = _q5_masks(b.device if isinstance(b.device, str) else b.device[0])
  return ((pick(0) & lo_mask) | (pick(1) & hi_mask)).cast(dtypes.float32) * scale

def _nibbles(b: Tensor) -> Tensor:
  """Bytes (..., n) -> (..., 2n): low nibbles of all n bytes, then the high nibbles."""
  return _fields(b, 4, 2).reshape(*b.shape[:-1], 2 * b.shape[-1])

def _scale_min_k4(sc: Tensor) -> tuple[Tensor, Tensor]:
  """The eight 6-bit (scale, min) pairs of a Q4_K/Q5_K block's 12 scale bytes: two float32 (..., 8). Pair j < 4 is
  the low 6 bits of bytes j and j+4; pair j >= 4 is a nibble of byte j+4 plus the top 2 bits of bytes j-4 and j. Both
  cases are computed for all j and picked with a where on j, which stays elementwise (a cat of the halves was not fused)."""
  lead = sc.shape[:-1]
  twice = lambda t: t.unsqueeze(-2).expand(*lead, 2, 4)   # (..., half, j % 4)
  d, m, md = twice(sc[..., 0:4]), twice(sc[..., 4:8]), twice(sc[..., 8:12])
  # [[True], [False]] as a padded constant: no buffer, and unlike an arange compare it is never scheduled as its own kernel
  first = Tensor.full((1, 1), True, dtype=dtypes.bool, device=sc.device).pad(((0, 1), (0, 0)))
  s = first.where(d & 63, (md & 0xF) | ((d >> 2) & 0x30)).reshape(*lead, 8)
  mn = first.where(m & 63, (md >> 4) | ((m >> 2) & 0x30)).reshape(*lead, 8)
  return s.cast(dtypes.float32), mn.cast(dtypes.float32)

def _blocks_q4_0(b: Tensor) -> Tensor: return _f16(b, 0) * (_nibbles(b[..., 2:18]).cast(dtypes.float32) - 8)
def _blocks_q4_1(b: Tensor) -> Tensor: return _f16(b, 0) * _nibbles(b[..., 4:20]).cast(dtypes.float32) + _f16(b, 2)
def _blocks_q5_0(b: Tensor) -> Tensor: return _f16(b, 0) * (_nibbles(b[..., 6:22]).cast(dtypes.float32) + _q5_high(b, 2) - 16)
def _blocks_q5_1(b: Tensor) -> Tensor: return _f16(b, 0) * (_nibbles(b[..., 8:24]).cast(dtypes.float32) + _q5_high(b, 4)) + _f16(b, 2)
def _int8(b: Tensor) -> Tensor:
  """Bytes read as two's-complement int8, as float32: flipping the sign bit makes them 0..255 for x + 128. Plain byte
  ops and a uint8 -> float cast, which vectorize on the CPU (an int8 bitcast there ran 6x slower)."""
  return (b ^ 0x80).cast(dtypes.float32) - 128
def _blocks_q8_0(b: Tensor) -> Tensor: return _f16(b, 0) * _int8(b[..., 2:34])

def _blocks_q2_k(b: Tensor) -> Tensor:
  lead = b.shape[:-1]
  sc = b[..., 0:16]
  dl = _f16(b, 80) * (sc & 0xF).cast(dtypes.float32)          # (..., 16): one scale and min per 16 elements
  ml = _f16(b, 82) * (sc >> 4).cast(dtypes.float32)
  q = _fields(b[..., 16:80].reshape(*lead, 2, 32), 2, 4).reshape(*lead, 16, 16).cast(dtypes.float32)   # 2 halves x 4 crumbs x 32 bytes
  return (dl.unsqueeze(-1) * q - ml.unsqueeze(-1)).reshape(*lead, QK_K)

def _blocks_q3_k(b: Tensor) -> Tensor:
  lead = b.shape[:-1]
  sc = b[..., 96:108]
  lo = _fields(sc[..., 0:8], 4, 2).reshape(*lead, 16)           # scale i: low 4 bits from nibble i of bytes 0..7
  hi = _fields(sc[..., 8:12], 2, 4).reshape(*lead, 16)          # and 2 high bits from crumb i of bytes 8..11
  scale = ((lo | (hi << 4)).cast(dtypes.float32) - 32) * _f16(b, 108)
  ql = _fields(b[..., 32:96].reshape(*lead, 2, 32), 2, 4).reshape(*lead, 16, 16)
  hm = _fields(b[..., 0:32], 1, 8).reshape(*lead, 16, 16)       # a set hmask bit means no -4 offset
  q = ql.cast(dtypes.float32) - (1 - hm.cast(dtypes.float32)) * 4
  return (scale.unsqueeze(-1) * q).reshape(*lead, QK_K)

def _blocks_q4_k(b: Tensor) -> Tensor:
  lead = b.shape[:-1]
  s, m = _scale_min_k4(b[..., 4:16])
  q = _fields(b[..., 16:144].reshape(*lead, 4, 32), 4, 2).reshape(*lead, 8, 32).cast(dtypes.float32)
  return ((_f16(b, 0) * s).unsqueeze(-1) * q - (_f16(b, 2) * m).unsqueeze(-1)).reshape(*lead, QK_K)

def _blocks_q5_k(b: Tensor) -> Tensor:
  lead = b.shape[:-1]
  s, m = _scale_min_k4(b[..., 4:16])
  ql = _fields(b[..., 48:176].reshape(*lead, 4, 32), 4, 2).reshape(*lead, 8, 32)
  qh = _fields(b[..., 16:48], 1, 8)                             # (..., 8, 32): bit k of byte i -> sub-block k, element i
  q = (ql | (qh << 4)).cast(dtypes.float32)
  return ((_f16(b, 0) * s).unsqueeze(-1) * q - (_f16(b, 2) * m).unsqueeze(-1)).reshape(*lead, QK_K)

def _blocks_q6_k(b: Tensor) -> Tensor:
  lead = b.shape[:-1]
  ql = _fields(b[..., 0:128].reshape(*lead, 2, 64), 4, 2).reshape(*lead, 8, 32)   # 2 halves x 2 nibbles x 64 bytes
  qh = _fields(b[..., 128:192].reshape(*lead, 2, 32), 2, 4).reshape(*lead, 8, 32)  # 2 halves x 4 crumbs x 32 bytes
  q = (ql | (qh << 4)).cast(dtypes.float32) - 32
  scale = _f16(b, 208) * _int8(b[..., 192:208])   # (..., 16): one per 16 elements
  return (scale.unsqueeze(-1) * q.reshape(*lead, 16, 16)).reshape(*lead, QK_K)

_DECODERS = {"Q4_0": _blocks_q4_0, "Q4_1": _blocks_q4_1, "Q5_0": _blocks_q5_0, "Q5_1": _blocks_q5_1, "Q8_0": _blocks_q8_0,
             "Q2_K": _blocks_q2_k, "Q3_K": _blocks_q3_k, "Q4_K": _blocks_q4_k, "Q5_K": _blocks_q5_k, "Q6_K": _blocks_q6_k}

def quantized_nbytes(kind: str, shape: tuple[int, ...]) -> int:
  """Bytes a tensor of `shape` takes in format `kind` (its last dim must be whole blocks)."""
  bs, bb = BLOCK_FORMATS[kind]
  if not shape or shape[-1] % bs: raise ValueError(f"a {kind} tensor's last dim must be a multiple of {bs}, got shape {shape}")
  return prod(shape) // bs * bb

def dequantize(raw: Tensor, kind: str, shape: tuple[int, ...]) -> Tensor:
  """raw: uint8 Tensor holding the blocks of a tensor of `shape` (rows of whole blocks, any 2-d or flat layout of the
  bytes) -> lazy float32 Tensor of `shape`."""
  if kind not in _DECODERS: raise ValueError(f"no decoder for block format {kind!r}; formats: {', '.join(_DECODERS)}")
  if raw.dtype != dtypes.uint8: raise TypeError(f"{kind} blocks must be a uint8 Tensor, got {raw.dtype}")
  shape = tuple(shape)
  if raw.numel() != (n := quantized_nbytes(kind, shape)): raise ValueError(f"{kind} tensor of shape {shape} needs {n} bytes, got {raw.numel()}")
  bs, bb = BLOCK_FORMATS[kind]
  rows = prod(shape[:-1])
  blocks = raw.reshape(rows, shape[-1] // bs, bb)
  return _DECODERS[kind](blocks).reshape(shape)
