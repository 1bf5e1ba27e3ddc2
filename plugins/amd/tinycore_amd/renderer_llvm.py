"""AMDGPU LLVM IR, compiled in-process by llvmlite (its LLVM has the amdgcn backend: no ROCm, no clang).

The walk and the lowering are the shared LLVMIRRenderer (tinycore/renderer/llvmir.py); AMD adds one `amdgpu_kernel`
per program with buffers in `addrspace(1)` (global) and accumulators as `addrspace(5)` (private) allocas, thread
indices from llvm.amdgcn.workgroup.id.* / workitem.id.*, WMMA/MFMA tensor cores, and bfloat16 through LLVM's
`bfloat` type (i16 in memory, float in registers). float64 exp2/log2/sin have no AMDGPU instruction: they are the
double-precision IR functions of f64math.py; pow is exp2(y*log2(x)). fp8 is not supported here (use AMD:HIP).

Shared-memory GEMMs (codegen/opt_smem.py, c_tile.py) take the same actions as on HIP: the panels are one LDS array
(`addrspace(3)`), copies are vector loads and stores (`<8 x half>`: global_load_b128, ds_store_b128) between barriers
(s_barrier between workgroup-scope fences), and WMMA fragments are gathered from LDS element by element."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.renderer import workgroup_threads
from tinycore.renderer.llvmir import LLVMIRRenderer, SFX
from tinycore_amd.arch import AMDTarget

class AMDLLVMRenderer(AMDTarget, LLVMIRRenderer):
  name = "LLVM"
  buf_space, acc_space = 1, 5
  emulated = {dtypes.bfloat16: dtypes.uint16}
  index_widths = (32,)   # thread ids are i32: a kernel past 2**31-1 elements is refused with a clear error (use HIP)
  # every dtype but fp8 (ltype refuses it: use AMD:HIP), declared so the kit's fuzzer and EMU+AMD:LLVM know
  claimed_dtypes = frozenset(d for d in dtypes.fields().values() if d not in (dtypes.fp8e4m3, dtypes.fp8e5m2))
  # opt_smem.py's staging through LDS: synchronous copies between two barriers, fragments gathered by the WMMA layouts
  shared_staging = True
  simt_staging = True   # fp32 GEMMs: FMA register tiles over the same panels (codegen/opt_simt.py)
  def make_compiler(self):
    from tinycore_amd.compiler import AMDLLVMCompiler
    return AMDLLVMCompiler(self.arch)

  def ltype(self, dt: DType) -> str:
    if (sc := dt.scalar()) in (dtypes.fp8e4m3, dtypes.fp8e5m2): raise NotImplementedError(f"{self.what}: {sc.name} is not supported, use DEV=AMD:HIP")
    if not isinstance(dt, PtrDType) and dt.count > 1: return f"<{dt.count} x {super().ltype(dt.scalar())}>"   # a staging copy's lanes
    return super().ltype(dt)
  def space(self, buf: UOp) -> int: return 3 if buf.op is Ops.DEFINE_LOCAL else self.buf_space   # LDS
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

  def alu(self, u: UOp) -> str:
    # a*b+c may fuse (v_fmac), as HIP's -ffp-contract=fast lets clang: opt_simt.py's FMA chains are one instruction a product
    if u.op is Ops.MULACC and (t := self.ltype(u.dtype)) in ("half", "float", "double"):
      return self.call(f"llvm.fmuladd.{SFX[t]}", t, *[(t, self.operand(s, u.dtype)) for s in u.src])
    return super().alu(u)

  def special(self, u: UOp) -> str:
    d, local = "xyz"[int(u.arg[0][-1])], u.arg[1]
    g = self.call(f"llvm.amdgcn.workgroup.id.{d}", "i32")
    idx = self.ins(f"add i32 {self.ins(f'mul i32 {g}, {local}')}, {self.call(f'llvm.amdgcn.workitem.id.{d}', 'i32')}") if local > 1 else g
    # lanes past the bound retire; kernels with barriers (the staged GEMMs) launch exact grids, so none of theirs do
    ok = self.block()
    self.emit(f"br i1 {self.ins(f'icmp slt i32 {idx}, {self.operand(u.src[0], dtypes.int32)}')}, label %{ok}, label %exit")
    self.label(ok)
    return idx

  # ---- shared memory: the panels, barriers and the staging copies' vector accesses
  def lower(self, u: UOp) -> None:
    if u.op is Ops.DEFINE_LOCAL:
      self.r[u] = f"@smem{u.arg}"
      # module level, like every LDS variable: its size is the kernel's group segment
      self.used[self.r[u]] = f"{self.r[u]} = internal unnamed_addr addrspace(3) global [{u.dtype.size} x {self.mtype(u.dtype.base)}] undef, align 16"
    elif u.op is Ops.BARRIER:
      if u.arg is not None: raise NotImplementedError(f"{self.what} can't render barrier {u.arg!r}")
      # s_barrier orders execution; the workgroup fences make the LDS writes before it visible to the reads after it
      self.used["llvm.amdgcn.s.barrier"] = "declare void @llvm.amdgcn.s.barrier()"
      self.emit('fence syncscope("workgroup") release')
      self.emit("call void @llvm.amdgcn.s.barrier()")
      self.emit('fence syncscope("workgroup") acquire')
    elif u.op in (Ops.LOAD, Ops.STORE) and u.src[0].arg is not None: self.vector_access(u)
    else: super().lower(u)

  def vector_access(self, u: UOp) -> None:
    """A LOAD or STORE of n consecutive elements (INDEX arg ("vec", n) or ("vec", n, align bytes)) as one vector access."""
    ind = u.src[0]
    buf, dt = ind.src[0], (u.dtype if u.op is Ops.LOAD else u.src[1].dtype)
    bdt = buf.dtype.base
    if bdt != dt.scalar() or bdt in self.emulated or bdt == dtypes.bool:
      raise NotImplementedError(f"{self.what}: vector {u.op.name.lower()} of {dt} with a {bdt} buffer")
    # alignment: what the INDEX promises; in LDS the staging copies move whole chunks at chunk offsets; else an element's
    align = ind.arg[2] if len(ind.arg) > 2 else dt.itemsize if buf.op is Ops.DEFINE_LOCAL else bdt.itemsize
    align &= -align   # a power of two (3 lanes of a 4-byte type are 4-byte aligned, not 12)
    vt, pt = self.ltype(dt), self.ptr(self.space(buf))
    gate = self.operand(ind.src[2], dtypes.bool) if len(ind.src) > 2 else None
    if u.op is Ops.LOAD:
      v = self.ins(f"load {vt}, {pt} {self.address(ind, gate)}, align {align}")   # a masked lane reads at element 0
      self.r[u] = self.ins(f"select i1 {gate}, {vt} {v}, {vt} zeroinitializer") if gate else v
      return
    x = self.val(u.src[1])
    if gate:   # a gated store (a tile's tail, its index clamped onto the last real chunk) is a branch around it
      y, n = self.block(), self.block()
      self.emit(f"br i1 {gate}, label %{y}, label %{n}")
      self.label(y)
    self.emit(f"store {vt} {x}, {pt} {self.address(ind, None)}, align {align}")
    if gate:
      self.emit(f"br label %{n}")
      self.label(n)

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
