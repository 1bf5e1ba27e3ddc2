"""AMDGPU LLVM IR, compiled in-process by llvmlite (its LLVM has the amdgcn backend: no ROCm, no clang).

The walk and the lowering are the shared LLVMIRRenderer (tinycore/renderer/llvmir.py); AMD adds one `amdgpu_kernel`
per program with buffers in `addrspace(1)` (global) and accumulators as `addrspace(5)` (private) allocas, thread
indices from llvm.amdgcn.workgroup.id.* / workitem.id.*, WMMA/MFMA tensor cores, and bfloat16 through LLVM's
`bfloat` type (i16 in memory, float in registers). float64 exp2/log2/sin have no AMDGPU instruction: they are the
double-precision IR functions of f64math.py; pow is exp2(y*log2(x)). fp8 is not supported here (use AMD:HIP)."""
from __future__ import annotations
from tinycore.uop import UOp
from tinycore.dtype import DType, dtypes
from tinycore.renderer import workgroup_threads
from tinycore.renderer.llvmir import LLVMIRRenderer
from tinycore_amd.arch import AMDTarget

class AMDLLVMRenderer(AMDTarget, LLVMIRRenderer):
  name = "LLVM"
  buf_space, acc_space = 1, 5
  emulated = {dtypes.bfloat16: dtypes.uint16}
  index_widths = (32,)   # thread ids are i32: a kernel past 2**31-1 elements is refused with a clear error (use HIP)
  # every dtype but fp8 (ltype refuses it: use AMD:HIP), declared so the kit's fuzzer and EMU+AMD:LLVM know
  claimed_dtypes = frozenset(d for d in dtypes.fields().values() if d not in (dtypes.fp8e4m3, dtypes.fp8e5m2))
  def make_compiler(self):
    from tinycore_amd.compiler import AMDLLVMCompiler
    return AMDLLVMCompiler(self.arch)

  def ltype(self, dt: DType) -> str:
    if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2): raise NotImplementedError(f"{self.what}: {dt.name} is not supported, use DEV=AMD:HIP")
    return super().ltype(dt)
  def to_bits(self, x: str, dt: DType) -> str: return self.ins(f"bitcast bfloat {self.ins(f'fptrunc float {x} to bfloat')} to i16")
  def from_bits(self, x: str, dt: DType) -> str: return self.ins(f"fpext bfloat {self.ins(f'bitcast i16 {x} to bfloat')} to float")
  def round_to(self, x: str, dt: DType) -> str: return self.ins(f"fpext bfloat {self.ins(f'fptrunc float {x} to bfloat')} to float")
  def math(self, fn: str, dt: DType, *a: str) -> str:
    t = self.ltype(dt)
    if fn == "pow": return self.math("exp2", dt, self.ins(f"fmul {t} {a[1]}, {self.math('log2', dt, a[0])}"))
    if t == "double" and fn in ("exp2", "log2", "sin"):   # no f64 instruction: double-precision helpers (f64math.py)
      from tinycore_amd.f64math import llvm_f64_math, LLVM_DECLS
      self.used.update(LLVM_DECLS)
      self.used[f"__tc_{fn}_f64"] = llvm_f64_math()[f"__tc_{fn}_f64"]
      return self.ins(f"call double @__tc_{fn}_f64(double {a[0]})")
    return super().math(fn, dt, *a)

  def special(self, u: UOp) -> str:
    d, local = "xyz"[int(u.arg[0][-1])], u.arg[1]
    g = self.call(f"llvm.amdgcn.workgroup.id.{d}", "i32")
    idx = self.ins(f"add i32 {self.ins(f'mul i32 {g}, {local}')}, {self.call(f'llvm.amdgcn.workitem.id.{d}', 'i32')}") if local > 1 else g
    ok = self.block()   # lanes past the bound retire (no barriers yet, so that's safe)
    self.emit(f"br i1 {self.ins(f'icmp slt i32 {idx}, {self.operand(u.src[0], dtypes.int32)}')}, label %{ok}, label %exit")
    self.label(ok)
    return idx

  def wmma(self, u: UOp, a: str, b: str, c: str) -> str:
    """AMD's matrix intrinsics, half fragments in, float accumulators in and out (LLVM 17+ overloads WMMA on its types)."""
    na, nc = u.src[0].dtype.count, u.dtype.count
    va, vc = f"<{na} x half>", f"<{nc} x float>"
    kind = u.arg[0].split("_16x16x16")[0]
    if kind == "mfma": return self.call("llvm.amdgcn.mfma.f32.16x16x16f16", vc, (va, a), (va, b), (vc, c), ("i32", "0"), ("i32", "0"), ("i32", "0"))
    return self.call(f"llvm.amdgcn.wmma.f32.16x16x16.f16.v{nc}f32.v{na}f16", vc, (va, a), (va, b), (vc, c))

  def kernel(self, name: str, params: list[str], uops: list[UOp]) -> str:
    threads = workgroup_threads(uops)
    # no hidden kernargs (this runtime passes none); the flat size caps registers like CUDA's launch bounds
    attrs = f'attributes #0 = {{ nounwind "amdgpu-flat-work-group-size"="1,{max(threads, 1)}" "amdgpu-no-implicitarg-ptr" }}'
    out = ['target triple = "amdgcn-amd-amdhsa"', f'define amdgpu_kernel void @"{name}"({", ".join(params)}) #0 {{', "entry:", *self.allocas,
           *self.body, "  br label %exit", "exit:", "  ret void", "}", *sorted(self.used.values()), attrs,
           "!llvm.module.flags = !{!0}", '!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}']   # v5: what ld.lld 16+ and ROCm 6 load
    return "\n".join(out) + "\n"
