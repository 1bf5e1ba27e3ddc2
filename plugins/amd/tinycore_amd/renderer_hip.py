"""HIP-dialect C++ for clang's amdgcn-amd-amdhsa target, built with no ROCm install (-nogpulib, no HIP headers).

The shared C-style renderer with AMD's kernel signature and thread indices from the `__builtin_amdgcn_*` intrinsics.
Math calls are clang builtins that lower to LLVM intrinsics the AMDGPU backend selects natively (no device libs):
half is native `_Float16`; bfloat16/fp8 are emulated (float in registers, their bits in memory); float64
exp2/log2/sin (no f64 instruction, no libm here) are double-precision helpers from f64math.py; pow is
exp2(y*log2(x)), so a negative base gives NaN."""
from __future__ import annotations
from tinycore.renderer.cstyle import CStyleRenderer
from tinycore.uop import UOp, Ops
from tinycore.dtype import DType, dtypes
from tinycore_amd.arch import AMDTarget
from tinycore_amd.f64math import HIP_F64_MATH

_HELPERS = r"""#define __global__ __attribute__((global))
#define TCD static __attribute__((device, always_inline)) inline
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
typedef _Float16 __tc_half4 __attribute__((ext_vector_type(4)));
typedef _Float16 __tc_half8 __attribute__((ext_vector_type(8)));
typedef _Float16 __tc_half16 __attribute__((ext_vector_type(16)));
typedef float __tc_float4 __attribute__((ext_vector_type(4)));
typedef float __tc_float8 __attribute__((ext_vector_type(8)));
TCD float __tc_from_bfloat16(unsigned short x) { return __builtin_bit_cast(float, (unsigned int)x << 16); }
TCD unsigned short __tc_to_bfloat16(float f) {   /* nearest even on the top half; NaN stays quiet */
  unsigned int u = __builtin_bit_cast(unsigned int, f);
  return f != f ? 0x7fc0 : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
TCD float __tc_round_bfloat16(float f) { return __tc_from_bfloat16(__tc_to_bfloat16(f)); }
TCD float __tc_fp8_dec(unsigned char x, int e, int m, int fn) {
  int bias = (1 << (e - 1)) - 1, ex = (x >> m) & ((1 << e) - 1), mt = x & ((1 << m) - 1);
  float s = (x & 0x80) ? -1.0f : 1.0f;
  if (fn ? (x & 0x7f) == 0x7f : ex == (1 << e) - 1) return (fn || mt) ? NAN : s * INFINITY;
  return s * __builtin_amdgcn_ldexpf(ex ? 1.0f + (float)mt / (1 << m) : (float)mt / (1 << m), (ex ? ex : 1) - bias); }
/* nearest finite code, ties to even, saturating at the largest finite; e5m2 keeps +-inf; NaN -> 0x7f */
TCD unsigned char __tc_fp8_enc(float f, int e, int m, int fn) {
  if (f != f) return 0x7f;
  unsigned int s = (__builtin_bit_cast(unsigned int, f) >> 24) & 0x80u;
  int bias = (1 << (e - 1)) - 1, emax = (1 << e) - 1;
  float a = __builtin_fabsf(f);
  if (a == INFINITY) return (unsigned char)(s | (fn ? 0x7e : 0x7c));
  float mx = fn ? __builtin_amdgcn_ldexpf(2.0f - __builtin_amdgcn_ldexpf(1.0f, 1 - m), emax - bias) : __builtin_amdgcn_ldexpf(2.0f - __builtin_amdgcn_ldexpf(1.0f, -m), emax - 1 - bias);
  a = a > mx ? mx : a;
  unsigned int code;
  if (a < __builtin_amdgcn_ldexpf(1.0f, 1 - bias)) code = (unsigned int)__builtin_rintf(a * __builtin_amdgcn_ldexpf(1.0f, bias - 1 + m));
  else { unsigned int u = __builtin_bit_cast(unsigned int, a), sh = 23 - m;
    code = ((u + (1u << (sh - 1)) - 1u + ((u >> sh) & 1u)) >> sh) - ((unsigned int)(127 - bias) << m); }
  return (unsigned char)(code | s); }
TCD float __tc_from_fp8e4m3(unsigned char x) { return __tc_fp8_dec(x, 4, 3, 1); }
TCD unsigned char __tc_to_fp8e4m3(float f) { return __tc_fp8_enc(f, 4, 3, 1); }
TCD float __tc_round_fp8e4m3(float f) { return __tc_from_fp8e4m3(__tc_to_fp8e4m3(f)); }
TCD float __tc_from_fp8e5m2(unsigned char x) { return __tc_fp8_dec(x, 5, 2, 0); }
TCD unsigned char __tc_to_fp8e5m2(float f) { return __tc_fp8_enc(f, 5, 2, 0); }
TCD float __tc_round_fp8e5m2(float f) { return __tc_from_fp8e5m2(__tc_to_fp8e5m2(f)); }
"""

class HIPRenderer(AMDTarget, CStyleRenderer):
  name = "HIP"
  kernel_prefix, restrict = 'extern "C" __global__ ', "__restrict__"
  prelude = _HELPERS + HIP_F64_MATH
  type_map = {**CStyleRenderer.type_map, dtypes.bool: "bool", dtypes.float16: "_Float16"}
  emulated = {dtypes.bfloat16: dtypes.uint16, dtypes.fp8e4m3: dtypes.uint8, dtypes.fp8e5m2: dtypes.uint8}
  def make_compiler(self):
    # clang is looked for on first compile: rendering (codegen tests, the emulator) works without it
    from tinycore_amd.compiler import HIPCompiler
    return HIPCompiler(self.arch)

  def render_special(self, u: UOp, name: str, bound: str) -> list[str]:
    d, local = "xyz"[int(name[-1])], u.arg[1]
    gid, lid = f"__builtin_amdgcn_workgroup_id_{d}()", f"__builtin_amdgcn_workitem_id_{d}()"
    ct = self.ctype(dtypes.index)   # 64-bit kernels widen the group id before the multiply
    idx = f"(({ct}){gid}*{local}+{lid})" if local > 1 else f"({ct}){gid}"
    return [f"{ct} {name} = {idx};", f"if ({name} >= {bound}) return;"]   # kernels with barriers launch exact grids
  def _bits(self, x: str, src: DType, dt: DType) -> str: return f"__builtin_bit_cast({self.ctype(dt)}, ({self.ctype(src)})({x}))"
  def math(self, fn: str, dt: DType, *a: str) -> str:
    if fn == "pow": return self.math("exp2", dt, f"({a[1]})*{self.math('log2', dt, a[0])}")
    if dt == dtypes.float64 and fn in ("sqrt", "trunc"): return f"__builtin_{fn}({', '.join(a)})"
    if dt == dtypes.float64 and fn in ("exp2", "log2", "sin"): return f"__tc_{fn}_f64({a[0]})"   # f64math.py
    f = f"__builtin_{fn}f({', '.join(f'(float)({x})' for x in a)})"
    return f if dt == dtypes.float32 or dt in self.emulated else f"(({self.ctype(dt)}){f})"
  # codegen/opt_smem.py's staging through LDS: synchronous copies between two barriers (no asynchronous copy or matrix
  # load instruction is declared), fragments gathered by the WMMA layouts
  shared_staging = True
  simt_staging = True   # fp32 GEMMs: FMA register tiles over the same panels (codegen/opt_simt.py)
  def render_extra(self, u: UOp, r: dict) -> list[str] | None:
    if u.op is Ops.DEFINE_LOCAL:
      r[u] = f"smem{u.arg}"
      return [f"__attribute__((shared, aligned(16))) {self.ctype(self.emulated.get(u.dtype.base, u.dtype.base))} {r[u]}[{u.dtype.size}];"]
    if u.op is Ops.BARRIER:
      if u.arg is not None: raise NotImplementedError(f"HIP can't render barrier {u.arg!r}")
      # s_barrier orders execution; the workgroup fences make the LDS writes before it visible to the reads after it
      return ['__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); '
              '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");']
    if u.op is Ops.LOAD and u.src[0].arg is not None and len(u.src[0].src) > 2:   # a gated vector load (a tile's tail) reads zeros
      ind = u.src[0]
      r[u] = f"vg{len(r)}"
      v = self.vload(f"({r[ind.src[0]]}+{r[ind.src[1]]})", ind.src[0].dtype.base, u.dtype)
      return [f"{self.ctype(u.dtype)} {r[u]} = {r[ind.src[2]]} ? {v} : {self.splat(self.literal(0, u.dtype.scalar()), u.dtype)};"]
    return None
  def render_kernel(self, name: str, body: list[str], params: list[str]) -> str:
    # the flat workgroup size bounds register use, like CUDA's launch bounds (the default assumes 1024 lanes)
    attr = f"__attribute__((amdgpu_flat_work_group_size(1, {max(self.threads, 1)}))) "
    return self.prelude + self.typedefs + f"{self.kernel_prefix}{attr}void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"

  # ***** tensor cores: WMMA (codegen/opt_tc.py) as clang's amdgcn matrix builtins on ext_vector_type fragments
  def render_wmma(self, u: UOp, r: dict) -> list[str]:
    if u.op is Ops.GEP: return [f"float {r[u]} = {r[u.src[0]]}[{u.arg[0]}];"]
    if u.op is Ops.VECTORIZE:
      return [f"__tc_{u.dtype.scalar().name}{u.dtype.count} {r[u]} = {{{', '.join(r[s] for s in u.src)}}};"]
    a, b, c = (r[s] for s in u.src[:3])
    call = {"wmma_rdna3": f"__builtin_amdgcn_wmma_f32_16x16x16_f16_w32({a}, {b}, {c})",
            "wmma_rdna4": f"__builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12({a}, {b}, {c})",
            "mfma": f"__builtin_amdgcn_mfma_f32_16x16x16f16({a}, {b}, {c}, 0, 0, 0)"}[u.arg[0].split("_16x16x16")[0]]
    return [f"__tc_float{u.dtype.count} {r[u]} = {call};"]
