"""LLVM IR for the host CPU, compiled in-process by llvmlite (no system compiler needed).

The walk and the lowering are the shared LLVMIRRenderer (tinycore/renderer/llvmir.py); the CPU adds the first global
loop running core_start..core_end (two trailing i64 params) so the runtime can split it across threads, bfloat16/fp8
as float in registers and integers in memory (converted by small always-inlined helper functions), and a double->half
cast that needs no libgcc."""
from __future__ import annotations
import math
from tinycore.uop import UOp
from tinycore.dtype import DType, dtypes
from tinycore.renderer.llvmir import LLVMIRRenderer, const

# ---- helpers for the emulated formats (emitted only when used)
def _bf16_helpers() -> dict[str, str]:
  return {
  "__tc_from_bfloat16": """define internal float @__tc_from_bfloat16(i16 %x) alwaysinline nounwind {
  %a = zext i16 %x to i32
  %b = shl i32 %a, 16
  %f = bitcast i32 %b to float
  ret float %f
}""",
  # round to nearest even on the top 16 bits; NaN stays a (quiet) NaN
  "__tc_to_bfloat16": """define internal i16 @__tc_to_bfloat16(float %f) alwaysinline nounwind {
  %u = bitcast float %f to i32
  %s = lshr i32 %u, 16
  %l = and i32 %s, 1
  %a = add i32 %u, 32767
  %b = add i32 %a, %l
  %c = lshr i32 %b, 16
  %t = trunc i32 %c to i16
  %n = fcmp uno float %f, 0.0
  %r = select i1 %n, i16 32704, i16 %t
  ret i16 %r
}"""}

def _fp8_helpers(name: str, e: int, m: int, fn: bool) -> dict[str, str]:
  bias, emax = (1 << (e - 1)) - 1, (1 << e) - 1
  maxf = (2 - 2 ** -(m - 1)) * 2 ** (emax - bias) if fn else (2 - 2 ** -m) * 2 ** (emax - 1 - bias)   # largest finite value
  sub, minnorm = const(2.0 ** (1 - bias - m), dtypes.float32), const(2.0 ** (1 - bias), dtypes.float32)
  subinv = const(2.0 ** (bias - 1 + m), dtypes.float32)
  nan, inf, ninf = const(math.nan, dtypes.float32), const(math.inf, dtypes.float32), const(-math.inf, dtypes.float32)
  special = (f"""  %lo = and i32 %u, 127
  %isnan = icmp eq i32 %lo, 127
  %r = select i1 %isnan, float {nan}, float %v""" if fn else f"""  %ismax = icmp eq i32 %ex, {emax}
  %mnz = icmp ne i32 %mt, 0
  %inf = select i1 %neg, float {ninf}, float {inf}
  %sp = select i1 %mnz, float {nan}, float %inf
  %r = select i1 %ismax, float %sp, float %v""")
  dec = f"""define internal float @__tc_from_{name}(i8 %x) alwaysinline nounwind {{
  %u = zext i8 %x to i32
  %sg = and i32 %u, 128
  %neg = icmp ne i32 %sg, 0
  %e0 = lshr i32 %u, {m}
  %ex = and i32 %e0, {emax}
  %mt = and i32 %u, {(1 << m) - 1}
  %sb = shl i32 %sg, 24
  %e1 = add i32 %ex, {127 - bias}
  %e2 = shl i32 %e1, 23
  %m1 = shl i32 %mt, {23 - m}
  %o1 = or i32 %sb, %e2
  %o2 = or i32 %o1, %m1
  %nf = bitcast i32 %o2 to float
  %sf = uitofp i32 %mt to float
  %sv = fmul float %sf, {sub}
  %sn = fneg float %sv
  %sv2 = select i1 %neg, float %sn, float %sv
  %isz = icmp eq i32 %ex, 0
  %v = select i1 %isz, float %sv2, float %nf
{special}
  ret float %r
}}"""
  # nearest finite value, ties to the even code (same answers as the C renderer's search); beyond the range it saturates,
  # e5m2 keeps +-inf, NaN -> 0x7f
  sh = 23 - m
  enc = f"""define internal i8 @__tc_to_{name}(float %f) alwaysinline nounwind {{
  %u = bitcast float %f to i32
  %s0 = lshr i32 %u, 24
  %sg = and i32 %s0, 128
  %a = call float @llvm.fabs.f32(float %f)
  %big = fcmp ogt float %a, {const(maxf, dtypes.float32)}
  %c = select i1 %big, float {const(maxf, dtypes.float32)}, float %a
  %sc = fmul float %c, {subinv}
  %q = call float @llvm.roundeven.f32(float %sc)
  %qi = fptoui float %q to i32
  %cu = bitcast float %c to i32
  %l0 = lshr i32 %cu, {sh}
  %l1 = and i32 %l0, 1
  %r0 = add i32 %cu, {(1 << (sh - 1)) - 1}
  %r1 = add i32 %r0, %l1
  %r2 = lshr i32 %r1, {sh}
  %cn = sub i32 %r2, {(127 - bias) << m}
  %issub = fcmp olt float %c, {minnorm}
  %code = select i1 %issub, i32 %qi, i32 %cn
  %sgd = or i32 %code, %sg
  %isinf = fcmp oeq float %a, {inf}
  %infc = or i32 %sg, {0x7c if not fn else 0x7e}
  %k1 = select i1 %isinf, i32 %infc, i32 %sgd
  %isnan = fcmp uno float %f, 0.0
  %k2 = select i1 %isnan, i32 127, i32 %k1
  %k = trunc i32 %k2 to i8
  ret i8 %k
}}"""
  return {f"__tc_from_{name}": dec, f"__tc_to_{name}": enc}

HELPERS: dict[str, str] = {**_bf16_helpers(), **_fp8_helpers("fp8e4m3", 4, 3, True), **_fp8_helpers("fp8e5m2", 5, 2, False)}
_FP8_DEPS = {f: f"declare float @{f}(float)" for f in ("llvm.fabs.f32", "llvm.roundeven.f32")}   # the fp8 encoders call these

class LLVMRenderer(LLVMIRRenderer):
  name = "LLVM"
  device = "CPU"
  emulated = {dtypes.bfloat16: dtypes.uint16, dtypes.fp8e4m3: dtypes.uint8, dtypes.fp8e5m2: dtypes.uint8}
  var_arg_bits = 64   # Variables and core_start/core_end are i64 whatever the index width (the runtime passes c_int64)
  def __init__(self, compiler=None):
    from tinycore_cpu.compiler_llvm import LLVMCompiler
    from tinycore_cpu.runtime_llvm import LLVMProgram
    self.compiler = compiler or LLVMCompiler()
    self.runtime = LLVMProgram   # the object files this compiler makes are loaded by llvmlite's JIT, not dlopen

  def to_bits(self, x: str, dt: DType) -> str:
    if dt != dtypes.bfloat16: self.used.update(_FP8_DEPS)
    return self.call(f"__tc_to_{dt.name}", self.mtype(dt), ("float", x))
  def from_bits(self, x: str, dt: DType) -> str: return self.call(f"__tc_from_{dt.name}", "float", (self.mtype(dt), x))
  def range_bounds(self, u: UOp) -> tuple[str, str]:
    # the first global loop runs core_start..core_end: the runtime splits it across threads
    if u.arg[0] == "g" and not any(l.arg[0] == "g" for l in self.loops):
      return tuple(self.cast(b, dtypes.int64, self.index_dtype) if self.index_dtype != dtypes.int64 else b for b in ("%core_start", "%core_end"))
    return super().range_bounds(u)
  def f64_to_f16(self, x: str) -> str:
    # double->half is a libgcc call on x86 (__truncdfhf2); instead round to odd into float (exact for the second
    # rounding: float keeps >= 2*11+2 bits), then float->half with nearest-even is correctly rounded
    ins = self.ins
    f = ins(f"fptrunc double {x} to float")
    back = ins(f"fpext float {f} to double")
    exact = ins(f"fcmp oeq double {back}, {x}")
    away = ins(f"fcmp ogt double {self.call('llvm.fabs.f64', 'double', ('double', back))}, {self.call('llvm.fabs.f64', 'double', ('double', x))}")
    u = ins(f"bitcast float {f} to i32")
    tz = ins(f"sub i32 {u}, {ins(f'zext i1 {away} to i32')}")   # toward zero, then the sticky bit
    odd = ins(f"select i1 {exact}, i32 {u}, i32 {ins(f'or i32 {tz}, 1')}")
    return ins(f"fptrunc float {ins(f'bitcast i32 {odd} to float')} to half")

  def kernel(self, name: str, params: list[str], uops: list[UOp]) -> str:
    params = params + ["i64 %core_start", "i64 %core_end"]
    out = [f"define void @\"{name}\"({', '.join(params)}) nounwind {{", "entry:", *self.allocas, *self.body, "  ret void", "}"]
    return "\n".join(out + [HELPERS.get(fn, d) for fn, d in sorted(self.used.items())]) + "\n"
