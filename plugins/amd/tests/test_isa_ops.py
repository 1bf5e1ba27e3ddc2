"""Single instructions on the emulator: assembled with llvm-mc-19 (skips without it), run on one wave with chosen
register contents, compared with numpy. Covers semantics the compiled kernels reach only on some inputs: NaN and
saturation rules, carries across lanes, exec masking, true16 halves, VOPD read-before-write, scalar carries/exec ops,
mixed-precision FMA, and the RDNA4 scalar float units."""
import re
import shutil
import subprocess
import numpy as np
import pytest
from tinycore_amd.isa.dispatch import DispatchStats
from tinycore_amd.isa.wave import Wave, VCC, EXEC

MC = shutil.which("llvm-mc-19")
pytestmark = pytest.mark.skipif(MC is None, reason="no llvm-mc-19 (apt-get install llvm-19)")
rng = np.random.default_rng(11)

def assemble(asm: str, arch: str, attrs: str = "") -> bytes:
  r = subprocess.run([MC, "-arch=amdgcn", f"-mcpu={arch}", *([f"-mattr={attrs}"] if attrs else []), "-show-encoding"],
                     input=asm + "\ns_endpgm\n", capture_output=True, text=True)
  assert r.returncode == 0 and "error" not in r.stderr, r.stderr
  return bytes(int(b, 16) for enc in re.findall(r"encoding: \[([^\]]*)\]", r.stdout) for b in enc.split(","))

class _Group:
  def __init__(self, code: bytes, arch: str):
    self.code, self.arch, self.mem, self.lds = code, arch, None, np.zeros(0, np.uint8)

def run(asm: str, arch: str = "gfx1100", v: dict | None = None, s: dict | None = None, exec_mask: int = 0xFFFFFFFF, attrs: str = "") -> Wave:
  w = Wave(_Group(assemble(asm, arch, attrs), arch), 0, 16, DispatchStats())
  w.s[EXEC] = exec_mask
  for r, x in (v or {}).items(): w.v[r] = np.asarray(x).view(np.uint32) if np.asarray(x).dtype.itemsize == 4 else np.asarray(x, np.uint32)
  for r, x in (s or {}).items(): w.s[r] = int(x) & 0xFFFFFFFF
  w.run({}, 10_000)
  assert w.done
  return w

def f32(w: Wave, r: int) -> np.ndarray: return w.v[r].view(np.float32)
def ulps(got, want) -> float:
  want = np.asarray(want, np.float32)
  return float(np.max(np.abs(got.astype(np.float64) - want) / np.spacing(np.maximum(np.abs(want), np.finfo(np.float32).tiny))))

def test_float_arithmetic_and_nan_rules():
  a, b, c = (rng.uniform(-4, 4, 32).astype(np.float32) for _ in range(3))
  a[0], b[1] = np.nan, np.nan
  w = run("v_add_f32 v4, v1, v2\nv_mul_f32 v5, v1, v2\nv_fma_f32 v6, v1, v2, v3\nv_max_f32 v7, v1, v2\nv_min_f32 v8, v1, v2",
          v={1: a, 2: b, 3: c})
  with np.errstate(invalid="ignore"):
    np.testing.assert_array_equal(f32(w, 4), a + b)
    np.testing.assert_array_equal(f32(w, 5), a * b)
    np.testing.assert_array_equal(f32(w, 6), (a.astype(np.float64) * b + c).astype(np.float32))   # fused: one rounding
  np.testing.assert_array_equal(f32(w, 7), np.fmax(a, b))   # IEEE maxNum: a NaN operand loses
  np.testing.assert_array_equal(f32(w, 8), np.fmin(a, b))

def test_transcendentals_within_one_ulp():
  x = rng.uniform(0.01, 20, 32).astype(np.float32)
  t = rng.uniform(-1, 1, 32).astype(np.float32)
  w = run("v_exp_f32 v4, v2\nv_log_f32 v5, v1\nv_rcp_f32 v6, v1\nv_sqrt_f32 v7, v1\nv_rsq_f32 v8, v1\nv_sin_f32 v9, v2\nv_cos_f32 v10, v2",
          v={1: x, 2: t})
  assert ulps(f32(w, 4), np.exp2(t.astype(np.float64))) <= 1
  assert ulps(f32(w, 5), np.log2(x.astype(np.float64))) <= 1
  assert ulps(f32(w, 6), 1 / x.astype(np.float64)) <= 1
  assert ulps(f32(w, 7), np.sqrt(x.astype(np.float64))) <= 1
  assert ulps(f32(w, 8), 1 / np.sqrt(x.astype(np.float64))) <= 1
  np.testing.assert_allclose(f32(w, 9), np.sin(2 * np.pi * t.astype(np.float64)), atol=2e-7)   # the argument is in revolutions
  np.testing.assert_allclose(f32(w, 10), np.cos(2 * np.pi * t.astype(np.float64)), atol=2e-7)

def test_integer_ops():
  a = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
  b = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
  a[:4] = [0, 0xFFFFFFFF, 0x40000000, 0xFFFF0000]
  w = run("v_mul_hi_u32 v4, v1, v2\nv_mul_lo_u32 v5, v1, v2\nv_mul_hi_i32 v6, v1, v2\nv_cls_i32 v7, v1\nv_clz_i32_u32 v8, v1\n"
          "v_bfe_i32 v9, v1, 4, 7\nv_add3_u32 v10, v1, v2, 5\nv_lshl_or_b32 v11, v1, 3, v2", v={1: a, 2: b})
  A, B = a.astype(np.uint64), b.astype(np.uint64)
  np.testing.assert_array_equal(w.v[4], ((A * B) >> np.uint64(32)).astype(np.uint32))
  np.testing.assert_array_equal(w.v[5], (A * B).astype(np.uint32))
  np.testing.assert_array_equal(w.v[6].view(np.int32), ((a.view(np.int32).astype(np.int64) * b.view(np.int32)) >> 32).astype(np.int32))
  assert list(w.v[7][:4].view(np.int32)) == [-1, -1, 1, 16]   # leading sign bits, -1 when all bits are the sign
  assert w.v[8][0] == 0xFFFFFFFF and w.v[8][2] == 1
  np.testing.assert_array_equal(w.v[9].view(np.int32), ((a >> 4) & 0x7F).astype(np.int32) - (((a >> 10) & 1) << 7).astype(np.int32))
  np.testing.assert_array_equal(w.v[10], a + b + np.uint32(5))
  np.testing.assert_array_equal(w.v[11], (a << np.uint32(3)) | b)

def test_conversions_saturate():
  x = np.array([np.nan, -np.inf, np.inf, -1.5, 2.5, 3e9, -3e9, 7.99] * 4, np.float32)
  w = run("v_cvt_u32_f32 v4, v1\nv_cvt_i32_f32 v5, v1\nv_cvt_f16_f32 v6, v1", v={1: x})
  assert list(w.v[4][:8]) == [0, 0, 0xFFFFFFFF, 0, 2, 3000000000, 0, 7]
  assert list(w.v[5][:8].view(np.int32)) == [0, -2**31, 2**31 - 1, -1, 2, 2**31 - 1, -2**31, 7]
  with np.errstate(over="ignore"): want = x[3:].astype(np.float16)   # +-3e9 -> +-inf
  np.testing.assert_array_equal((w.v[6] & 0xFFFF).astype(np.uint16).view(np.float16)[3:], want)

def test_64bit_add_carries_across_lanes():
  a = rng.integers(0, 2**64, 32, dtype=np.uint64)
  b = rng.integers(0, 2**64, 32, dtype=np.uint64)
  lo = lambda x: (x & np.uint64(0xFFFFFFFF)).astype(np.uint32)  # noqa: E731
  hi = lambda x: (x >> np.uint64(32)).astype(np.uint32)  # noqa: E731
  w = run("v_add_co_u32 v5, vcc_lo, v1, v3\nv_add_co_ci_u32_e32 v6, vcc_lo, v2, v4, vcc_lo", v={1: lo(a), 2: hi(a), 3: lo(b), 4: hi(b)})
  np.testing.assert_array_equal(w.v[5].astype(np.uint64) | (w.v[6].astype(np.uint64) << np.uint64(32)), a + b)
  assert w.s[VCC] == int(np.packbits(((hi(a).astype(np.uint64) + hi(b) + ((lo(a).astype(np.uint64) + lo(b)) >> np.uint64(32))) >> np.uint64(32)) == 1,
                                     bitorder="little").view(np.uint32)[0])

def test_exec_mask_limits_writes():
  w = run("v_mov_b32 v1, 7", v={1: np.full(32, 3, np.uint32)}, exec_mask=0x0000F00F)
  assert list(w.v[1]) == [7 if (0xF00F >> l) & 1 else 3 for l in range(32)]

def test_compare_and_saveexec_branching():
  x = rng.uniform(-1, 1, 32).astype(np.float32)
  w = run("v_cmp_gt_f32 vcc_lo, 0, v1\ns_and_saveexec_b32 s4, vcc_lo\nv_mov_b32 v2, 1.0\ns_or_b32 exec_lo, exec_lo, s4",
          v={1: x, 2: np.zeros(32, np.float32)})
  np.testing.assert_array_equal(f32(w, 2), np.where(0 > x, 1.0, 0.0).astype(np.float32))
  assert w.s[EXEC] == 0xFFFFFFFF and w.s[4] == 0xFFFFFFFF

def test_true16_halves():
  h = rng.uniform(-2, 2, 64).astype(np.float16)
  packed = h.view(np.uint32)   # lane l: low half h[2l], high half h[2l+1]
  w = run("v_add_f16 v3.h, v1.l, v2.h", v={1: packed, 2: packed, 3: np.full(32, 0x1234, np.uint32)}, attrs="+real-true16")
  np.testing.assert_array_equal((w.v[3] >> 16).astype(np.uint16).view(np.float16), h[0::2] + h[1::2])
  assert (w.v[3] & 0xFFFF == 0x1234).all()   # the low half is kept

def test_vopd_reads_before_writes():
  a, b = np.arange(32, dtype=np.uint32), np.arange(100, 132, dtype=np.uint32)
  w = run("v_dual_mov_b32 v1, v2 :: v_dual_mov_b32 v2, v1", v={1: a, 2: b})
  np.testing.assert_array_equal(w.v[1], b)
  np.testing.assert_array_equal(w.v[2], a)

def test_scalar_carry_chain_and_bits():
  w = run("s_add_u32 s4, s0, s2\ns_addc_u32 s5, s1, s3\ns_bitset1_b32 s6, 22\ns_cmp_lt_i32 s7, 0\ns_cselect_b32 s8, 11, 22",
          s={0: 0xFFFFFFFF, 1: 1, 2: 2, 3: 3, 6: 0, 7: 0xFFFFFFFF})
  assert (w.s[4], w.s[5]) == (1, 5)   # 0x1_FFFFFFFF + 0x3_00000002
  assert w.s[6] == 1 << 22 and w.s[8] == 11

def test_scalar_loop():
  w = run("s_mov_b32 s1, 0\ns_add_u32 s1, s1, 3\ns_sub_u32 s0, s0, 1\ns_cmp_lg_u32 s0, 0\ns_cbranch_scc1 -4", s={0: 10})   # back 3 instructions
  assert w.s[1] == 30 and w.stats.instructions == 1 + 10 * 4 + 1

def test_fma_mix_f32():
  h = rng.uniform(-2, 2, 64).astype(np.float16)
  c = rng.uniform(-2, 2, 32).astype(np.float32)
  w = run("v_fma_mix_f32 v4, v1, v2, v3 op_sel:[1,0,0] op_sel_hi:[1,1,0]", v={1: h.view(np.uint32), 2: h.view(np.uint32), 3: c})
  want = h[1::2].astype(np.float64) * h[0::2] + c   # src0 high half, src1 low half, src2 float32
  np.testing.assert_array_equal(f32(w, 4), want.astype(np.float32))

def test_rdna4_scalar_float():
  w = run("s_fmac_f32 s1, s2, s3\nv_s_exp_f32 s4, s5\ns_cmp_lt_f32 s2, s3", "gfx1201",
          s={1: np.float32(0.5).view(np.uint32), 2: np.float32(1.5).view(np.uint32), 3: np.float32(-2.0).view(np.uint32),
             5: np.float32(3.25).view(np.uint32)})
  assert np.uint32(w.s[1]).view(np.float32) == np.float32(1.5 * -2.0 + 0.5)
  assert ulps(np.array([np.uint32(w.s[4]).view(np.float32)]), np.exp2(3.25)) <= 1
  assert w.scc == 0
