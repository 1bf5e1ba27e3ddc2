"""What each scalar ALU operation (SOP1/SOP2/SOPK/SOPC) computes, on Python ints.

SOP2[name] = (bits, fn(a, b, scc) -> (result, new scc or None)); SOP1 likewise with one source; SOPC[name] = (bits,
fn(a, b) -> bool). Sources arrive as unsigned ints of `bits` width; results are masked to it by the wave. The exec-mask
forms of SOP1 (s_and_saveexec_b32, ...) need the wave's exec and are in wave.py."""
from __future__ import annotations
import numpy as np

M32, M64 = (1 << 32) - 1, (1 << 64) - 1
def s32(x: int) -> int: return x - (1 << 32) if x >> 31 & 1 else x
def s64(x: int) -> int: return x - (1 << 64) if x >> 63 & 1 else x
def _sext(x: int, bits: int) -> int: return x - (1 << bits) if x >> (bits - 1) & 1 else x

def _bfe(a: int, b: int, bits: int, signed: bool) -> int:
  off, width = b & (bits - 1), (b >> 16) & 0x7F
  v = (a >> off) & ((1 << width) - 1) if width else 0
  return (_sext(v, width) if signed and width else v) & (M32 if bits == 32 else M64)

SOP2: dict[str, tuple] = {}
def _logic(name: str, f):
  for bits in (32, 64):
    m = M32 if bits == 32 else M64
    SOP2[f"{name}_b{bits}"] = (bits, lambda a, b, scc, f=f, m=m: (r := f(a, b) & m, int(r != 0)))
_logic("s_and", lambda a, b: a & b)
_logic("s_or", lambda a, b: a | b)
_logic("s_xor", lambda a, b: a ^ b)
_logic("s_nand", lambda a, b: ~(a & b))
_logic("s_nor", lambda a, b: ~(a | b))
_logic("s_xnor", lambda a, b: ~(a ^ b))
_logic("s_and_not1", lambda a, b: a & ~b)
_logic("s_or_not1", lambda a, b: a | ~b)
_logic("s_andn2", lambda a, b: a & ~b)
_logic("s_orn2", lambda a, b: a | ~b)
SOP2.update({
  "s_add_u32": (32, lambda a, b, scc: ((a + b) & M32, int(a + b > M32))),
  "s_sub_u32": (32, lambda a, b, scc: ((a - b) & M32, int(b > a))),
  "s_addc_u32": (32, lambda a, b, scc: ((a + b + scc) & M32, int(a + b + scc > M32))),
  "s_subb_u32": (32, lambda a, b, scc: ((a - b - scc) & M32, int(b + scc > a))),
  "s_add_i32": (32, lambda a, b, scc: ((a + b) & M32, int(not -2**31 <= s32(a) + s32(b) < 2**31))),
  "s_sub_i32": (32, lambda a, b, scc: ((a - b) & M32, int(not -2**31 <= s32(a) - s32(b) < 2**31))),
  "s_add_nc_u64": (64, lambda a, b, scc: ((a + b) & M64, None)),
  "s_sub_nc_u64": (64, lambda a, b, scc: ((a - b) & M64, None)),
  "s_mul_u64": (64, lambda a, b, scc: ((a * b) & M64, None)),
  "s_min_i32": (32, lambda a, b, scc: (a if s32(a) < s32(b) else b, int(s32(a) < s32(b)))),
  "s_min_u32": (32, lambda a, b, scc: (min(a, b), int(a < b))),
  "s_max_i32": (32, lambda a, b, scc: (a if s32(a) > s32(b) else b, int(s32(a) > s32(b)))),
  "s_max_u32": (32, lambda a, b, scc: (max(a, b), int(a > b))),
  "s_lshl_b32": (32, lambda a, b, scc: (r := (a << (b & 31)) & M32, int(r != 0))),
  "s_lshr_b32": (32, lambda a, b, scc: (r := a >> (b & 31), int(r != 0))),
  "s_ashr_i32": (32, lambda a, b, scc: (r := (s32(a) >> (b & 31)) & M32, int(r != 0))),
  "s_lshl_b64": (64, lambda a, b, scc: (r := (a << (b & 63)) & M64, int(r != 0))),
  "s_lshr_b64": (64, lambda a, b, scc: (r := a >> (b & 63), int(r != 0))),
  "s_ashr_i64": (64, lambda a, b, scc: (r := (s64(a) >> (b & 63)) & M64, int(r != 0))),
  "s_lshl1_add_u32": (32, lambda a, b, scc: ((r := (a << 1) + b) & M32, int(r > M32))),
  "s_lshl2_add_u32": (32, lambda a, b, scc: ((r := (a << 2) + b) & M32, int(r > M32))),
  "s_lshl3_add_u32": (32, lambda a, b, scc: ((r := (a << 3) + b) & M32, int(r > M32))),
  "s_lshl4_add_u32": (32, lambda a, b, scc: ((r := (a << 4) + b) & M32, int(r > M32))),
  "s_mul_i32": (32, lambda a, b, scc: ((s32(a) * s32(b)) & M32, None)),
  "s_mul_hi_u32": (32, lambda a, b, scc: ((a * b) >> 32, None)),
  "s_mul_hi_i32": (32, lambda a, b, scc: (((s32(a) * s32(b)) >> 32) & M32, None)),
  "s_cselect_b32": (32, lambda a, b, scc: (a if scc else b, None)),
  "s_cselect_b64": (64, lambda a, b, scc: (a if scc else b, None)),
  "s_bfe_u32": (32, lambda a, b, scc: (r := _bfe(a, b, 32, False), int(r != 0))),
  "s_bfe_i32": (32, lambda a, b, scc: (r := _bfe(a, b, 32, True), int(r != 0))),
  "s_bfe_u64": (64, lambda a, b, scc: (r := _bfe(a, b, 64, False), int(r != 0))),
  "s_bfe_i64": (64, lambda a, b, scc: (r := _bfe(a, b, 64, True), int(r != 0))),
  "s_bfm_b32": (32, lambda a, b, scc: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None)),
  "s_pack_ll_b32_b16": (32, lambda a, b, scc: ((a & 0xFFFF) | (b & 0xFFFF) << 16, None)),
  "s_pack_lh_b32_b16": (32, lambda a, b, scc: ((a & 0xFFFF) | (b & 0xFFFF0000), None)),
  "s_pack_hh_b32_b16": (32, lambda a, b, scc: (a >> 16 | (b & 0xFFFF0000), None)),
  "s_pack_hl_b32_b16": (32, lambda a, b, scc: (a >> 16 | (b & 0xFFFF) << 16, None)),
  "s_absdiff_i32": (32, lambda a, b, scc: (r := abs(s32(a) - s32(b)) & M32, int(r != 0))),
})
# RDNA4's scalar float ops (bits in SGPRs, IEEE float32/float16 arithmetic through numpy scalars)
def f32(x: int) -> np.float32: return np.array([x], np.uint32).view(np.float32)[0]
def bits32(f) -> int: return int(np.array([f], np.float32).view(np.uint32)[0])
_f32, _bits32 = f32, bits32
def _f16(x: int) -> np.float16: return np.array([x & 0xFFFF], np.uint16).view(np.float16)[0]
def _bits16(f) -> int: return int(np.array([f], np.float16).view(np.uint16)[0])
for _n, _fn in {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "min_num": np.fmin, "max_num": np.fmax,
                "min": np.fmin, "max": np.fmax}.items():
  SOP2[f"s_{_n}_f32"] = (32, lambda a, b, scc, fn=_fn: (_bits32(fn(_f32(a), _f32(b))), None))
  SOP2[f"s_{_n}_f16"] = (32, lambda a, b, scc, fn=_fn: (_bits16(fn(_f16(a), _f16(b))), None))
SOP2["s_cvt_pk_rtz_f16_f32"] = (32, lambda a, b, scc: (_bits16(_f32(a)) | _bits16(_f32(b)) << 16, None))
SOP2["s_add_co_u32"], SOP2["s_sub_co_u32"] = SOP2["s_add_u32"], SOP2["s_sub_u32"]          # RDNA4 names
SOP2["s_add_co_ci_u32"], SOP2["s_sub_co_ci_u32"] = SOP2["s_addc_u32"], SOP2["s_subb_u32"]
SOP2["s_add_co_i32"], SOP2["s_sub_co_i32"] = SOP2["s_add_i32"], SOP2["s_sub_i32"]

def _bits(v: int, n: int) -> str: return f"{v:0{n}b}"
SOP1: dict[str, tuple] = {
  "s_mov_b32": (32, lambda a, scc: (a, None)), "s_mov_b64": (64, lambda a, scc: (a, None)),
  "s_cmov_b32": (32, None), "s_cmov_b64": (64, None),   # conditional: handled by the wave
  "s_not_b32": (32, lambda a, scc: (r := ~a & M32, int(r != 0))), "s_not_b64": (64, lambda a, scc: (r := ~a & M64, int(r != 0))),
  "s_brev_b32": (32, lambda a, scc: (int(_bits(a, 32)[::-1], 2), None)),
  "s_bcnt1_i32_b32": (32, lambda a, scc: (r := bin(a).count("1"), int(r != 0))),
  "s_bcnt1_i32_b64": (64, lambda a, scc: (r := bin(a).count("1"), int(r != 0))),
  "s_ctz_i32_b32": (32, lambda a, scc: ((a & -a).bit_length() - 1 & M32 if a else M32, None)),
  "s_clz_i32_u32": (32, lambda a, scc: (32 - a.bit_length() if a else M32, None)),
  "s_ff1_i32_b32": (32, lambda a, scc: ((a & -a).bit_length() - 1 & M32 if a else M32, None)),
  "s_sext_i32_i8": (32, lambda a, scc: (_sext(a & 0xFF, 8) & M32, None)),
  "s_sext_i32_i16": (32, lambda a, scc: (_sext(a & 0xFFFF, 16) & M32, None)),
  "s_abs_i32": (32, lambda a, scc: (r := abs(s32(a)) & M32, int(r != 0))),
  "s_cls_i32": (32, lambda a, scc: (32 - (a if not a >> 31 else ~a & M32).bit_length() if a not in (0, M32) else M32, None)),
  "s_clz_i32_u64": (64, lambda a, scc: (64 - a.bit_length() if a else M32, None)),
  "s_ctz_i32_b64": (64, lambda a, scc: ((a & -a).bit_length() - 1 if a else M32, None)),
  "s_bcnt0_i32_b32": (32, lambda a, scc: (r := 32 - bin(a).count("1"), int(r != 0))),
}
def _cvt(x: float, lo: int, hi: int) -> int: return 0 if x != x else int(min(max(np.trunc(x), lo), hi))
SOP1.update({
  "s_cvt_f32_i32": (32, lambda a, scc: (_bits32(np.float32(s32(a))), None)), "s_cvt_f32_u32": (32, lambda a, scc: (_bits32(np.float32(a)), None)),
  "s_cvt_i32_f32": (32, lambda a, scc: (_cvt(float(_f32(a)), -2**31, 2**31 - 1) & M32, None)),
  "s_cvt_u32_f32": (32, lambda a, scc: (_cvt(float(_f32(a)), 0, M32), None)),
  "s_cvt_f16_f32": (32, lambda a, scc: (_bits16(_f32(a)), None)), "s_cvt_f32_f16": (32, lambda a, scc: (_bits32(_f16(a)), None)),
  "s_ceil_f32": (32, lambda a, scc: (_bits32(np.ceil(_f32(a))), None)), "s_floor_f32": (32, lambda a, scc: (_bits32(np.floor(_f32(a))), None)),
  "s_trunc_f32": (32, lambda a, scc: (_bits32(np.trunc(_f32(a))), None)), "s_rndne_f32": (32, lambda a, scc: (_bits32(np.rint(_f32(a))), None)),
})
SOPC: dict[str, tuple] = {}
for _sz in ("i32", "u32"):
  _cv = s32 if _sz == "i32" else (lambda x: x)
  for _c, _f in {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
                 "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}.items():
    SOPC[f"s_cmp_{_c}_{_sz}"] = (32, lambda a, b, f=_f, cv=_cv: f(cv(a), cv(b)))
    SOPC[f"s_cmpk_{_c}_{_sz}"] = SOPC[f"s_cmp_{_c}_{_sz}"]
_FCMP = {"lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
         "lg": lambda a, b: a < b or a > b, "ge": lambda a, b: a >= b, "o": lambda a, b: a == a and b == b, "u": lambda a, b: a != a or b != b,
         "nge": lambda a, b: not a >= b, "nlg": lambda a, b: not (a < b or a > b), "ngt": lambda a, b: not a > b,
         "nle": lambda a, b: not a <= b, "neq": lambda a, b: not a == b, "nlt": lambda a, b: not a < b}
for _c, _f in _FCMP.items():
  SOPC[f"s_cmp_{_c}_f32"] = (32, lambda a, b, f=_f: f(float(_f32(a)), float(_f32(b))))
  SOPC[f"s_cmp_{_c}_f16"] = (32, lambda a, b, f=_f: f(float(_f16(a)), float(_f16(b))))
SOPC["s_cmp_eq_u64"] = (64, lambda a, b: a == b)
SOPC["s_cmp_lg_u64"] = (64, lambda a, b: a != b)
SOPC["s_bitcmp0_b32"] = (32, lambda a, b: not a >> (b & 31) & 1)
SOPC["s_bitcmp1_b32"] = (32, lambda a, b: bool(a >> (b & 31) & 1))
