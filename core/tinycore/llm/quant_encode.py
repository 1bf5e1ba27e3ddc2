"""Round-to-nearest numpy quantizers for the ggml block formats tinycore decodes (Q4_0..Q8_0, Q2_K..Q6_K), writing
ggml's byte layouts. They make test and benchmark models in every format; they are simple (one scale search per block,
no error-minimising search like llama-quantize's), so their error is a bit larger than llama.cpp's, never a different layout."""
from __future__ import annotations

import numpy as np


def _f16b(v: np.ndarray) -> np.ndarray:
  """float values (n,) or (n, 1) -> their float16 bytes (n, 2)."""
  return np.asarray(v, np.float32).reshape(-1).astype(np.float16).view(np.uint8).reshape(-1, 2)

def _f16r(v: np.ndarray) -> np.ndarray:
  """v rounded through float16, as the decoder will see it."""
  return np.asarray(v, np.float32).astype(np.float16).astype(np.float32)

def _div(x: np.ndarray, d: np.ndarray) -> np.ndarray: return x / np.where(d == 0, 1, d)

def _pack_nibbles(q: np.ndarray) -> np.ndarray:
  """(n, 2k) values < 16 -> (n, k) bytes: element j in the low nibble of byte j, element j+k in the high one."""
  k = q.shape[1] // 2
  return (q[:, :k] | (q[:, k:] << 4)).astype(np.uint8)

def _bits_to_u32(hb: np.ndarray) -> np.ndarray:
  """(n, 32) bits -> (n, 4) bytes of the little-endian u32 whose bit j is hb[:, j]."""
  return (hb.astype(np.uint32) << np.arange(32, dtype=np.uint32)).sum(1, dtype=np.uint32).view(np.uint8).reshape(-1, 4)

def _signed_max(b: np.ndarray) -> np.ndarray:
  """The element of largest magnitude in each row, with its sign (ggml's symmetric formats scale from it)."""
  return np.take_along_axis(b, np.abs(b).argmax(-1)[..., None], -1)

def quant_q8_0(b: np.ndarray) -> np.ndarray:
  d = _f16r(np.abs(b).max(1, keepdims=True) / 127)
  return np.concatenate([_f16b(d), np.clip(np.round(_div(b, d)), -127, 127).astype(np.int8).view(np.uint8)], 1)

def quant_q4_0(b: np.ndarray) -> np.ndarray:
  d = _f16r(_signed_max(b) / -8)
  q = np.clip(np.floor(_div(b, d) + 8.5), 0, 15).astype(np.uint8)
  return np.concatenate([_f16b(d), _pack_nibbles(q)], 1)

def quant_q4_1(b: np.ndarray) -> np.ndarray:
  lo, hi = b.min(1, keepdims=True), b.max(1, keepdims=True)
  d, m = _f16r((hi - lo) / 15), _f16r(lo)
  q = np.clip(np.round(_div(b - m, d)), 0, 15).astype(np.uint8)
  return np.concatenate([_f16b(d), _f16b(m), _pack_nibbles(q)], 1)

def quant_q5_0(b: np.ndarray) -> np.ndarray:
  d = _f16r(_signed_max(b) / -16)
  q = np.clip(np.floor(_div(b, d) + 16.5), 0, 31).astype(np.uint8)
  return np.concatenate([_f16b(d), _bits_to_u32(q >> 4), _pack_nibbles(q & 0xF)], 1)

def quant_q5_1(b: np.ndarray) -> np.ndarray:
  lo, hi = b.min(1, keepdims=True), b.max(1, keepdims=True)
  d, m = _f16r((hi - lo) / 31), _f16r(lo)
  q = np.clip(np.round(_div(b - m, d)), 0, 31).astype(np.uint8)
  return np.concatenate([_f16b(d), _f16b(m), _bits_to_u32(q >> 4), _pack_nibbles(q & 0xF)], 1)

def _scale_min(sub: np.ndarray, qmax: int, smax: int) -> tuple[np.ndarray, ...]:
  """K-quant sub-blocks (n, g, size) as d * sc * q - dmin * m with q in 0..qmax and integer sc, m in 0..smax:
   returns (d (n,1), dmin (n,1), sc (n,g), m (n,g), q (n,g,size))."""
  lo = np.minimum(sub.min(-1), 0)
  scale, mn = (sub.max(-1) - lo) / qmax, -lo
  d, dmin = _f16r(scale.max(-1, keepdims=True) / smax), _f16r(mn.max(-1, keepdims=True) / smax)
  sc = np.clip(np.round(_div(scale, d)), 0, smax).astype(np.uint8)
  m = np.clip(np.round(_div(mn, dmin)), 0, smax).astype(np.uint8)
  q = np.clip(np.round(_div(sub + (dmin * m)[..., None], (d * sc)[..., None])), 0, qmax).astype(np.uint8)
  return d, dmin, sc, m, q

def _crumbs(q: np.ndarray) -> np.ndarray:
  """(n, 256) 2-bit values -> (n, 64) bytes: element c*128 + s*32 + i in bits 2s of byte c*32 + i."""
  q = q.reshape(-1, 2, 4, 32).astype(np.uint8)
  return (q << (2 * np.arange(4, dtype=np.uint8))[:, None]).sum(2, dtype=np.uint8).reshape(-1, 64)

def quant_q2_k(b: np.ndarray) -> np.ndarray:
  d, dmin, sc, m, q = _scale_min(b.reshape(-1, 16, 16), 3, 15)
  return np.concatenate([sc | (m << 4), _crumbs(q.reshape(-1, 256)), _f16b(d), _f16b(dmin)], 1)

def quant_q3_k(b: np.ndarray) -> np.ndarray:
  sub = b.reshape(-1, 16, 16)
  sf = _signed_max(sub)[..., 0] / -4                   # q in -4..3 as in Q4_0, one signed 6-bit scale per 16
  d = _f16r(np.abs(sf).max(-1, keepdims=True) / 31)
  s = np.clip(np.round(_div(sf, d)), -32, 31)
  q = (np.clip(np.round(_div(sub, (d * s)[..., None])), -4, 3) + 4).astype(np.uint8).reshape(-1, 256)
  sb = (s + 32).astype(np.uint8)                        # scale j: low nibble in byte j % 8 (nibble j // 8), high crumb in byte 8 + j % 4
  lo = (sb & 0xF).reshape(-1, 2, 8)
  hi = (sb >> 4).reshape(-1, 4, 4)
  scales = np.concatenate([lo[:, 0] | (lo[:, 1] << 4), (hi << (2 * np.arange(4, dtype=np.uint8))[:, None]).sum(1, dtype=np.uint8)], 1)
  hmask = ((q >> 2).reshape(-1, 8, 32) << np.arange(8, dtype=np.uint8)[:, None]).sum(1, dtype=np.uint8)   # bit k of byte i: element 32k + i
  return np.concatenate([hmask, _crumbs(q & 3), scales, _f16b(d)], 1)

def _pack_scale_min_k4(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
  """Eight 6-bit scales and mins (n, 8) -> ggml's 12 bytes: the first four of each whole, the last four split."""
  return np.concatenate([sc[:, :4] | ((sc[:, 4:] >> 4) << 6), m[:, :4] | ((m[:, 4:] >> 4) << 6), (sc[:, 4:] & 0xF) | ((m[:, 4:] & 0xF) << 4)], 1)

def _k4_nibbles(q: np.ndarray) -> np.ndarray:
  """(n, 8, 32) values < 16 -> (n, 128): sub-block 2c in the low nibbles of bytes 32c.., 2c+1 in the high ones."""
  q = q.reshape(-1, 4, 2, 32)
  return (q[:, :, 0] | (q[:, :, 1] << 4)).reshape(-1, 128).astype(np.uint8)

def quant_q4_k(b: np.ndarray) -> np.ndarray:
  d, dmin, sc, m, q = _scale_min(b.reshape(-1, 8, 32), 15, 63)
  return np.concatenate([_f16b(d), _f16b(dmin), _pack_scale_min_k4(sc, m), _k4_nibbles(q)], 1)

def quant_q5_k(b: np.ndarray) -> np.ndarray:
  d, dmin, sc, m, q = _scale_min(b.reshape(-1, 8, 32), 31, 63)
  qh = ((q >> 4) << np.arange(8, dtype=np.uint8)[:, None]).sum(1, dtype=np.uint8)   # bit k of byte i: sub-block k, element i
  return np.concatenate([_f16b(d), _f16b(dmin), _pack_scale_min_k4(sc, m), qh, _k4_nibbles(q & 0xF)], 1)

def quant_q6_k(b: np.ndarray) -> np.ndarray:
  sub = b.reshape(-1, 16, 16)
  sf = _signed_max(sub)[..., 0] / -32
  d = _f16r(np.abs(sf).max(-1, keepdims=True) / 127)
  s = np.clip(np.round(_div(sf, d)), -128, 127)
  q = (np.clip(np.round(_div(sub, (d * s)[..., None])), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)   # half, quarter, i
  low, high = q & 0xF, q >> 4
  ql = np.concatenate([low[:, :, 0] | (low[:, :, 2] << 4), low[:, :, 1] | (low[:, :, 3] << 4)], -1).reshape(-1, 128)
  qh = (high << (2 * np.arange(4, dtype=np.uint8))[:, None]).sum(2, dtype=np.uint8).reshape(-1, 64)
  return np.concatenate([ql, qh, s.astype(np.int8).view(np.uint8), _f16b(d)], 1)

ENCODERS = {"Q4_0": (32, quant_q4_0), "Q4_1": (32, quant_q4_1), "Q5_0": (32, quant_q5_0), "Q5_1": (32, quant_q5_1), "Q8_0": (32, quant_q8_0),
            "Q2_K": (256, quant_q2_k), "Q3_K": (256, quant_q3_k), "Q4_K": (256, quant_q4_k), "Q5_K": (256, quant_q5_k), "Q6_K": (256, quant_q6_k)}

def quantize(x: np.ndarray, kind: str) -> bytes:
  """x (any shape, last dim whole blocks) -> its blocks in format `kind`, in row-major order."""
  if kind not in ENCODERS: raise ValueError(f"can't quantize to {kind!r}; formats: {', '.join(ENCODERS)}")
  bs, enc = ENCODERS[kind]
  if x.ndim == 0 or x.shape[-1] % bs: raise ValueError(f"{kind} needs the last dim to be a multiple of {bs}, got shape {x.shape}")
  return np.ascontiguousarray(enc(np.asarray(x, np.float32).reshape(-1, bs))).tobytes()
