"""AMDGPU LLVM IR, compiled in-process by llvmlite (its LLVM has the amdgcn backend: no ROCm, no clang).

One `amdgpu_kernel` per program: buffers are `ptr addrspace(1)` (global), thread indices come from
llvm.amdgcn.workgroup.id.* / workitem.id.*, loops are header/body/latch blocks with a phi counter and accumulators
are allocas in addrspace(5) (private) that SROA turns into registers. bool is i1 (i8 in memory); bfloat16 uses
LLVM's `bfloat` type for its conversions (i16 in memory, float in registers). float64 exp2/log2/sin have no AMDGPU
instruction, so they are computed in float32; pow is exp2(y*log2(x)). fp8 is not supported here (use AMD:HIP)."""
from __future__ import annotations
import math, struct
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType, dtypes, PtrDType
from tinycore.renderer import Renderer
from tinycore_amd.arch import parse_arch
from tinycore_amd.tensor_cores import tensor_cores

_F = {dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double", dtypes.bfloat16: "float"}
_SFX = {"half": "f16", "float": "f32", "double": "f64"}

def rtype(dt: DType) -> str:
  """The type a register of `dt` has."""
  if isinstance(dt, PtrDType): return "ptr addrspace(1)"
  if dt.count > 1: raise NotImplementedError(f"AMD LLVM renderer: vector dtype {dt}")
  if dt in (dtypes.fp8e4m3, dtypes.fp8e5m2): raise NotImplementedError(f"AMD LLVM renderer: {dt.name} is not supported, use DEV=AMD:HIP")
  if dt == dtypes.bool: return "i1"
  return _F.get(dt) or f"i{dt.itemsize * 8}"
def mtype(dt: DType) -> str: return "i8" if dt == dtypes.bool else "i16" if dt == dtypes.bfloat16 else rtype(dt)
def _r(dt: DType) -> DType: return dtypes.float32 if dt == dtypes.bfloat16 else dt
def unsigned(dt: DType) -> bool: return dt == dtypes.bool or dtypes.is_unsigned(dt)

def const(v, dt: DType) -> str:
  dt = _r(dt)
  if dt == dtypes.bool: return "true" if v else "false"
  if dtypes.is_float(dt):
    v = float(v)
    if dt == dtypes.float16:
      try: return f"0xH{struct.unpack('<H', struct.pack('<e', v))[0]:04X}"
      except OverflowError: return "0xH7C00" if v > 0 else "0xHFC00"
    if dt == dtypes.float32 and math.isfinite(v):   # LLVM wants a double that the float holds exactly
      try: v = struct.unpack("<f", struct.pack("<f", v))[0]
      except OverflowError: v = math.copysign(math.inf, v)
    return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"
  bits = dt.itemsize * 8
  v = int(v) & ((1 << bits) - 1)
  return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)

class AMDLLVMRenderer(Renderer):
  name, device = "LLVM", "AMD"
  has_local, has_shared = True, True
  global_max = (2**31 - 1, 65535, 65535)
  local_max = (256, 1024, 1024)
  supports_float4 = False
  def __init__(self, arch: str | None = None, compiler=None):
    self.target = parse_arch(arch)
    self.arch, self.shared_max, self.tensor_cores = self.target.name, self.target.lds, tensor_cores(self.target.matrix)
    self._compiler = compiler
  def make_compiler(self):
    from tinycore_amd.compiler import AMDLLVMCompiler
    return AMDLLVMCompiler(self.arch)

  def render(self, name: str, uops: list[UOp]) -> str:
    r: dict[UOp, str] = {}
    regs: dict[UOp, str] = {}
    bufs, vars, allocas, body, decls = [], [], [], [], set()
    loops: dict[UOp, tuple[str, str]] = {}
    st = {"n": 0, "blk": 0, "cur": "entry", "threads": 1}
    def emit(s: str): body.append("  " + s)
    def ins(s: str) -> str:
      st["n"] += 1; t = f"%t{st['n']}"; emit(f"{t} = {s}"); return t
    def label(l: str): body.append(f"{l}:"); st["cur"] = l
    def block() -> str:
      st["blk"] += 1; return f"B{st['blk']}"
    def val(s: UOp) -> str: return ins(f"load {rtype(s.dtype)}, ptr addrspace(5) {regs[s]}") if s in regs else r[s]
    def call(fn: str, ret: str, *args: tuple[str, str]) -> str:
      decls.add(f"declare {ret} @{fn}({', '.join(t for t, _ in args)})")
      return ins(f"call {ret} @{fn}({', '.join(f'{t} {a}' for t, a in args)})")
    def math_(fn: str, dt: DType, *a: str) -> str:
      t = rtype(dt)
      if fn == "pow": return math_("exp2", dt, ins(f"fmul {t} {a[1]}, {math_('log2', dt, a[0])}"))
      if t == "double" and fn in ("exp2", "log2", "sin"):   # no f64 instruction: through float
        f = call(f"llvm.{fn}.f32", "float", ("float", ins(f"fptrunc double {a[0]} to float")))
        return ins(f"fpext float {f} to double")
      return call(f"llvm.{fn}.{_SFX[t]}", t, *[(t, x) for x in a])

    def cast(x: str, src: DType, dt: DType) -> str:
      if dt == dtypes.bfloat16:   # the register stays float, rounded to bfloat16's grid
        b = ins(f"fptrunc float {cast(x, src, dtypes.float32)} to bfloat")
        return ins(f"fpext bfloat {b} to float")
      src, dt = _r(src), _r(dt)
      s, d = rtype(src), rtype(dt)
      if dt == dtypes.bool:
        if src == dtypes.bool: return x
        return ins(f"fcmp une {s} {x}, {const(0, src)}" if dtypes.is_float(src) else f"icmp ne {s} {x}, 0")
      if src == dtypes.bool: return ins(f"{'uitofp' if dtypes.is_float(dt) else 'zext'} i1 {x} to {d}")
      sf, df = dtypes.is_float(src), dtypes.is_float(dt)
      if sf and df: return x if s == d else ins(f"{'fpext' if dt.itemsize > src.itemsize else 'fptrunc'} {s} {x} to {d}")
      if df: return ins(f"{'uitofp' if unsigned(src) else 'sitofp'} {s} {x} to {d}")
      if sf:   # narrow and unsigned 32-bit targets go through a wider signed int, so negatives wrap (no poison)
        if dt.itemsize < 4 or dt == dtypes.uint32:
          w = "i64" if dt == dtypes.uint32 else "i32"
          return ins(f"trunc {w} {ins(f'fptosi {s} {x} to {w}')} to {d}")
        return ins(f"{'fptoui' if dt == dtypes.uint64 else 'fptosi'} {s} {x} to {d}")
      if src.itemsize == dt.itemsize: return x
      return ins(f"trunc {s} {x} to {d}" if dt.itemsize < src.itemsize else f"{'zext' if unsigned(src) else 'sext'} {s} {x} to {d}")
    def operand(s: UOp, dt: DType) -> str:
      v = val(s)   # same register type is no conversion, except into bfloat16 (its grid is coarser than float's)
      return v if s.dtype == dt or (rtype(s.dtype) == rtype(dt) and dt != dtypes.bfloat16) else cast(v, s.dtype, dt)

    def divmod_(op: Ops, dt: DType, a: str, b: str, d: UOp) -> str:
      t, sg = rtype(dt), not unsigned(dt)
      inst = ("sdiv" if sg else "udiv") if op is Ops.IDIV else ("srem" if sg else "urem")
      if d.op is Ops.CONST:
        if d.arg == 0: return const(0, dt)
        if not (sg and d.arg == -1): return ins(f"{inst} {t} {a}, {b}")
      # x/0 is 0 and MIN/-1 wraps, like the reference: never divide by 0 or -1
      z = ins(f"icmp eq {t} {b}, 0")
      bad = ins(f"or i1 {z}, {ins(f'icmp eq {t} {b}, -1')}") if sg else z
      q = ins(f"{inst} {t} {a}, {ins(f'select i1 {bad}, {t} 1, {t} {b}')}")
      if sg: q = ins(f"select i1 {bad}, {t} {ins(f'sub {t} 0, {a}') if op is Ops.IDIV else '0'}, {t} {q}")
      return ins(f"select i1 {z}, {t} 0, {t} {q}")

    def alu(u: UOp) -> str:
      op, dt = u.op, u.dtype
      if op in GroupOp.Comparison:
        sd = u.src[0].dtype
        a, b, t = val(u.src[0]), operand(u.src[1], sd), rtype(sd)
        if dtypes.is_float(_r(sd)): return ins(f"fcmp {({Ops.CMPLT: 'olt', Ops.CMPNE: 'une', Ops.CMPEQ: 'oeq'})[op]} {t} {a}, {b}")
        return ins(f"icmp {({Ops.CMPLT: 'ult' if unsigned(sd) else 'slt', Ops.CMPNE: 'ne', Ops.CMPEQ: 'eq'})[op]} {t} {a}, {b}")
      if op is Ops.WHERE:
        return ins(f"select i1 {operand(u.src[0], dtypes.bool)}, {rtype(dt)} {operand(u.src[1], dt)}, {rtype(dt)} {operand(u.src[2], dt)}")
      a = [operand(s, dt) for s in u.src]
      t, fl, b = rtype(dt), dtypes.is_float(_r(dt)), dt == dtypes.bool
      if op is Ops.NEG: return ins(f"xor i1 {a[0]}, true" if b else f"fneg {t} {a[0]}" if fl else f"sub {t} 0, {a[0]}")
      if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.TRUNC, Ops.POW):
        if not fl: raise NotImplementedError(f"AMD LLVM renderer: {op.name} on {dt}")
        return math_(op.name.lower(), dt, *a)
      if op is Ops.RECIP: return ins(f"fdiv {t} {const(1, dt)}, {a[0]}") if fl else divmod_(Ops.IDIV, dt, "1", a[0], u.src[0])
      if op is Ops.ADD: return ins(f"{'or' if b else 'fadd' if fl else 'add'} {t} {a[0]}, {a[1]}")
      if op is Ops.SUB: return ins(f"{'fsub' if fl else 'sub'} {t} {a[0]}, {a[1]}")
      if op is Ops.MUL: return ins(f"{'and' if b else 'fmul' if fl else 'mul'} {t} {a[0]}, {a[1]}")
      if op is Ops.FDIV: return ins(f"fdiv {t} {a[0]}, {a[1]}")
      if op in (Ops.IDIV, Ops.MOD): return divmod_(op, dt, a[0], a[1], u.src[1])
      if op is Ops.MAX:
        if b: return ins(f"or i1 {a[0]}, {a[1]}")
        c = ins(f"or i1 {ins(f'fcmp ogt {t} {a[0]}, {a[1]}')}, {ins(f'fcmp uno {t} {a[0]}, {a[0]}')}") if fl else \
            ins(f"icmp {'ugt' if unsigned(dt) else 'sgt'} {t} {a[0]}, {a[1]}")   # a NaN in a wins, like the reference
        return ins(f"select i1 {c}, {t} {a[0]}, {t} {a[1]}")
      if op in (Ops.AND, Ops.OR, Ops.XOR, Ops.SHL): return ins(f"{op.name.lower()} {t} {a[0]}, {a[1]}")
      if op is Ops.SHR: return ins(f"{'lshr' if unsigned(dt) else 'ashr'} {t} {a[0]}, {a[1]}")
      if op is Ops.MULACC:
        m = ins(f"{'fmul' if fl else 'mul'} {t} {a[0]}, {a[1]}")
        return ins(f"{'fadd' if fl else 'add'} {t} {m}, {a[2]}")
      raise NotImplementedError(f"AMD LLVM renderer can't render {op.name} on {dt}")

    def address(ind: UOp, gate: str | None) -> str:
      idx = operand(ind.src[1], dtypes.int64)
      if gate is not None: idx = ins(f"select i1 {gate}, i64 {idx}, i64 0")   # a masked lane reads element 0, then discards it
      return ins(f"getelementptr inbounds {mtype(ind.src[0].dtype.base)}, ptr addrspace(1) {r[ind.src[0]]}, i64 {idx}")

    for u in uops:
      op = u.op
      if op is Ops.DEFINE_GLOBAL: r[u] = f"%data{u.arg}"; bufs.append((u.arg, r[u]))
      elif op is Ops.DEFINE_VAR:
        r[u] = "%var_" + "".join(c if c.isalnum() else "_" for c in u.arg[0]) + f"_{len(vars)}"; vars.append((u.arg[0], r[u]))
      elif op is Ops.CONST: r[u] = const(u.arg, u.dtype)
      elif op in (Ops.INDEX, Ops.NOOP, Ops.SINK): pass
      elif op is Ops.SPECIAL:
        d, local = "xyz"[int(u.arg[0][-1])], u.arg[1]
        st["threads"] *= local
        g = call(f"llvm.amdgcn.workgroup.id.{d}", "i32")
        idx = ins(f"add i32 {ins(f'mul i32 {g}, {local}')}, {call(f'llvm.amdgcn.workitem.id.{d}', 'i32')}") if local > 1 else g
        r[u] = idx
        ok = block()   # lanes past the bound retire (no barriers yet, so that's safe)
        emit(f"br i1 {ins(f'icmp slt i32 {idx}, {operand(u.src[0], dtypes.int32)}')}, label %{ok}, label %exit")
        label(ok)
      elif op is Ops.RANGE:
        k = len(loops); lp, iv, pre = f"L{k}", f"%i{k}", st["cur"]
        end = operand(u.src[0], dtypes.int32)
        r[u] = iv; loops[u] = (lp, iv)
        emit(f"br label %{lp}.h"); label(f"{lp}.h")
        emit(f"{iv} = phi i32 [0, %{pre}], [{iv}.n, %{lp}.l]")
        emit(f"%{lp}.c = icmp slt i32 {iv}, {end}")
        emit(f"br i1 %{lp}.c, label %{lp}.b, label %{lp}.x"); label(f"{lp}.b")
      elif op is Ops.END:
        lp, iv = loops[u.src[0]]
        emit(f"br label %{lp}.l"); label(f"{lp}.l")
        emit(f"{iv}.n = add nsw i32 {iv}, 1"); emit(f"br label %{lp}.h"); label(f"{lp}.x")
      elif op is Ops.DEFINE_REG:
        regs[u] = regs[u.src[0]] = f"%acc{u.arg[0]}"
        allocas.append(f"  %acc{u.arg[0]} = alloca {rtype(u.dtype)}, addrspace(5)")
        emit(f"store {rtype(u.dtype)} {const(u.arg[1], u.dtype)}, ptr addrspace(5) %acc{u.arg[0]}")
      elif op is Ops.ASSIGN: emit(f"store {rtype(u.src[0].dtype)} {operand(u.src[1], u.src[0].dtype)}, ptr addrspace(5) {regs[u.src[0]]}")
      elif op is Ops.REDUCE: r[u] = val(u); del regs[u]
      elif op is Ops.LOAD:
        ind = u.src[0]; bdt = ind.src[0].dtype.base
        gate = operand(ind.src[2], dtypes.bool) if len(ind.src) > 2 else None
        v = ins(f"load {mtype(bdt)}, ptr addrspace(1) {address(ind, gate)}")
        if bdt == dtypes.bool: v = ins(f"icmp ne i8 {v}, 0")
        elif bdt == dtypes.bfloat16: v = ins(f"fpext bfloat {ins(f'bitcast i16 {v} to bfloat')} to float")
        if bdt != u.dtype: v = cast(v, bdt, u.dtype)
        r[u] = ins(f"select i1 {gate}, {rtype(u.dtype)} {v}, {rtype(u.dtype)} {const(0, u.dtype)}") if gate else v
      elif op is Ops.STORE:
        ind = u.src[0]; bdt = ind.src[0].dtype.base
        v = operand(u.src[1], bdt)
        if bdt == dtypes.bool: v = ins(f"zext i1 {v} to i8")
        elif bdt == dtypes.bfloat16: v = ins(f"bitcast bfloat {ins(f'fptrunc float {v} to bfloat')} to i16")
        if len(ind.src) > 2:
          y, n = block(), block()
          emit(f"br i1 {operand(ind.src[2], dtypes.bool)}, label %{y}, label %{n}"); label(y)
          emit(f"store {mtype(bdt)} {v}, ptr addrspace(1) {address(ind, None)}"); emit(f"br label %{n}"); label(n)
        else: emit(f"store {mtype(bdt)} {v}, ptr addrspace(1) {address(ind, None)}")
      elif op is Ops.VECTORIZE:   # a tensor-core fragment (codegen/opt_tc.py)
        vt, et = f"<{u.dtype.count} x {rtype(u.dtype.scalar())}>", rtype(u.dtype.scalar())
        if all(x.op is Ops.CONST and x.arg == 0 for x in u.src): r[u] = "zeroinitializer"; continue
        v = "poison"
        for i, x in enumerate(u.src): v = ins(f"insertelement {vt} {v}, {et} {operand(x, u.dtype.scalar())}, i32 {i}")
        r[u] = v
      elif op is Ops.GEP: r[u] = ins(f"extractelement <{u.src[0].dtype.count} x {rtype(u.dtype)}> {r[u.src[0]]}, i32 {u.arg[0]}")
      elif op is Ops.WMMA: r[u] = self.wmma(u, [r[x] for x in u.src[:3]], call)
      elif op is Ops.CAST: r[u] = cast(val(u.src[0]), u.src[0].dtype, u.dtype)
      elif op is Ops.BITCAST: r[u] = self.bitcast(u, val(u.src[0]), ins)
      elif op in GroupOp.ALU: r[u] = alu(u)
      else: raise NotImplementedError(f"AMD LLVM renderer can't render {op.name}")

    params = [f"ptr addrspace(1) noalias {n}" for _, n in sorted(bufs)] + [f"i32 {n}" for _, n in sorted(vars)]
    # no hidden kernargs (this runtime passes none); the flat size caps registers like CUDA's launch bounds
    attrs = f'attributes #0 = {{ nounwind "amdgpu-flat-work-group-size"="1,{max(st["threads"], 1)}" "amdgpu-no-implicitarg-ptr" }}'
    out = ['target triple = "amdgcn-amd-amdhsa"', f'define amdgpu_kernel void @"{name}"({", ".join(params)}) #0 {{', "entry:", *allocas, *body,
           "  br label %exit", "exit:", "  ret void", "}", *sorted(decls), attrs,
           "!llvm.module.flags = !{!0}", '!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}']   # v5: what ld.lld 16+ and ROCm 6 load
    return "\n".join(out) + "\n"

  def wmma(self, u: UOp, args: list[str], call) -> str:
    """AMD's matrix intrinsics, half fragments in, float accumulators in and out (LLVM 17+ overloads WMMA on its types)."""
    (a, b, c), (na, nc) = args, (u.src[0].dtype.count, u.dtype.count)
    va, vc = f"<{na} x half>", f"<{nc} x float>"
    kind = u.arg[0].split("_16x16x16")[0]
    if kind == "mfma": return call("llvm.amdgcn.mfma.f32.16x16x16f16", vc, (va, a), (va, b), (vc, c), ("i32", "0"), ("i32", "0"), ("i32", "0"))
    return call(f"llvm.amdgcn.wmma.f32.16x16x16.f16.v{nc}f32.v{na}f16", vc, (va, a), (va, b), (vc, c))

  def bitcast(self, u: UOp, x: str, ins) -> str:
    src, dt = u.src[0].dtype, u.dtype
    if dtypes.bool in (src, dt) or src.itemsize != dt.itemsize: raise NotImplementedError(f"AMD LLVM renderer: bitcast {src} -> {dt}")
    ms, md = rtype(src), "i16" if dt == dtypes.bfloat16 else rtype(dt)
    if src == dtypes.bfloat16: x, ms = ins(f"bitcast bfloat {ins(f'fptrunc float {x} to bfloat')} to i16"), "i16"   # its stored bits
    v = x if ms == md else ins(f"bitcast {ms} {x} to {md}")
    return ins(f"fpext bfloat {ins(f'bitcast i16 {v} to bfloat')} to float") if dt == dtypes.bfloat16 else v
