"""LLVM IR for the host CPU, compiled in-process by llvmlite (no system compiler needed).

Walks the same linearized program as the C renderer: loops become header/body/latch blocks with a phi counter, each
accumulator (DEFINE_REG) is an alloca that the O2 pipeline promotes to registers, the first global loop runs
core_start..core_end (two trailing i32 params) so the runtime can split it across threads.
Registers: bool is i1 (i8 in memory); bfloat16/fp8 are float in registers and integers in memory, converted by small
always-inlined helper functions. No fast-math flags: NaN/inf behave as IEEE says."""
from __future__ import annotations
import math, struct
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType, dtypes, PtrDType
from tinycore.renderer import Renderer

EMULATED: dict[DType, DType] = {dtypes.bfloat16: dtypes.uint16, dtypes.fp8e4m3: dtypes.uint8, dtypes.fp8e5m2: dtypes.uint8}
_FLOATS = {dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double"}
_SFX = {"half": "f16", "float": "f32", "double": "f64"}

def ltype(dt: DType) -> str:
  """The register type."""
  if isinstance(dt, PtrDType): return "ptr"
  if dt.count > 1: raise NotImplementedError(f"LLVM renderer: vector dtype {dt} is not supported")
  if dt in EMULATED: return "float"
  if dt == dtypes.bool: return "i1"
  if dt == dtypes.void: return "void"
  return _FLOATS.get(dt) or f"i{dt.itemsize * 8}"
def mtype(dt: DType) -> str:
  """The in-memory type: bool is a byte, emulated floats are their storage integer."""
  if dt == dtypes.bool: return "i8"
  return ltype(EMULATED.get(dt, dt))
def _rdt(dt: DType) -> DType: return dtypes.float32 if dt in EMULATED else dt   # the dtype a register really holds
def is_float(dt: DType) -> bool: return dtypes.is_float(_rdt(dt))
def is_unsigned(dt: DType) -> bool: return dt == dtypes.bool or dtypes.is_unsigned(dt)

def lconst(v, dt: DType) -> str:
  dt = _rdt(dt)
  if dt == dtypes.bool: return "true" if v else "false"
  if dtypes.is_float(dt):
    v = float(v)
    if dt == dtypes.float16:
      try: return f"0xH{struct.unpack('<H', struct.pack('<e', v))[0]:04X}"
      except OverflowError: return "0xH7C00" if v > 0 else "0xHFC00"
    # float literals are written as the hex of a double that the float type holds exactly
    if dt == dtypes.float32 and math.isfinite(v):
      try: v = struct.unpack("<f", struct.pack("<f", v))[0]
      except OverflowError: v = math.copysign(math.inf, v)
    return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016X}"
  bits = dt.itemsize * 8
  v = int(v) & ((1 << bits) - 1)
  return str(v - (1 << bits) if v >= 1 << (bits - 1) else v)

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
  sub, minnorm, subinv = lconst(2.0 ** (1 - bias - m), dtypes.float32), lconst(2.0 ** (1 - bias), dtypes.float32), lconst(2.0 ** (bias - 1 + m), dtypes.float32)
  nan, inf, ninf = lconst(math.nan, dtypes.float32), lconst(math.inf, dtypes.float32), lconst(-math.inf, dtypes.float32)
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
  %big = fcmp ogt float %a, {lconst(maxf, dtypes.float32)}
  %c = select i1 %big, float {lconst(maxf, dtypes.float32)}, float %a
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
_HELPER_DEPS = {"__tc_to_fp8e4m3": ("llvm.fabs.f32", "llvm.roundeven.f32"), "__tc_to_fp8e5m2": ("llvm.fabs.f32", "llvm.roundeven.f32")}
_INTRINSIC_ARGS = {"pow": 2}

class LLVMRenderer(Renderer):
  name = "LLVM"
  device = "CPU"
  supports_float4 = False
  def __init__(self, compiler=None):
    from tinycore_cpu.compiler_llvm import LLVMCompiler
    from tinycore_cpu.runtime_llvm import LLVMProgram
    self.compiler = compiler or LLVMCompiler()
    self.runtime = LLVMProgram   # the object files this compiler makes are loaded by llvmlite's JIT, not dlopen

  def render(self, name: str, uops: list[UOp]) -> str:
    r: dict[UOp, str] = {}
    regs: dict[UOp, str] = {}        # DEFINE_REG (and the REDUCE it stands for) -> its alloca
    bufs: list[tuple[int, str]] = []
    vars: list[tuple[str, str]] = []
    allocas: list[str] = []
    body: list[str] = []
    used: set[str] = set()           # helper functions and intrinsics this kernel calls
    loops: dict[UOp, tuple[str, str]] = {}
    st = {"n": 0, "s": 0, "cur": "entry", "first_global": True}
    def tmp() -> str:
      st["n"] += 1
      return f"%t{st['n']}"
    def emit(s: str) -> None: body.append("  " + s)
    def ins(s: str) -> str:
      t = tmp(); emit(f"{t} = {s}"); return t
    def label(l: str) -> None: body.append(f"{l}:"); st["cur"] = l
    def val(s: UOp) -> str:
      # accumulators are re-read at every use: mem2reg turns these into phis
      if s in regs: return ins(f"load {ltype(s.dtype)}, ptr {regs[s]}")
      return r[s]
    def call(fn: str, ret: str, *args: tuple[str, str]) -> str:
      used.add(fn)
      return ins(f"call {ret} @{fn}({', '.join(f'{t} {a}' for t, a in args)})")
    def intrinsic(fn: str, dt: DType, *a: str) -> str:
      t = ltype(dt)
      return call(f"llvm.{fn}.{_SFX[t]}", t, *[(t, x) for x in a])

    def cast(x: str, src: DType, dt: DType) -> str:
      if dt in EMULATED:   # through float, then rounded to the format's grid (the register stays float)
        f = cast(x, src, dtypes.float32)
        return call(f"__tc_from_{dt.name}", "float", (mtype(dt), call(f"__tc_to_{dt.name}", mtype(dt), ("float", f))))
      src, dt = _rdt(src), _rdt(dt)
      st_, dt_ = ltype(src), ltype(dt)
      if dt == dtypes.bool:
        if src == dtypes.bool: return x
        return ins(f"fcmp une {st_} {x}, {lconst(0, src)}" if dtypes.is_float(src) else f"icmp ne {st_} {x}, 0")
      if src == dtypes.bool: return ins(f"{'uitofp' if dtypes.is_float(dt) else 'zext'} i1 {x} to {dt_}")
      if dtypes.is_float(src) and dtypes.is_float(dt):
        if src.itemsize == dt.itemsize: return x
        if src == dtypes.float64 and dt == dtypes.float16:
          # double->half is a libgcc call on x86 (__truncdfhf2); instead round to odd into float (exact for the second
          # rounding: float keeps >= 2*11+2 bits), then float->half with nearest-even is correctly rounded
          f = ins(f"fptrunc double {x} to float")
          back = ins(f"fpext float {f} to double")
          exact = ins(f"fcmp oeq double {back}, {x}")
          away = ins(f"fcmp ogt double {call('llvm.fabs.f64', 'double', ('double', back))}, {call('llvm.fabs.f64', 'double', ('double', x))}")
          u = ins(f"bitcast float {f} to i32")
          tz = ins(f"sub i32 {u}, {ins(f'zext i1 {away} to i32')}")   # toward zero, then the sticky bit
          odd = ins(f"select i1 {exact}, i32 {u}, i32 {ins(f'or i32 {tz}, 1')}")
          return ins(f"fptrunc float {ins(f'bitcast i32 {odd} to float')} to half")
        return ins(f"{'fpext' if dt.itemsize > src.itemsize else 'fptrunc'} {st_} {x} to {dt_}")
      if dtypes.is_float(dt): return ins(f"{'uitofp' if dtypes.is_unsigned(src) else 'sitofp'} {st_} {x} to {dt_}")
      if dtypes.is_float(src):
        # like C on x86: narrow targets convert through a wider signed int, so negatives wrap instead of being poison
        if dt.itemsize < 4 or dt == dtypes.uint32:
          w = "i64" if dt == dtypes.uint32 else "i32"
          return ins(f"trunc {w} {ins(f'fptosi {st_} {x} to {w}')} to {dt_}")
        return ins(f"{'fptoui' if dt == dtypes.uint64 else 'fptosi'} {st_} {x} to {dt_}")
      if src.itemsize == dt.itemsize: return x
      if dt.itemsize < src.itemsize: return ins(f"trunc {st_} {x} to {dt_}")
      return ins(f"{'zext' if dtypes.is_unsigned(src) else 'sext'} {st_} {x} to {dt_}")
    def operand(s: UOp, dt: DType) -> str:
      v = val(s)
      return v if ltype(s.dtype) == ltype(dt) else cast(v, s.dtype, dt)

    def divmod_(op: Ops, dt: DType, a: str, b: str, d: UOp) -> str:
      t, sgn = ltype(dt), not is_unsigned(dt)
      inst = ("sdiv" if sgn else "udiv") if op is Ops.IDIV else ("srem" if sgn else "urem")
      if d.op is Ops.CONST:
        if d.arg == 0: return lconst(0, dt)
        if not (sgn and d.arg == -1): return ins(f"{inst} {t} {a}, {b}")
      # x/0 is defined as 0 (it traps on x86) and MIN/-1 as the wrapped quotient (it traps too)
      z = ins(f"icmp eq {t} {b}, 0")
      bad = ins(f"or i1 {z}, {ins(f'icmp eq {t} {b}, -1')}") if sgn else z
      q = ins(f"{inst} {t} {a}, {ins(f'select i1 {bad}, {t} 1, {t} {b}')}")
      if sgn: q = ins(f"select i1 {bad}, {t} {ins(f'sub {t} 0, {a}') if op is Ops.IDIV else '0'}, {t} {q}")
      return ins(f"select i1 {z}, {t} 0, {t} {q}")

    def alu(u: UOp) -> str:
      op, dt = u.op, u.dtype
      if op in GroupOp.Comparison:
        sd = u.src[0].dtype
        a, b = val(u.src[0]), operand(u.src[1], sd)
        t = ltype(sd)
        if is_float(sd): return ins(f"fcmp {({Ops.CMPLT: 'olt', Ops.CMPNE: 'une', Ops.CMPEQ: 'oeq'})[op]} {t} {a}, {b}")
        return ins(f"icmp {({Ops.CMPLT: 'ult' if is_unsigned(sd) else 'slt', Ops.CMPNE: 'ne', Ops.CMPEQ: 'eq'})[op]} {t} {a}, {b}")
      if op is Ops.WHERE:
        c = operand(u.src[0], dtypes.bool)
        return ins(f"select i1 {c}, {ltype(dt)} {operand(u.src[1], dt)}, {ltype(dt)} {operand(u.src[2], dt)}")
      a = [operand(s, dt) for s in u.src]
      t, fl, b = ltype(dt), is_float(dt), dt == dtypes.bool
      if op is Ops.NEG: return ins(f"xor i1 {a[0]}, true" if b else f"fneg {t} {a[0]}" if fl else f"sub {t} 0, {a[0]}")
      if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.TRUNC, Ops.POW):
        if not fl: raise NotImplementedError(f"LLVM renderer: {op} on {dt}")
        return intrinsic(op.name.lower(), dt, *a)
      if op is Ops.RECIP:
        if fl: return ins(f"fdiv {t} {lconst(1, dt)}, {a[0]}")
        return divmod_(Ops.IDIV, dt, "1", a[0], u.src[0])
      if op is Ops.ADD: return ins(f"{'or' if b else 'fadd' if fl else 'add'} {t} {a[0]}, {a[1]}")
      if op is Ops.SUB: return ins(f"{'fsub' if fl else 'sub'} {t} {a[0]}, {a[1]}")
      if op is Ops.MUL: return ins(f"{'and' if b else 'fmul' if fl else 'mul'} {t} {a[0]}, {a[1]}")
      if op is Ops.FDIV: return ins(f"fdiv {t} {a[0]}, {a[1]}")
      if op in (Ops.IDIV, Ops.MOD): return divmod_(op, dt, a[0], a[1], u.src[1])
      if op is Ops.MAX:
        if b: return ins(f"or i1 {a[0]}, {a[1]}")
        if fl: c = ins(f"or i1 {ins(f'fcmp ogt {t} {a[0]}, {a[1]}')}, {ins(f'fcmp uno {t} {a[0]}, {a[0]}')}")   # NaN wins
        else: c = ins(f"icmp {'ugt' if is_unsigned(dt) else 'sgt'} {t} {a[0]}, {a[1]}")
        return ins(f"select i1 {c}, {t} {a[0]}, {t} {a[1]}")
      if op in (Ops.AND, Ops.OR, Ops.XOR, Ops.SHL): return ins(f"{op.name.lower()} {t} {a[0]}, {a[1]}")
      if op is Ops.SHR: return ins(f"{'lshr' if is_unsigned(dt) else 'ashr'} {t} {a[0]}, {a[1]}")
      if op is Ops.MULACC:
        m = ins(f"{'fmul' if fl else 'mul'} {t} {a[0]}, {a[1]}")
        return ins(f"{'fadd' if fl else 'add'} {t} {m}, {a[2]}")
      raise NotImplementedError(f"LLVM renderer can't render {op} on {dt}")

    def address(ind: UOp, gate: str | None) -> str:
      buf = ind.src[0]
      idx = operand(ind.src[1], dtypes.int64)
      if gate is not None: idx = ins(f"select i1 {gate}, i64 {idx}, i64 0")   # an invalid lane reads element 0, then discards it
      return ins(f"getelementptr inbounds {mtype(buf.dtype.base)}, ptr {r[buf]}, i64 {idx}")

    for u in uops:
      op = u.op
      if op is Ops.DEFINE_GLOBAL:
        r[u] = f"%data{u.arg}"
        bufs.append((u.arg, r[u]))
      elif op is Ops.DEFINE_VAR:
        r[u] = "%var_" + "".join(c if c.isalnum() else "_" for c in u.arg[0]) + f"_{len(vars)}"
        vars.append((u.arg[0], r[u]))
      elif op is Ops.CONST: r[u] = lconst(u.arg, u.dtype)
      elif op is Ops.INDEX: pass   # folded into its LOAD/STORE
      elif op is Ops.RANGE:
        first = u.arg[0] == "g" and st["first_global"]
        if u.arg[0] == "g": st["first_global"] = False
        k = len(loops)
        start, end = ("%core_start", "%core_end") if first else ("0", operand(u.src[0], dtypes.int32))
        pre, lp = st["cur"], f"L{k}"
        r[u] = f"%i{k}"
        loops[u] = (lp, r[u])
        emit(f"br label %{lp}.h")
        label(f"{lp}.h")
        emit(f"{r[u]} = phi i32 [{start}, %{pre}], [{r[u]}.n, %{lp}.l]")
        emit(f"%{lp}.c = icmp slt i32 {r[u]}, {end}")
        emit(f"br i1 %{lp}.c, label %{lp}.b, label %{lp}.x")
        label(f"{lp}.b")
      elif op is Ops.END:
        lp, iv = loops[u.src[0]]
        emit(f"br label %{lp}.l")
        label(f"{lp}.l")
        emit(f"{iv}.n = add nsw i32 {iv}, 1")
        emit(f"br label %{lp}.h")
        label(f"{lp}.x")
      elif op is Ops.DEFINE_REG:
        regs[u] = regs[u.src[0]] = f"%acc{u.arg[0]}"
        allocas.append(f"  %acc{u.arg[0]} = alloca {ltype(u.dtype)}")
        emit(f"store {ltype(u.dtype)} {lconst(u.arg[1], u.dtype)}, ptr %acc{u.arg[0]}")   # re-initialized each time its scope runs
      elif op is Ops.ASSIGN: emit(f"store {ltype(u.src[0].dtype)} {operand(u.src[1], u.src[0].dtype)}, ptr {regs[u.src[0]]}")
      elif op is Ops.REDUCE:
        r[u] = val(u)   # after its loops: the final value of the accumulator
        del regs[u]
      elif op is Ops.LOAD:
        ind = u.src[0]
        bdt = ind.src[0].dtype.base
        gate = operand(ind.src[2], dtypes.bool) if len(ind.src) > 2 else None
        v = ins(f"load {mtype(bdt)}, ptr {address(ind, gate)}")
        if bdt == dtypes.bool: v = ins(f"icmp ne i8 {v}, 0")
        elif bdt in EMULATED: v = call(f"__tc_from_{bdt.name}", "float", (mtype(bdt), v))
        if ltype(bdt) != ltype(u.dtype): v = cast(v, bdt, u.dtype)
        r[u] = ins(f"select i1 {gate}, {ltype(u.dtype)} {v}, {ltype(u.dtype)} {lconst(0, u.dtype)}") if gate else v
      elif op is Ops.STORE:
        ind = u.src[0]
        bdt = ind.src[0].dtype.base
        v = operand(u.src[1], bdt)
        if bdt == dtypes.bool: v = ins(f"zext i1 {v} to i8")
        elif bdt in EMULATED: v = call(f"__tc_to_{bdt.name}", mtype(bdt), ("float", v))
        if len(ind.src) > 2:
          gate, k = operand(ind.src[2], dtypes.bool), st["s"]
          st["s"] += 1
          emit(f"br i1 {gate}, label %S{k}.y, label %S{k}.n")
          label(f"S{k}.y")
          emit(f"store {mtype(bdt)} {v}, ptr {address(ind, None)}")
          emit(f"br label %S{k}.n")
          label(f"S{k}.n")
        else: emit(f"store {mtype(bdt)} {v}, ptr {address(ind, None)}")
      elif op is Ops.CAST: r[u] = cast(val(u.src[0]), u.src[0].dtype, u.dtype)
      elif op is Ops.BITCAST: r[u] = self.bitcast(u, val(u.src[0]), ins, call)
      elif op in GroupOp.ALU: r[u] = alu(u)
      elif op in (Ops.NOOP, Ops.SINK): pass
      else: raise NotImplementedError(f"LLVM renderer can't render {op}")

    params = [f"ptr noalias {n}" for _, n in sorted(bufs)] + [f"i32 {n}" for _, n in sorted(vars)] + ["i32 %core_start", "i32 %core_end"]
    out = [f"define void @\"{name}\"({', '.join(params)}) nounwind {{", "entry:", *allocas, *body, "  ret void", "}"]
    for fn in sorted(used):
      for d in _HELPER_DEPS.get(fn, ()): used.add(d)
    for fn in sorted(used):
      if fn in HELPERS: out.append(HELPERS[fn])
      else:
        t = {"f16": "half", "f32": "float", "f64": "double"}[fn.rsplit(".", 1)[1]]
        out.append(f"declare {t} @{fn}({', '.join([t] * _INTRINSIC_ARGS.get(fn.split('.')[1], 1))})")
    return "\n".join(out) + "\n"

  def bitcast(self, u: UOp, x: str, ins, call) -> str:
    src, dt = u.src[0].dtype, u.dtype
    if src in EMULATED: x, src = call(f"__tc_to_{src.name}", mtype(src), ("float", x)), EMULATED[src]   # the stored bits
    tgt = EMULATED.get(dt, dt)
    if dtypes.bool in (src, tgt) or src.itemsize != tgt.itemsize: raise NotImplementedError(f"LLVM renderer: bitcast {src} -> {dt}")
    v = x if ltype(src) == ltype(tgt) else ins(f"bitcast {ltype(src)} {x} to {ltype(tgt)}")
    return call(f"__tc_from_{dt.name}", "float", (mtype(dt), v)) if dt in EMULATED else v
