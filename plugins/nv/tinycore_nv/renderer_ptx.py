"""PTX straight from the linearized program (DEV=NV:PTX): no NVRTC, assembled by ptxas or the driver's JIT.

Each uop gets a fresh virtual register (ptxas allocates the real ones). Predicates hold bool; 8-bit ints live in 16-bit
registers and are re-wrapped after arithmetic; half/bfloat16/fp8 are f32 in registers and converted at loads, stores
and casts with cvt (bf16 stores need sm_80, fp8 needs sm_89). Loops are branches around a counter; thread indices
past their bound branch to the exit. Transcendentals use the .approx instructions (f64 goes through f32)."""
from __future__ import annotations
import struct
from tinycore.codegen.index_width import index_dtype
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType, dtypes
from tinycore.renderer import Renderer, workgroup_threads
from tinycore_nv.renderer_cuda import parse_arch

EMULATED = {dtypes.float16: "b16", dtypes.bfloat16: "b16", dtypes.fp8e4m3: "b8", dtypes.fp8e5m2: "b8"}   # their memory type
RT = {dtypes.bool: "pred", dtypes.int8: "s16", dtypes.uint8: "u16", dtypes.int16: "s16", dtypes.uint16: "u16", dtypes.int32: "s32",
      dtypes.uint32: "u32", dtypes.int64: "s64", dtypes.uint64: "u64", dtypes.float32: "f32", dtypes.float64: "f64", dtypes.index: "s32"}
PREFIX = {"pred": "%p", "s16": "%rs", "u16": "%rus", "s32": "%r", "u32": "%ru", "s64": "%rd", "u64": "%rdu", "f32": "%f", "f64": "%fd",
          "b16": "%h", "b32": "%rb"}

def rdt(dt: DType) -> DType: return dtypes.float32 if dt in EMULATED else dtypes.int32 if dt == dtypes.index else dt
def rtype(dt: DType) -> str: return RT[rdt(dt)]
def mtype(dt: DType) -> str:
  if dt == dtypes.bool: return "u8"
  if dt in EMULATED: return EMULATED[dt]
  return {dtypes.int8: "s8", dtypes.uint8: "u8"}.get(dt, RT[rdt(dt)])
def btype(t: str) -> str: return "pred" if t == "pred" else f"b{t[1:]}"
def isf(t: str) -> bool: return t[0] == "f"
S32, F32 = "s32", "f32"   # for use inside nested f-strings

def imm(v, t: str) -> str:
  if t == "f32":
    try: return "0f%08X" % struct.unpack("<I", struct.pack("<f", float(v)))[0]
    except OverflowError: return "0f7F800000" if v > 0 else "0fFF800000"
  if t == "f64": return "0d%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]
  bits = int(t[1:])
  v = int(v) & ((1 << bits) - 1)
  return str(v - (1 << bits) if t[0] == "s" and v >= 1 << (bits - 1) else v)

def ptx_version(arch: str) -> str:
  n = int(arch[3:].rstrip("af"))
  return "8.7" if n >= 120 else "8.6" if n >= 100 else "7.8"

class PTXRenderer(Renderer):
  name, device = "PTX", "NV"
  has_local, has_shared = True, True
  global_max = (2**31 - 1, 65535, 65535)
  local_max = (1024, 1024, 64)
  shared_max = 48 * 1024
  tensor_cores = []
  supports_float4 = False
  index_widths = (32,)   # registers for indices are .s32: a kernel past 2**31-1 elements is refused with a clear error (use CUDA)
  def __init__(self, arch: str | None = None, compiler=None):
    self.arch = parse_arch(arch)
    self._compiler = compiler
  def make_compiler(self):
    from tinycore_nv.ptxas import PTXCompiler
    return PTXCompiler(self.arch)

  def render(self, name: str, uops: list[UOp]) -> str:
    index_dtype(uops, self)   # refuses a kernel whose indices need more than index_widths allows
    sm = int(self.arch[3:].rstrip("af"))
    counts: dict[str, int] = {}
    body: list[str] = []
    r: dict[UOp, str] = {}
    params: list[str] = []
    loops: dict[UOp, int] = {}
    preds: dict = {}   # shared registers: bool constants, a zero half-word
    threads = workgroup_threads(uops)
    def reg(t: str) -> str:
      n = counts.get(t, 0); counts[t] = n + 1
      return f"{PREFIX[t]}{n}"
    def emit(s: str) -> None: body.append("\t" + s)
    def new(t: str, ins: str) -> str:
      d = reg(t); emit(ins.format(d=d)); return d
    def val(u: UOp, t: str | None = None) -> str:
      """u's register, or an immediate for a constant (a predicate register for a bool constant)."""
      t = t or rtype(u.dtype)
      if u.op is Ops.CONST:
        if t != "pred": return imm(u.arg, t)
        if bool(u.arg) not in preds: preds[bool(u.arg)] = new("pred", f"setp.ne.s32 {{d}}, {int(bool(u.arg))}, 0;")
        return preds[bool(u.arg)]
      x = r[u]
      return x if rtype(u.dtype) == t else cast(x, rdt(u.dtype), {v: k for k, v in RT.items() if k != dtypes.index}[t])
    def reg_of(u: UOp) -> str:   # instructions whose first source must be a register
      x = val(u)
      return x if x.startswith("%") else new(rtype(u.dtype), f"mov.{btype(rtype(u.dtype)) if rtype(u.dtype) != 'pred' else 'pred'} {{d}}, {x};")
    def wrap8(x: str, dt: DType) -> str:
      # int8/uint8 live in 16-bit registers: keep them in range after arithmetic
      if dt in (dtypes.int8, dtypes.uint8): emit(f"cvt.{'s8.s16' if dt == dtypes.int8 else 'u8.u16'} {x}, {x};")
      return x

    def cast(x: str, src: DType, dt: DType) -> str:
      """Convert register x holding `src` (a register dtype) to `dt`; emulated targets are rounded to their grid."""
      if dt in EMULATED: return from_bits(to_bits(cast(x, src, dtypes.float32), dt), dt)
      src, dt = rdt(src), rdt(dt)
      st, t = RT[src], RT[dt]
      if src == dt: return x
      if t == "pred": return new("pred", f"setp.{'neu' if isf(st) else 'ne'}.{st} {{d}}, {x}, {imm(0, st)};")
      if st == "pred": return new(t, f"selp.{t if t not in ('s16', 'u16') else 'b16'} {{d}}, {imm(1, t)}, {imm(0, t)}, {x};")
      if isf(st) and isf(t): return new(t, f"cvt{'.rn' if dt.itemsize < src.itemsize else ''}.{t}.{st} {{d}}, {x};")
      if isf(t): return new(t, f"cvt.rn.{t}.{st} {{d}}, {x};")
      if isf(st):
        # like C on x86: narrow targets go through a wider signed int, so negatives wrap
        if dt.itemsize < 4 or dt == dtypes.uint32:
          wide = "s64" if dt == dtypes.uint32 else "s32"   # a uint32 result goes through s64 (its range doesn't fit s32)
          return cast(new(wide, f"cvt.rzi.{wide}.{st} {{d}}, {x};"), dtypes.int64 if dt == dtypes.uint32 else dtypes.int32, dt)
        return new(t, f"cvt.rzi.{t}.{st} {{d}}, {x};")
      if dt in (dtypes.int8, dtypes.uint8): return new(t, f"cvt.{mtype(dt)}.{st} {{d}}, {x};")
      if dt.itemsize == src.itemsize: return new(t, f"mov.{btype(t)} {{d}}, {x};")
      return new(t, f"cvt.{t}.{st} {{d}}, {x};")
    def to_bits(x: str, dt: DType) -> str:
      """f32 register -> the storage bits of emulated `dt` (in a 16-bit register)."""
      if dt == dtypes.float16: return new("b16", f"cvt.rn.f16.f32 {{d}}, {x};")
      if dt == dtypes.bfloat16:
        if sm < 80: raise NotImplementedError(f"PTX renderer: bfloat16 stores need sm_80+, not {self.arch}")
        return new("b16", f"cvt.rn.bf16.f32 {{d}}, {x};")
      if sm < 89: raise NotImplementedError(f"PTX renderer: {dt.name} needs sm_89+, not {self.arch} (DEV=NV:CUDA emulates it anywhere)")
      return new("b16", f"cvt.rn.satfinite.{'e4m3x2' if dt == dtypes.fp8e4m3 else 'e5m2x2'}.f32 {{d}}, {x}, {x};")
    def from_bits(x: str, dt: DType) -> str:
      """The storage bits of emulated `dt` (16-bit register) -> f32."""
      if dt == dtypes.float16: return new("f32", f"cvt.f32.f16 {{d}}, {x};")
      if dt == dtypes.bfloat16:
        if "zero" not in preds: preds["zero"] = new("b16", "mov.b16 {d}, 0;")
        return new("f32", f"mov.b32 {{d}}, {{{{{preds['zero']}, {x}}}}};")   # the bits are the top half of a float
      if sm < 89: raise NotImplementedError(f"PTX renderer: {dt.name} needs sm_89+, not {self.arch} (DEV=NV:CUDA emulates it anywhere)")
      h2 = new("b32", f"cvt.rn.f16x2.{'e4m3x2' if dt == dtypes.fp8e4m3 else 'e5m2x2'} {{d}}, {x};")
      lo, hi = reg("b16"), reg("b16")
      emit(f"mov.b32 {{{lo}, {hi}}}, {h2};")
      return new("f32", f"cvt.f32.f16 {{d}}, {lo};")

    def address(ind: UOp) -> str:
      base, idx, size = r[ind.src[0]], ind.src[1], ind.src[0].dtype.base.itemsize
      if idx.op is Ops.CONST: return new("u64", f"add.s64 {{d}}, {base}, {int(idx.arg) * size};")
      off = new("s64", f"mul.wide.s32 {{d}}, {val(idx, 's32')}, {size};")
      return new("u64", f"add.s64 {{d}}, {base}, {off};")

    def alu(u: UOp) -> str:
      op, dt = u.op, u.dtype
      if op in GroupOp.Comparison:
        st = rtype(u.src[0].dtype)
        a, b = reg_of(u.src[0]), val(u.src[1], st)
        if st == "pred":
          if op is Ops.CMPNE: return new("pred", f"xor.pred {{d}}, {a}, {b};")
          if op is Ops.CMPEQ: return new("pred", f"not.pred {{d}}, {new('pred', f'xor.pred {{d}}, {a}, {b};')};")
          return new("pred", f"and.pred {{d}}, {new('pred', f'not.pred {{d}}, {a};')}, {b};")   # a < b: !a & b
        cmp = {Ops.CMPLT: "lt", Ops.CMPNE: "neu" if isf(st) else "ne", Ops.CMPEQ: "eq"}[op]
        return new("pred", f"setp.{cmp}.{st} {{d}}, {a}, {b};")
      t = rtype(dt)
      if op is Ops.WHERE:
        c = val(u.src[0], "pred")
        a, b = val(u.src[1], t), val(u.src[2], t)
        if t != "pred": return new(t, f"selp.{t if t not in ('s16', 'u16') else 'b16'} {{d}}, {a}, {b}, {c};")
        nc = new("pred", f"not.pred {{d}}, {c};")
        ca, ncb = new("pred", f"and.pred {{d}}, {c}, {a};"), new("pred", f"and.pred {{d}}, {nc}, {b};")
        return new("pred", f"or.pred {{d}}, {ca}, {ncb};")
      a = [val(s, t) for s in u.src]
      if a and not a[0].startswith("%"): a[0] = reg_of(u.src[0]) if rtype(u.src[0].dtype) == t else new(t, f"mov.{btype(t)} {{d}}, {a[0]};")
      f, bt = isf(t), btype(t)
      if t == "pred":
        bop = {Ops.ADD: "or", Ops.OR: "or", Ops.MAX: "or", Ops.MUL: "and", Ops.AND: "and", Ops.XOR: "xor"}.get(op)
        if op is Ops.NEG: return new("pred", f"not.pred {{d}}, {a[0]};")
        if bop is None: raise NotImplementedError(f"PTX renderer can't render {op.name} on bool")
        return new("pred", f"{bop}.pred {{d}}, {a[0]}, {a[1]};")
      if op is Ops.NEG: return wrap8(new(t, f"neg.{t if f else 's' + t[1:]} {{d}}, {a[0]};"), dt)
      if op in (Ops.EXP2, Ops.LOG2, Ops.SIN):
        if not f: raise NotImplementedError(f"PTX renderer: {op.name} on {dt}")
        ins = {Ops.EXP2: "ex2.approx.f32", Ops.LOG2: "lg2.approx.f32", Ops.SIN: "sin.approx.f32"}[op]
        if t == "f64":
          x = new("f32", f"cvt.rn.f32.f64 {{d}}, {a[0]};")
          return new("f64", f"cvt.f64.f32 {{d}}, {new('f32', f'{ins} {{d}}, {x};')};")
        return new(t, f"{ins} {{d}}, {a[0]};")
      if op is Ops.POW:   # 2^(b*log2(a)): non-negative bases only; x**0 is 1 even where 0*log2(x) is nan (x = 0, inf)
        if t != "f32": raise NotImplementedError(f"PTX renderer: POW on {dt}")
        lg = new(t, f"lg2.approx.f32 {{d}}, {a[0]};")
        r = new(t, f"ex2.approx.f32 {{d}}, {new(t, f'mul.f32 {{d}}, {a[1]}, {lg};')};")
        return new(t, f"selp.f32 {{d}}, {imm(1.0, t)}, {r}, {new('pred', f'setp.eq.f32 {{d}}, {a[1]}, {imm(0.0, t)};')};")
      if op is Ops.SQRT: return new(t, f"sqrt.rn.{t} {{d}}, {a[0]};")
      if op is Ops.TRUNC: return new(t, f"cvt.rzi.{t}.{t} {{d}}, {a[0]};")
      if op is Ops.RECIP:
        if not f: raise NotImplementedError(f"PTX renderer: RECIP on {dt}")
        return new(t, f"rcp.rn.{t} {{d}}, {a[0]};")
      if op in (Ops.ADD, Ops.SUB): return wrap8(new(t, f"{op.name.lower()}.{t} {{d}}, {a[0]}, {a[1]};"), dt)
      if op is Ops.MUL: return wrap8(new(t, f"mul{'' if f else '.lo'}.{t} {{d}}, {a[0]}, {a[1]};"), dt)
      if op is Ops.FDIV: return new(t, f"div.rn.{t} {{d}}, {a[0]}, {a[1]};")
      if op in (Ops.IDIV, Ops.MOD):
        ins = "div" if op is Ops.IDIV else "rem"
        q = new(t, f"{ins}.{t} {{d}}, {a[0]}, {a[1]};")
        if u.src[1].op is Ops.CONST and u.src[1].arg != 0: return wrap8(q, dt)
        z = new("pred", f"setp.eq.{t} {{d}}, {a[1]}, 0;")   # x/0 and x%0 are 0, like the reference
        return wrap8(new(t, f"selp.{bt} {{d}}, 0, {q}, {z};"), dt)
      if op is Ops.MAX:
        if not f: return new(t, f"max.{t} {{d}}, {a[0]}, {a[1]};")
        # NaN wins, like the C renderers: a > b || a != a ? a : b
        gt, nan = new("pred", f"setp.gt.{t} {{d}}, {a[0]}, {a[1]};"), new("pred", f"setp.nan.{t} {{d}}, {a[0]}, {a[0]};")
        c = new("pred", f"or.pred {{d}}, {gt}, {nan};")
        return new(t, f"selp.{t} {{d}}, {a[0]}, {a[1]}, {c};")
      if op in (Ops.AND, Ops.OR, Ops.XOR): return new(t, f"{op.name.lower()}.{bt} {{d}}, {a[0]}, {a[1]};")
      if op in (Ops.SHL, Ops.SHR):
        sh = a[1] if not a[1].startswith("%") else val(u.src[1], "u32")
        ins = f"shl.{bt}" if op is Ops.SHL else f"shr.{t}"
        return wrap8(new(t, f"{ins} {{d}}, {a[0]}, {sh};"), dt)
      if op is Ops.MULACC: return wrap8(new(t, f"{'fma.rn' if f else 'mad.lo'}.{t} {{d}}, {a[0]}, {a[1]}, {a[2]};"), dt)
      raise NotImplementedError(f"PTX renderer can't render {op.name} on {dt}")

    for u in uops:
      op = u.op
      if op is Ops.DEFINE_GLOBAL:
        params.append((u.arg, f".param .u64 data{u.arg}"))
        r[u] = new("u64", f"cvta.to.global.u64 {{d}}, {new('u64', f'ld.param.u64 {{d}}, [data{u.arg}];')};")
      elif op is Ops.DEFINE_VAR:
        pname = "var_" + "".join(c if c.isalnum() else "_" for c in u.arg[0])
        params.append((10**9 + len(params), f".param .s32 {pname}"))
        r[u] = new("s32", f"ld.param.s32 {{d}}, [{pname}];")
      elif op is Ops.CONST: pass   # immediates at their uses
      elif op in (Ops.INDEX, Ops.NOOP, Ops.SINK, Ops.REDUCE): pass   # folded into LOAD/STORE; REDUCE is its accumulator
      elif op is Ops.SPECIAL:
        d, local = "xyz"[int(u.arg[0][-1])], u.arg[1]
        blk = new("s32", f"mov.u32 {{d}}, %ctaid.{d};")
        r[u] = new("s32", f"mad.lo.s32 {{d}}, {blk}, {local}, {new('s32', f'mov.u32 {{d}}, %tid.{d};')};") if local > 1 else blk
        emit(f"@{new('pred', f'setp.ge.s32 {{d}}, {r[u]}, {val(u.src[0], S32)};')} bra $exit;")   # retire threads past the bound
      elif op is Ops.RANGE:
        k = loops[u] = len(loops)
        r[u] = new("s32", "mov.s32 {d}, 0;")
        body.append(f"$L{k}:")
        emit(f"@{new('pred', f'setp.ge.s32 {{d}}, {r[u]}, {val(u.src[0], S32)};')} bra $L{k}_end;")
      elif op is Ops.END:
        k, iv = loops[u.src[0]], r[u.src[0]]
        emit(f"add.s32 {iv}, {iv}, 1;")
        emit(f"bra $L{k};")
        body.append(f"$L{k}_end:")
      elif op is Ops.DEFINE_REG:
        t = rtype(u.dtype)
        r[u] = r[u.src[0]] = reg(t)
        emit(f"mov.{btype(t) if t != 'pred' else 'pred'} {r[u]}, {imm(u.arg[1], t) if t != 'pred' else val(UOp.const(dtypes.bool, bool(u.arg[1])))};")
      elif op is Ops.ASSIGN:
        t = rtype(u.src[0].dtype)
        emit(f"mov.{btype(t) if t != 'pred' else 'pred'} {r[u.src[0]]}, {val(u.src[1], t)};")
      elif op is Ops.LOAD:
        ind = u.src[0]
        bdt, gate = ind.src[0].dtype.base, (val(ind.src[2], "pred") if len(ind.src) > 2 else None)
        mt = mtype(bdt)
        lt = {"u8": "u16", "s8": "s16", "b8": "b16"}.get(mt, mt)
        addr = address(ind)
        x = reg(lt)
        if gate: emit(f"mov.{btype(lt)} {x}, {imm(0, lt)};")   # an invalid lane reads 0
        emit(f"{'@' + gate + ' ' if gate else ''}ld.global.{mt} {x}, [{addr}];")
        if bdt == dtypes.bool: x = new("pred", f"setp.ne.u16 {{d}}, {x}, 0;")
        elif bdt in EMULATED: x = from_bits(x, bdt)
        r[u] = x if rtype(bdt) == rtype(u.dtype) else cast(x, rdt(bdt), u.dtype)
      elif op is Ops.STORE:
        ind = u.src[0]
        bdt = ind.src[0].dtype.base
        x = val(u.src[1], rtype(bdt))
        if bdt == dtypes.bool: x = new("u16", f"selp.u16 {{d}}, 1, 0, {x};")
        elif bdt in EMULATED: x = to_bits(x if x.startswith("%") else reg_of(u.src[1]), bdt)
        gate = f"@{val(ind.src[2], 'pred')} " if len(ind.src) > 2 else ""
        emit(f"{gate}st.global.{mtype(bdt)} [{address(ind)}], {x};")
      elif op is Ops.CAST: r[u] = cast(reg_of(u.src[0]), u.src[0].dtype, u.dtype)
      elif op is Ops.BITCAST:
        src, dt = u.src[0].dtype, u.dtype
        x = reg_of(u.src[0])
        if src in EMULATED: x = to_bits(x, src)
        if src.itemsize != dt.itemsize or dtypes.bool in (src, dt): raise NotImplementedError(f"PTX renderer: bitcast {src} -> {dt}")
        t = "b16" if dt in EMULATED else rtype(dt)
        if dt.itemsize == 1: x = new(t, f"mov.b16 {{d}}, {x};")   # 8-bit values sit in 16-bit registers
        else: x = new(t, f"mov.b{dt.itemsize * 8} {{d}}, {x};")
        r[u] = from_bits(x, dt) if dt in EMULATED else x
      elif op in GroupOp.ALU: r[u] = alu(u)
      else: raise NotImplementedError(f"PTX renderer can't render {op.name}")

    decl = [f"\t.reg .{t} {PREFIX[t]}<{n}>;" for t, n in counts.items()]
    plist = ",\n".join("\t" + p for _, p in sorted(params))
    return "\n".join([f".version {ptx_version(self.arch)}", f".target {self.arch}", ".address_size 64", "",
      f".visible .entry {name}(\n{plist}\n) .maxntid {threads}, 1, 1\n{{", *decl, *body, "$exit:", "\tret;", "}", ""])
