"""What each vector ALU operation computes, lane-wise on numpy arrays, apart from how its operands are encoded.

OPS[name] = (destination type, source types, fn): fn takes the sources already converted to their types (numpy arrays
of 32 lanes, or scalars) and returns the destination's values. The wave (wave.py) reads and writes registers; the
comparisons (VOPC), carries and lane ops that need more than values are there too. Types are 'f32', 'u16', 'b64', ...;
'b' is raw bits. Transcendentals are computed in float64 and rounded once, inside the 1 ulp the RDNA guides allow;
v_sin/v_cos take revolutions (x * 2*pi radians) as the hardware does."""
from __future__ import annotations
import re
from fractions import Fraction
import numpy as np

NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i32": np.int32, "u32": np.uint32, "b32": np.uint32,
      "i16": np.int16, "u16": np.uint16, "b16": np.uint16, "i64": np.int64, "u64": np.uint64, "b64": np.uint64, "bf16": np.uint16,
      "i8": np.int8, "u8": np.uint8}
BITS = {t: np.dtype(d).itemsize * 8 for t, d in NP.items()}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}

def typed(raw, t: str):
  """Raw register bits (unsigned numpy of the type's width) -> values of type t (bf16 widens to float32)."""
  if t == "bf16": return (np.asarray(raw, np.uint32) << 16).view(np.float32)
  return np.asarray(raw, UINT[BITS[t]]).view(NP[t])

def raw(x, t: str):
  """Values -> raw bits of type t's width (floats round to t, ints wrap)."""
  if t == "bf16":
    u = np.asarray(x, np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)   # nearest even
    return np.where(np.isnan(np.asarray(x, np.float32)), np.uint16(0x7FC0), r)
  d = NP[t]
  a = np.asarray(x)
  if a.dtype.kind == "f" and np.dtype(d).kind in "iu":
    a = np.trunc(np.nan_to_num(a, nan=0)).astype(np.int64 if np.dtype(d).kind == "i" else np.uint64)
  return a.astype(d).view(UINT[BITS[t]])

def _f64(x): return np.asarray(x, np.float64)
def _cvt_int(x, lo, hi, d):
  """float -> int as the hardware converts: truncate, saturate, NaN -> 0."""
  x = _f64(x)
  return np.where(np.isnan(x), 0, np.clip(np.trunc(np.nan_to_num(x)), lo, hi)).astype(d)
def _fma(a, b, c, t):
  """Fused: f32/f16 products are exact in float64; float64 goes through exact rationals (one rounding, like v_fma_f64)."""
  if t != "f64": return (_f64(a) * _f64(b) + _f64(c)).astype(NP[t])
  a, b, c = np.broadcast_arrays(_f64(a), _f64(b), _f64(c))
  out = a * b + c   # right wherever an operand or the result is not finite
  for i in np.ndindex(out.shape):
    if np.isfinite(out[i]) and np.isfinite(a[i] * b[i]): out[i] = float(Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i])))
  return out
def _u64(x): return np.asarray(x).astype(np.uint64)
def _shift(b, n): return np.asarray(b) & n   # shift amounts use their low bits only
def _bfe(x, off, width, signed: bool):
  off, width = np.asarray(off, np.uint32) & 31, np.asarray(width, np.uint32) & 31
  v = (np.asarray(x, np.uint32).astype(np.uint64) >> off) & ((np.uint64(1) << width.astype(np.uint64)) - np.uint64(1))
  if signed:
    sign = (v >> np.maximum(width.astype(np.int64) - 1, 0).astype(np.uint64)) & np.uint64(1)
    v = np.where((width > 0) & (sign == 1), v | ~((np.uint64(1) << width.astype(np.uint64)) - np.uint64(1)), v)
  return v.astype(np.uint32)
def _class(x, mask):
  """v_cmp_class: which of sNaN, qNaN, -inf, -normal, -denormal, -0, +0, +denormal, +normal, +inf x is, tested against mask."""
  x = np.asarray(x)
  info = np.finfo(x.dtype)
  bits = x.view(UINT[x.dtype.itemsize * 8]).astype(np.uint64)
  quiet = (bits >> np.uint64(info.nmant - 1)) & np.uint64(1)
  neg, ax = np.signbit(x), np.abs(x)
  kinds = [np.isnan(x) & (quiet == 0), np.isnan(x) & (quiet == 1), np.isinf(x) & neg, neg & (ax >= info.tiny) & np.isfinite(x),
           neg & (ax < info.tiny) & (ax > 0), neg & (ax == 0), ~neg & (ax == 0), ~neg & (ax < info.tiny) & (ax > 0),
           ~neg & (ax >= info.tiny) & np.isfinite(x), np.isinf(x) & ~neg]
  m = np.asarray(mask, np.uint32)
  return np.logical_or.reduce([k & ((m >> i) & 1).astype(bool) for i, k in enumerate(kinds)])
def _med3(a, b, c): return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))
def _trig(f, x, t): return f(_f64(x) * 2 * np.pi).astype(NP[t])

OPS: dict[str, tuple] = {}
def op(names: str, dst: str, srcs: str, fn):
  for n in names.split(): OPS[n] = (dst, tuple(srcs.split()), fn)

# moves and conversions
op("v_mov_b32 v_dual_mov_b32", "b32", "b32", lambda a: a)
op("v_mov_b16", "b16", "b16", lambda a: a)
op("v_not_b32", "b32", "b32", lambda a: ~a)
op("v_bfrev_b32", "b32", "b32", lambda a: np.array([int(f"{int(v):032b}"[::-1], 2) for v in np.broadcast_to(a, (32,))], np.uint32))
op("v_cvt_f32_f16", "f32", "f16", lambda a: a.astype(np.float32))
op("v_cvt_f16_f32", "f16", "f32", lambda a: a.astype(np.float16))
op("v_cvt_f32_f64", "f32", "f64", lambda a: a.astype(np.float32))
op("v_cvt_f64_f32", "f64", "f32", lambda a: a.astype(np.float64))
op("v_cvt_f32_i32", "f32", "i32", lambda a: a.astype(np.float32))
op("v_cvt_f32_u32", "f32", "u32", lambda a: a.astype(np.float32))
op("v_cvt_f64_i32", "f64", "i32", lambda a: a.astype(np.float64))
op("v_cvt_f64_u32", "f64", "u32", lambda a: a.astype(np.float64))
op("v_cvt_i32_f32", "i32", "f32", lambda a: _cvt_int(a, -2**31, 2**31 - 1, np.int32))
op("v_cvt_u32_f32", "u32", "f32", lambda a: _cvt_int(a, 0, 2**32 - 1, np.uint32))
op("v_cvt_i32_f64", "i32", "f64", lambda a: _cvt_int(a, -2**31, 2**31 - 1, np.int32))
op("v_cvt_u32_f64", "u32", "f64", lambda a: _cvt_int(a, 0, 2**32 - 1, np.uint32))
op("v_cvt_f16_i16", "f16", "i16", lambda a: a.astype(np.float16))
op("v_cvt_f16_u16", "f16", "u16", lambda a: a.astype(np.float16))
op("v_cvt_i16_f16", "i16", "f16", lambda a: _cvt_int(a, -2**15, 2**15 - 1, np.int16))
op("v_cvt_u16_f16", "u16", "f16", lambda a: _cvt_int(a, 0, 2**16 - 1, np.uint16))
op("v_cvt_i32_i16", "i32", "i16", lambda a: a.astype(np.int32))
op("v_cvt_u32_u16", "u32", "u16", lambda a: a.astype(np.uint32))
for _k in range(4): op(f"v_cvt_f32_ubyte{_k}", "f32", "u32", lambda a, k=_k: ((a >> (8 * k)) & 0xFF).astype(np.float32))
op("v_cvt_floor_i32_f32", "i32", "f32", lambda a: _cvt_int(np.floor(a), -2**31, 2**31 - 1, np.int32))
op("v_cvt_nearest_i32_f32", "i32", "f32", lambda a: _cvt_int(np.floor(_f64(a) + 0.5), -2**31, 2**31 - 1, np.int32))
# transcendentals and rounding
for _t in ("f32", "f16", "f64"):
  op(f"v_rcp_{_t} v_rcp_iflag_{_t}", _t, _t, lambda a, t=_t: (1 / _f64(a)).astype(NP[t]))
  op(f"v_rsq_{_t}", _t, _t, lambda a, t=_t: (1 / np.sqrt(_f64(a))).astype(NP[t]))
  op(f"v_sqrt_{_t}", _t, _t, lambda a, t=_t: np.sqrt(_f64(a)).astype(NP[t]))
  op(f"v_floor_{_t}", _t, _t, np.floor)
  op(f"v_ceil_{_t}", _t, _t, np.ceil)
  op(f"v_trunc_{_t}", _t, _t, np.trunc)
  op(f"v_rndne_{_t}", _t, _t, np.rint)
  op(f"v_fract_{_t}", _t, _t,
     lambda a, t=_t: np.where(np.isinf(a), np.nan, np.minimum(a - np.floor(a), np.nextafter(NP[t](1), NP[t](0)))).astype(NP[t]))
  op(f"v_ldexp_{_t}", _t, f"{_t} i32", lambda a, b, t=_t: np.ldexp(_f64(a), np.clip(b, -2000, 2000)).astype(NP[t]))
  op(f"v_frexp_mant_{_t}", _t, _t, lambda a: np.where(np.isfinite(a), np.frexp(a)[0], a).astype(a.dtype))
  op(f"v_frexp_exp_i32_{_t}", "i32", _t, lambda a: np.where(np.isfinite(a), np.frexp(a)[1], 0).astype(np.int32))
for _t in ("f32", "f16"):
  op(f"v_exp_{_t}", _t, _t, lambda a, t=_t: np.exp2(_f64(a)).astype(NP[t]))
  op(f"v_log_{_t}", _t, _t, lambda a, t=_t: np.log2(_f64(a)).astype(NP[t]))
  op(f"v_sin_{_t}", _t, _t, lambda a, t=_t: _trig(np.sin, a, t))
  op(f"v_cos_{_t}", _t, _t, lambda a, t=_t: _trig(np.cos, a, t))
op("v_frexp_exp_i16_f16", "i16", "f16", lambda a: np.where(np.isfinite(a), np.frexp(a)[1], 0).astype(np.int16))
# float arithmetic (f32, f16, f64); RDNA4 names its IEEE min/max *_num_*
for _t in ("f32", "f16", "f64"):
  op(f"v_add_{_t} v_dual_add_{_t}", _t, f"{_t} {_t}", lambda a, b: a + b)
  op(f"v_sub_{_t} v_dual_sub_{_t}", _t, f"{_t} {_t}", lambda a, b: a - b)
  op(f"v_subrev_{_t} v_dual_subrev_{_t}", _t, f"{_t} {_t}", lambda a, b: b - a)
  op(f"v_mul_{_t} v_dual_mul_{_t}", _t, f"{_t} {_t}", lambda a, b: a * b)
  op(f"v_max_{_t} v_max_num_{_t} v_dual_max_{_t} v_dual_max_num_{_t}", _t, f"{_t} {_t}", np.fmax)
  op(f"v_min_{_t} v_min_num_{_t} v_dual_min_{_t} v_dual_min_num_{_t}", _t, f"{_t} {_t}", np.fmin)
  op(f"v_maximum_{_t}", _t, f"{_t} {_t}", np.maximum)
  op(f"v_minimum_{_t}", _t, f"{_t} {_t}", np.minimum)
  op(f"v_fma_{_t} v_fmac_{_t} v_dual_fmac_{_t} v_fmaak_{_t} v_dual_fmaak_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c, t=_t: _fma(a, b, c, t))
  op(f"v_fmamk_{_t} v_dual_fmamk_{_t}", _t, f"{_t} {_t} {_t}", lambda a, k, c, t=_t: _fma(a, k, c, t))   # D = S0 * K + S1, K is the literal
  op(f"v_max3_{_t} v_max3_num_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c: np.fmax(np.fmax(a, b), c))
  op(f"v_min3_{_t} v_min3_num_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c: np.fmin(np.fmin(a, b), c))
  op(f"v_med3_{_t} v_med3_num_{_t}", _t, f"{_t} {_t} {_t}", _med3)
  op(f"v_maxmin_{_t} v_maxmin_num_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c: np.fmin(np.fmax(a, b), c))
  op(f"v_minmax_{_t} v_minmax_num_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c: np.fmax(np.fmin(a, b), c))
op("v_mul_legacy_f32 v_mul_dx9_zero_f32 v_dual_mul_dx9_zero_f32", "f32", "f32 f32", lambda a, b: np.where((a == 0) | (b == 0), np.float32(0), a * b))
op("v_dot2acc_f32_f16 v_dual_dot2acc_f32_f16", "f32", "b32 b32 f32",
   lambda a, b, c: (_f64(typed(a & 0xFFFF, "f16")) * typed(b & 0xFFFF, "f16") + _f64(typed(a >> 16, "f16")) * typed(b >> 16, "f16")
                    + c).astype(np.float32))
op("v_cvt_pk_rtz_f16_f32", "b32", "f32 f32",
   lambda a, b: raw(_rtz16(a), "f16").astype(np.uint32) | raw(_rtz16(b), "f16").astype(np.uint32) << 16)
op("v_pack_b32_f16", "b32", "b16 b16", lambda a, b: a.astype(np.uint32) | b.astype(np.uint32) << 16)
# integer arithmetic
op("v_add_nc_u32 v_add_u32 v_dual_add_nc_u32", "u32", "u32 u32", lambda a, b: a + b)
op("v_sub_nc_u32 v_sub_u32", "u32", "u32 u32", lambda a, b: a - b)
op("v_subrev_nc_u32", "u32", "u32 u32", lambda a, b: b - a)
op("v_add_nc_i32", "i32", "i32 i32", lambda a, b: a + b)
op("v_sub_nc_i32", "i32", "i32 i32", lambda a, b: a - b)
op("v_add_nc_u16 v_add_u16", "u16", "u16 u16", lambda a, b: a + b)
op("v_sub_nc_u16 v_sub_u16", "u16", "u16 u16", lambda a, b: a - b)
op("v_mul_lo_u16", "u16", "u16 u16", lambda a, b: a * b)
op("v_mul_lo_u32", "u32", "u32 u32", lambda a, b: a * b)
op("v_mul_hi_u32", "u32", "u32 u32", lambda a, b: ((_u64(a) * _u64(b)) >> np.uint64(32)).astype(np.uint32))
op("v_mul_hi_i32", "i32", "i32 i32", lambda a, b: ((np.asarray(a, np.int64) * np.asarray(b, np.int64)) >> 32).astype(np.int32))
op("v_mul_u32_u24", "u32", "u32 u32", lambda a, b: (a & 0xFFFFFF) * (b & 0xFFFFFF))
op("v_mul_i32_i24", "i32", "i32 i32", lambda a, b: ((a << 8) >> 8) * ((b << 8) >> 8))
op("v_mul_hi_u32_u24", "u32", "u32 u32", lambda a, b: ((_u64(a & 0xFFFFFF) * _u64(b & 0xFFFFFF)) >> np.uint64(32)).astype(np.uint32))
op("v_mad_u32_u24", "u32", "u32 u32 u32", lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c)
op("v_mad_i32_i24", "i32", "i32 i32 i32", lambda a, b, c: ((a << 8) >> 8) * ((b << 8) >> 8) + c)
op("v_mad_u16", "u16", "u16 u16 u16", lambda a, b, c: a * b + c)
op("v_mad_i16", "i16", "i16 i16 i16", lambda a, b, c: a * b + c)
op("v_mad_u32_u16", "u32", "u16 u16 u32", lambda a, b, c: a.astype(np.uint32) * b + c)
op("v_mad_i32_i16", "i32", "i16 i16 i32", lambda a, b, c: a.astype(np.int32) * b + c)
op("v_add3_u32", "u32", "u32 u32 u32", lambda a, b, c: a + b + c)
op("v_lshl_add_u32", "u32", "u32 u32 u32", lambda a, b, c: (a << (b & 31)) + c)
op("v_add_lshl_u32", "u32", "u32 u32 u32", lambda a, b, c: (a + b) << (c & 31))
op("v_lshl_or_b32", "b32", "b32 b32 b32", lambda a, b, c: (a << (b & 31)) | c)
op("v_and_or_b32", "b32", "b32 b32 b32", lambda a, b, c: (a & b) | c)
op("v_or3_b32", "b32", "b32 b32 b32", lambda a, b, c: a | b | c)
op("v_xor3_b32", "b32", "b32 b32 b32", lambda a, b, c: a ^ b ^ c)
op("v_xad_u32", "u32", "u32 u32 u32", lambda a, b, c: (a ^ b) + c)
op("v_max_i32", "i32", "i32 i32", np.maximum)
op("v_min_i32", "i32", "i32 i32", np.minimum)
op("v_max_u32", "u32", "u32 u32", np.maximum)
op("v_min_u32", "u32", "u32 u32", np.minimum)
op("v_max_i16", "i16", "i16 i16", np.maximum)
op("v_min_i16", "i16", "i16 i16", np.minimum)
op("v_max_u16", "u16", "u16 u16", np.maximum)
op("v_min_u16", "u16", "u16 u16", np.minimum)
for _t in ("i32", "u32", "i16", "u16"):
  op(f"v_max3_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c: np.maximum(np.maximum(a, b), c))
  op(f"v_min3_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c: np.minimum(np.minimum(a, b), c))
  op(f"v_med3_{_t}", _t, f"{_t} {_t} {_t}", _med3)
for _t in ("i32", "u32"):
  op(f"v_maxmin_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c: np.minimum(np.maximum(a, b), c))
  op(f"v_minmax_{_t}", _t, f"{_t} {_t} {_t}", lambda a, b, c: np.maximum(np.minimum(a, b), c))
op("v_and_b32 v_dual_and_b32", "b32", "b32 b32", lambda a, b: a & b)
op("v_or_b32", "b32", "b32 b32", lambda a, b: a | b)
op("v_xor_b32", "b32", "b32 b32", lambda a, b: a ^ b)
op("v_xnor_b32", "b32", "b32 b32", lambda a, b: ~(a ^ b))
op("v_and_b16", "b16", "b16 b16", lambda a, b: a & b)
op("v_or_b16", "b16", "b16 b16", lambda a, b: a | b)
op("v_xor_b16", "b16", "b16 b16", lambda a, b: a ^ b)
op("v_not_b16", "b16", "b16", lambda a: ~a)
op("v_lshlrev_b32 v_dual_lshlrev_b32", "b32", "u32 b32", lambda a, b: b << (a & 31))
op("v_lshrrev_b32", "b32", "u32 b32", lambda a, b: b >> (a & 31))
op("v_ashrrev_i32", "i32", "u32 i32", lambda a, b: b >> (a & 31).astype(np.int32))
op("v_lshlrev_b16", "b16", "u16 b16", lambda a, b: b << (a & 15))
op("v_lshrrev_b16", "b16", "u16 b16", lambda a, b: b >> (a & 15))
op("v_ashrrev_i16", "i16", "u16 i16", lambda a, b: b >> (a & 15).astype(np.int16))
op("v_lshlrev_b64", "b64", "u32 b64", lambda a, b: b << _u64(a & 63))
op("v_lshrrev_b64", "b64", "u32 b64", lambda a, b: b >> _u64(a & 63))
op("v_ashrrev_i64", "i64", "u32 i64", lambda a, b: b >> (a & 63).astype(np.int64))
op("v_lshl_add_u64", "u64", "u64 u32 u64", lambda a, b, c: (a << _u64(b & 7)) + c)
op("v_add_nc_u64", "u64", "u64 u64", lambda a, b: a + b)
op("v_sub_nc_u64", "u64", "u64 u64", lambda a, b: a - b)
op("v_mul_u64", "u64", "u64 u64", lambda a, b: a * b)
op("v_bfe_u32", "u32", "u32 u32 u32", lambda a, b, c: _bfe(a, b, c, False))
op("v_bfe_i32", "u32", "u32 u32 u32", lambda a, b, c: _bfe(a, b, c, True))
op("v_bfi_b32", "b32", "b32 b32 b32", lambda a, b, c: (a & b) | (~a & c))
op("v_bfm_b32", "b32", "u32 u32", lambda a, b: (((np.uint64(1) << _u64(a & 31)) - np.uint64(1)) << _u64(b & 31)).astype(np.uint32))
op("v_alignbit_b32", "b32", "b32 b32 u32", lambda a, b, c: (((_u64(a) << np.uint64(32)) | _u64(b)) >> _u64(c & 31)).astype(np.uint32))
op("v_alignbyte_b32", "b32", "b32 b32 u32", lambda a, b, c: (((_u64(a) << np.uint64(32)) | _u64(b)) >> _u64((c & 3) * 8)).astype(np.uint32))
def _clz(a):
  a = np.asarray(a, np.uint32)
  return np.where(a == 0, np.uint32(0xFFFFFFFF), (31 - np.floor(np.log2(np.maximum(a, 1).astype(np.float64)))).astype(np.uint32))
def _ctz(a):
  a = np.asarray(a, np.uint32)
  low = a & (~a + np.uint32(1))
  return np.where(a == 0, np.uint32(0xFFFFFFFF), np.log2(np.maximum(low, 1).astype(np.float64)).astype(np.uint32))
def _cls(a):
  """Leading bits equal to the sign, not counting it (-1 where every bit is the sign)."""
  a = np.asarray(a, np.uint32)
  flipped = np.where(a >> 31 == 1, ~a, a)
  c = _clz(flipped)
  return np.where(c == 0xFFFFFFFF, np.uint32(0xFFFFFFFF), c)
op("v_clz_i32_u32 v_ffbh_u32", "u32", "u32", _clz)
op("v_ctz_i32_b32 v_ffbl_b32", "u32", "u32", _ctz)
op("v_cls_i32 v_ffbh_i32", "u32", "u32", _cls)
op("v_bcnt_u32_b32", "u32", "b32 u32", lambda a, b: np.array([bin(int(x)).count("1") for x in np.broadcast_to(a, (32,))], np.uint32) + b)
op("v_perm_b32", "b32", "b32 b32 b32", lambda a, b, c: _perm(a, b, c))
op("v_sad_u32", "u32", "u32 u32 u32", lambda a, b, c: np.where(a > b, a - b, b - a) + c)
op("v_cvt_pk_u8_f32", "b32", "f32 u32 b32",
   lambda a, b, c: (c & ~(np.uint32(0xFF) << (b & 3) * 8)) | _cvt_int(np.rint(a), 0, 255, np.uint32) << (b & 3) * 8)

def _rtz16(x):
  """float32 -> float16 rounding toward zero."""
  h = np.asarray(x, np.float32).astype(np.float16)
  over = np.abs(h.astype(np.float32)) > np.abs(np.asarray(x, np.float32))
  return np.where(over & np.isfinite(x), np.nextafter(h, np.float16(0)), h)

def _perm(a, b, sel):
  """v_perm_b32: each byte of sel picks a byte of {a, b} (b is bytes 0-3), or 0x00/0xFF for the special selectors."""
  src = (_u64(a) << np.uint64(32)) | _u64(b)
  out = np.zeros(np.broadcast(a, b, sel).shape, np.uint32)
  for k in range(4):
    s = (np.asarray(sel, np.uint32) >> (8 * k)) & 0xFF
    byte = ((src >> _u64((s & 7) * 8)) & np.uint64(0xFF)).astype(np.uint32)
    byte = np.where(s == 12, 0, np.where(s > 12, 0xFF, byte))
    out |= byte.astype(np.uint32) << (8 * k)
  return out

# ---- comparisons: v_cmp[x]_<cond>_<type> -> lane booleans
_FCMP = {"f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "lt": np.less, "eq": np.equal, "le": np.less_equal,
         "gt": np.greater, "lg": lambda a, b: (a < b) | (a > b), "ge": np.greater_equal, "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b),
         "u": lambda a, b: np.isnan(a) | np.isnan(b), "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)),
         "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
         "tru": lambda a, b: np.ones(np.broadcast(a, b).shape, bool), "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool)}
_ICMP = {"f": _FCMP["f"], "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ne": np.not_equal,
         "lg": np.not_equal, "ge": np.greater_equal, "t": _FCMP["t"]}
_CMP = re.compile(r"v_cmpx?_(\w+?)_([fiub](?:16|32|64))$")

def compare(name: str):
  """(source type, fn(a, b) -> bool lanes, writes exec) for a VOPC mnemonic, or None."""
  m = _CMP.match(name)
  if m is None: return None
  cond, t = m.groups()
  if cond == "class": return t, _class, name.startswith("v_cmpx")
  table = _FCMP if t[0] == "f" else _ICMP
  if cond not in table: return None
  if t[0] == "b": t = "u" + t[1:]
  return t, table[cond], name.startswith("v_cmpx")
