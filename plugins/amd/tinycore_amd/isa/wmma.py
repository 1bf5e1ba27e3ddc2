"""v_wmma_* 16x16x16: which lane and register hold which matrix element, for RDNA3 and RDNA4 (wave32).

Written from AMD's ISA guides, independently of the tables codegen uses (tensor_cores.py), so that a layout mistake in
either shows up as a wrong result rather than two agreeing copies:
- RDNA3 (gfx11): A and B are replicated in both half-waves: lane l holds row l%16 of A (k = 0..15, two halves per VGPR,
  low half first) and column l%16 of B. A 32-bit D/C element v of lane l is D[2v + l//16][l%16]; a 16-bit D lives in
  the low (op_sel[2]=0) or high half of each of the 8 VGPRs.
- RDNA4 (gfx12): no replication: lane l holds k = 8*(l//16) .. +8 of row/column l%16 (4 VGPRs); D element v of lane l
  is D[v + 8*(l//16)][l%16], 16-bit D packed two per VGPR."""
from __future__ import annotations
import numpy as np
from tinycore_amd.isa.valu import typed, raw

L = np.arange(32)

def _halves(wave, base: int, nregs: int, code: int) -> np.ndarray:
  """[32 lanes, 2*nregs] 16-bit raw values from VGPRs base.. (sources must be VGPRs)."""
  if code < 256:
    raise NotImplementedError(f"pc 0x{wave.pc:x}: WMMA with a scalar/constant matrix operand is not emulated")
  regs = np.stack([wave.vreg(base + k) for k in range(nregs)], 1)   # [32, nregs] uint32
  return np.stack([regs & 0xFFFF, regs >> 16], 2).reshape(32, 2 * nregs).astype(np.uint16)

def wmma(wave, i) -> None:
  n, f = i.name, i.f
  parts = n.split("_")   # v_wmma_f32_16x16x16_f16
  dt, it = parts[2], parts[4]
  if it not in ("f16", "bf16") or dt not in ("f32", "f16", "bf16"):
    raise NotImplementedError(f"pc 0x{wave.pc:x}: {n} is not emulated (f16/bf16 inputs only)")
  rdna4 = wave.gfx12
  nin = 4 if rdna4 else 8
  a = typed(_halves(wave, f["src0"] - 256, nin, f["src0"]), it).astype(np.float64)   # [32, 8 or 16]
  b = typed(_halves(wave, f["src1"] - 256, nin, f["src1"]), it).astype(np.float64)
  A, B = np.zeros((16, 16)), np.zeros((16, 16))
  if rdna4:
    for l in range(32):
      A[l % 16, 8 * (l // 16):8 * (l // 16) + 8] = a[l]
      B[8 * (l // 16):8 * (l // 16) + 8, l % 16] = b[l]
  else:
    A[L[:16] % 16] = a[:16]
    B[:, L[:16] % 16] = b[:16].T
  wide = dt == "f32"
  ncd = 8 if wide or not rdna4 else 4
  rows = lambda l, v: (v + 8 * (l // 16)) if rdna4 else (2 * v + l // 16)  # noqa: E731
  c_code = f["src2"]
  if wide:
    cregs = np.stack([wave.vreg(c_code - 256 + k) for k in range(8)], 1) if c_code >= 256 else \
      np.full((32, 8), wave.sget(c_code, 32, i.literal), np.uint32)
    c = typed(cregs, "f32").astype(np.float64)
  else:
    hi = bool(f["opsel"] >> 2 & 1)
    if c_code < 256: c = np.full((32, 8), typed(np.uint16(wave.sget(c_code, 16, i.literal)), dt).astype(np.float64))
    elif rdna4: c = typed(_halves(wave, c_code - 256, 4, c_code), dt).astype(np.float64)
    else: c = typed(_halves(wave, c_code - 256, 8, c_code)[:, int(hi)::2], dt).astype(np.float64)
  C = np.zeros((16, 16))
  for l in range(32):
    for v in range(8): C[rows(l, v), l % 16] = c[l, v]
  D = A @ B + C
  out = np.array([[D[rows(l, v), l % 16] for v in range(8)] for l in range(32)])   # [32, 8]
  dst = f["vdst"]
  if wide:
    res = raw(out.astype(np.float32), "f32")
    for v in range(8): wave.vdst(dst + v, res[:, v], 32)
  elif rdna4:
    h = raw(out.astype(np.float32) if dt == "bf16" else out.astype(np.float16), dt).astype(np.uint32)
    for r in range(ncd): wave.vdst(dst + r, h[:, 2 * r] | h[:, 2 * r + 1] << 16, 32)
  else:
    h = raw(out.astype(np.float32) if dt == "bf16" else out.astype(np.float16), dt)
    for v in range(8): wave.vdst(dst + v, h[:, v], 16, hi)
