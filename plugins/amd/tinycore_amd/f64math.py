"""float64 exp2, log2 and sin for AMD GPUs, which have no such instructions and (here) no device libm: range reduction
on the native v_rndne/v_ldexp/v_frexp_f64 instructions plus Taylor polynomials, in double precision throughout.
Both renderers use it (HIP as C helpers, LLVM as IR functions), so float64 transcendentals are accurate to a few ulp
instead of float32's 1e-7 (the ISA emulator's op-suite run found that: the UOp interpreter computes in float64).

- exp2(x) = 2^n * e^(t), n = rint(x), t = (x - n) ln2, |t| <= 0.347: degree 14 leaves < 1e-17.
- log2(x) = e + 2 atanh(s) log2(e), x = m 2^e with m in [sqrt(1/2), sqrt(2)), s = (m-1)/(m+1), |s| <= 0.172: odd terms to s^23.
- sin(x): k = rint(x 2/pi), r = x - k pi/2 in three exact steps (Cody-Waite, fdlibm's 33-bit splits of pi/2: exact for
  |k| < 2^20, so |x| < 1.6e6; larger arguments lose accuracy), then sin or cos of r by quadrant (terms to r^23 / r^22)."""
from __future__ import annotations
import struct
from math import factorial

EXP2_C = [1 / factorial(k) for k in range(14, -1, -1)]                 # e^t, highest power first
LOG_C = [1 / (2 * k + 1) for k in range(11, -1, -1)]                   # atanh(s)/s in s^2, highest first
SIN_C = [(-1) ** k / factorial(2 * k + 1) for k in range(11, -1, -1)]  # sin(r)/r in r^2
COS_C = [(-1) ** k / factorial(2 * k) for k in range(11, -1, -1)]      # cos(r) in r^2
LN2, LOG2E, SQRT_HALF, TWO_OVER_PI = 0.6931471805599453094, 1.4426950408889634074, 0.70710678118654752440, 0.63661977236758134308
PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)   # fdlibm pio2_1, _2, _3

def _h(v: float) -> str: return float(v).hex()                        # C hex float literal
def _ir(v: float) -> str: return "0x" + struct.pack(">d", v).hex().upper()   # LLVM IR double literal (IEEE bits)

def _horner_c(coeffs: list[float], var: str) -> str:
  e = _h(coeffs[0])
  for c in coeffs[1:]: e = f"__builtin_fma({e}, {var}, {_h(c)})"
  return e

HIP_F64_MATH = f"""TCD double __tc_exp2_f64(double x) {{
  double n = __builtin_rint(x), t = (x - n) * {_h(LN2)};
  double p = {_horner_c(EXP2_C, "t")};
  if (x != x) return x;
  if (x >= 1024.0) return __builtin_inf();
  if (x < -1080.0) return 0.0;
  return __builtin_ldexp(p, (int)n); }}
TCD double __tc_log2_f64(double x) {{
  int e; double m = __builtin_frexp(x, &e);
  if (m < {_h(SQRT_HALF)}) {{ m = m * 2.0; e = e - 1; }}
  double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  double r = __builtin_fma(2.0 * s * {_horner_c(LOG_C, "s2")}, {_h(LOG2E)}, (double)e);
  if (x != x || x < 0.0) return __builtin_nan("");
  if (x == 0.0) return -__builtin_inf();
  if (x == __builtin_inf()) return x;
  return r; }}
TCD double __tc_sin_f64(double x) {{
  double k = __builtin_rint(x * {_h(TWO_OVER_PI)});
  double r = ((x - k * {_h(PIO2[0])}) - k * {_h(PIO2[1])}) - k * {_h(PIO2[2])}, r2 = r * r;
  double q = k - 4.0 * __builtin_floor(k * 0.25);
  double s = r * {_horner_c(SIN_C, "r2")}, c = {_horner_c(COS_C, "r2")};
  double v = (q == 1.0 || q == 3.0) ? c : s;
  if (!(__builtin_fabs(x) < __builtin_inf())) return __builtin_nan("");
  return q >= 2.0 ? -v : v; }}
"""

def llvm_f64_math() -> dict[str, str]:
  """name -> an IR definition (internal, always inlined) of the same three functions; the module declares what they call."""
  def horner(coeffs, var, out, pre):
    lines, acc = [], _ir(coeffs[0])
    for k, c in enumerate(coeffs[1:]):
      lines.append(f"  %{pre}{k} = call double @llvm.fma.f64(double {acc}, double %{var}, double {_ir(c)})")
      acc = f"%{pre}{k}"
    lines.append(f"  %{out} = fadd double {acc}, 0.0")
    return lines
  attrs = "internal double"
  exp2 = [f"define {attrs} @__tc_exp2_f64(double %x) alwaysinline {{", "  %n = call double @llvm.rint.f64(double %x)",
          "  %f = fsub double %x, %n", f"  %t = fmul double %f, {_ir(LN2)}", *horner(EXP2_C, "t", "p", "e"),
          "  %ni = fptosi double %n to i32", "  %y = call double @llvm.ldexp.f64.i32(double %p, i32 %ni)",
          "  %big = fcmp oge double %x, 1024.0", "  %small = fcmp olt double %x, -1080.0", "  %nan = fcmp uno double %x, %x",
          "  %y1 = select i1 %big, double 0x7FF0000000000000, double %y", "  %y2 = select i1 %small, double 0.0, double %y1",
          "  %y3 = select i1 %nan, double %x, double %y2", "  ret double %y3", "}"]
  log2 = [f"define {attrs} @__tc_log2_f64(double %x) alwaysinline {{", "  %fr = call { double, i32 } @llvm.frexp.f64.i32(double %x)",
          "  %m0 = extractvalue { double, i32 } %fr, 0", "  %e0 = extractvalue { double, i32 } %fr, 1",
          f"  %lo = fcmp olt double %m0, {_ir(SQRT_HALF)}", "  %m2 = fmul double %m0, 2.0", "  %m = select i1 %lo, double %m2, double %m0",
          "  %e1 = sub i32 %e0, 1", "  %e = select i1 %lo, i32 %e1, i32 %e0", "  %num = fsub double %m, 1.0", "  %den = fadd double %m, 1.0",
          "  %s = fdiv double %num, %den", "  %s2 = fmul double %s, %s", *horner(LOG_C, "s2", "p", "l"), "  %ts = fmul double %s, 2.0",
          "  %ln = fmul double %ts, %p", "  %ef = sitofp i32 %e to double",
          f"  %r = call double @llvm.fma.f64(double %ln, double {_ir(LOG2E)}, double %ef)",
          "  %neg = fcmp ult double %x, 0.0", "  %zero = fcmp oeq double %x, 0.0", "  %inf = fcmp oeq double %x, 0x7FF0000000000000",
          "  %r1 = select i1 %inf, double %x, double %r", "  %r2 = select i1 %zero, double 0xFFF0000000000000, double %r1",
          "  %r3 = select i1 %neg, double 0x7FF8000000000000, double %r2", "  ret double %r3", "}"]
  sin = [f"define {attrs} @__tc_sin_f64(double %x) alwaysinline {{", f"  %xk = fmul double %x, {_ir(TWO_OVER_PI)}",
         "  %k = call double @llvm.rint.f64(double %xk)", f"  %a1 = fmul double %k, {_ir(PIO2[0])}", "  %r1 = fsub double %x, %a1",
         f"  %a2 = fmul double %k, {_ir(PIO2[1])}", "  %r2 = fsub double %r1, %a2", f"  %a3 = fmul double %k, {_ir(PIO2[2])}",
         "  %r = fsub double %r2, %a3", "  %rr = fmul double %r, %r", "  %k4 = fmul double %k, 0.25",
         "  %fl = call double @llvm.floor.f64(double %k4)", "  %fl4 = fmul double %fl, 4.0", "  %q = fsub double %k, %fl4",
         *horner(SIN_C, "rr", "sp", "s"), "  %sv = fmul double %r, %sp", *horner(COS_C, "rr", "cv", "c"),
         "  %q1 = fcmp oeq double %q, 1.0", "  %q3 = fcmp oeq double %q, 3.0", "  %odd = or i1 %q1, %q3",
         "  %v = select i1 %odd, double %cv, double %sv", "  %nv = fneg double %v", "  %hi = fcmp oge double %q, 2.0",
         "  %w = select i1 %hi, double %nv, double %v", "  %ax = call double @llvm.fabs.f64(double %x)",
         "  %fin = fcmp olt double %ax, 0x7FF0000000000000", "  %out = select i1 %fin, double %w, double 0x7FF8000000000000",
         "  ret double %out", "}"]
  return {"__tc_exp2_f64": "\n".join(exp2), "__tc_log2_f64": "\n".join(log2), "__tc_sin_f64": "\n".join(sin)}

LLVM_DECLS = {"llvm.fma.f64": "declare double @llvm.fma.f64(double, double, double)", "llvm.rint.f64": "declare double @llvm.rint.f64(double)",
              "llvm.ldexp.f64.i32": "declare double @llvm.ldexp.f64.i32(double, i32)",
              "llvm.frexp.f64.i32": "declare { double, i32 } @llvm.frexp.f64.i32(double)", "llvm.floor.f64": "declare double @llvm.floor.f64(double)",
              "llvm.fabs.f64": "declare double @llvm.fabs.f64(double)"}
