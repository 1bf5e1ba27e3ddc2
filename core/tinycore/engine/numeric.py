"""Bit-exact conversions for the float formats numpy lacks (bfloat16, fp8 e4m3/e5m2), round-to-nearest-even."""
from __future__ import annotations
import numpy as np
from tinycore.dtype import DType, dtypes

def _f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
  u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
  rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
  return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)

def _fp8_table(dtype: DType) -> np.ndarray:
  """The float32 value of each of the 256 codes."""
  e, m = dtypes.finfo(dtype)
  bias = (1 << (e - 1)) - 1
  codes = np.arange(256, dtype=np.uint32)
  sign = np.where(codes & 0x80, -1.0, 1.0)
  exp, man = (codes >> m) & ((1 << e) - 1), codes & ((1 << m) - 1)
  val = np.where(exp == 0, man / (1 << m) * 2.0 ** (1 - bias), (1 + man / (1 << m)) * 2.0 ** (exp.astype(np.float64) - bias))
  val = sign * val
  if dtype == dtypes.fp8e4m3: val[(codes & 0x7F) == 0x7F] = np.nan          # e4m3fn: no inf, S.1111.111 is nan
  else:
    top = ((codes >> 2) & 0x1F) == 0x1F   # the all-ones exponent: inf (mantissa 0) or nan
    val[top] = np.where((codes[top] & 3) == 0, sign[top] * np.inf, np.nan)
  return val.astype(np.float32)

def float_to_bits(x: np.ndarray, dtype: DType) -> np.ndarray:
  x = np.asarray(x, dtype=np.float32)
  if dtype == dtypes.bfloat16: return _f32_to_bf16_bits(x)
  # the nearest of the non-negative codes to |x| (ties to the even code), then x's sign bit: searching the signed table
  # made +0.0 come out as -0.0 (0x80), which ties with 0x00 and is even too
  table = _fp8_table(dtype)[:128]
  codes = np.nonzero(np.isfinite(table))[0]   # ascending codes are ascending values
  vals = table[codes]
  flat = x.reshape(-1)
  a = np.abs(flat)
  pos = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
  lo, hi = vals[pos - 1], vals[pos]
  pick_hi = ((hi - a) < (a - lo)) | (((hi - a) == (a - lo)) & ((codes[pos] & 1) == 0))
  mag = np.where(pick_hi, codes[pos], codes[pos - 1])
  maxv, top = vals[-1], codes[-1]
  # a finite value past the largest saturates to it (the device helpers, PTX's .satfinite and tinygrad do the same);
  # e4m3fn has no inf, so inf saturates too, while e5m2 keeps it
  if dtype == dtypes.fp8e4m3: mag = np.where(a > maxv, top, mag)
  else: mag = np.where(np.isinf(a), 0x7C, np.where(a > maxv, top, mag))
  out = mag | np.where(np.signbit(flat), 0x80, 0)
  out = np.where(np.isnan(flat), 0x7F, out)
  return out.astype(np.uint8).reshape(x.shape)

def bits_to_float(bits: np.ndarray, dtype: DType) -> np.ndarray:
  if dtype == dtypes.bfloat16: return (bits.astype(np.uint32) << 16).view(np.float32)
  return _fp8_table(dtype)[bits.astype(np.uint8)]
