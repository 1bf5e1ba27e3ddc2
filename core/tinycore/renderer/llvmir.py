"""The shared LLVM IR renderer: the host CPU (llvmlite MCJIT) and AMDGPU (llvmlite's amdgcn backend) specialize it.

One walk over the linearized program: loops become header/body/latch blocks with a phi counter, each accumulator
(DEFINE_REG) is an alloca that LLVM promotes to registers, loads and stores take an optional gate. bool is i1 in
registers (i8 in memory); the `emulated` formats are float in registers and their storage integer in memory, and the
subclass says how to convert (to_bits/from_bits). No fast-math flags: NaN/inf behave as IEEE says.
A subclass supplies the address spaces, the kernel signature and module (`kernel`), and where it differs: thread
indices (`special`), loop bounds, math intrinsics, tensor cores (`wmma`)."""
from __future__ import annotations
import copy, math, struct
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType, dtypes, PtrDType
from tinycore.renderer import Renderer
from tinycore.codegen.index_width import index_dtype, IndexWidthError, INT32_MIN, INT32_MAX

_FLOATS = {dtypes.float16: "half", dtypes.float32: "float", dtypes.float64: "double"}
SFX = {"half": "f16", "float": "f32", "double": "f64"}   # the type suffix of intrinsic names

def const(v, dt: DType) -> str:
  """The literal of a native (not emulated) dtype."""
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

class LLVMIRRenderer(Renderer):
  supports_float4 = False
  buf_space, acc_space = 0, 0           # address spaces of the buffers and of the accumulator allocas
  emulated: dict[DType, DType] = {}     # float in registers, this integer in memory
  var_arg_bits = 32                     # the width of a Variable's kernel argument: a wider bound range is refused
  index_dtype = dtypes.int32            # the current kernel's index type, set by render (codegen/index_width.py)
  # one kernel's state, set on the copy render() works on
  r: dict[UOp, str]; regs: dict[UOp, str]; loops: dict; used: dict[str, str]
  bufs: list; var_args: list; allocas: list[str]; body: list[str]
  n: int; blocks: int; cur: str

  # ---- types and literals
  @property
  def what(self) -> str: return f"{self.device} LLVM renderer"   # for error messages
  @staticmethod
  def ptr(space: int) -> str: return f"ptr addrspace({space})" if space else "ptr"
  def ltype(self, dt: DType) -> str:
    """The register type."""
    if isinstance(dt, PtrDType): return self.ptr(self.buf_space)
    if dt.count > 1: raise NotImplementedError(f"{self.what}: vector dtype {dt} is not supported")
    if dt in self.emulated: return "float"
    if dt == dtypes.bool: return "i1"
    if dt == dtypes.void: return "void"
    if dt == dtypes.index: dt = self.index_dtype
    return _FLOATS.get(dt) or f"i{dt.itemsize * 8}"
  def mtype(self, dt: DType) -> str:
    """The in-memory type: bool is a byte, emulated floats are their storage integer."""
    return "i8" if dt == dtypes.bool else self.ltype(self.emulated.get(dt, dt))
  def rdt(self, dt: DType) -> DType:   # the dtype a register really holds
    return dtypes.float32 if dt in self.emulated else self.index_dtype if dt == dtypes.index else dt
  def const(self, v, dt: DType) -> str: return const(v, self.rdt(dt))
  def unsigned(self, dt: DType) -> bool: return dt == dtypes.bool or dtypes.is_unsigned(dt)

  # ---- what a subclass supplies
  def kernel(self, name: str, params: list[str], uops: list[UOp]) -> str:
    """The module: the function around self.allocas and self.body, and the declarations in self.used."""
    raise NotImplementedError(f"{type(self).__name__} must implement kernel")
  def to_bits(self, x: str, dt: DType) -> str: raise NotImplementedError(f"{self.what}: {dt}")     # emulated float -> storage int
  def from_bits(self, x: str, dt: DType) -> str: raise NotImplementedError(f"{self.what}: {dt}")   # storage int -> float
  def round_to(self, x: str, dt: DType) -> str: return self.from_bits(self.to_bits(x, dt), dt)   # a float onto dt's grid
  def special(self, u: UOp) -> str: raise NotImplementedError(f"{self.what} has no thread indices (SPECIAL)")
  def space(self, buf: UOp) -> int: return self.buf_space   # the address space of a buffer (a GPU's shared memory differs)
  def wmma(self, u: UOp, a: str, b: str, c: str) -> str: raise NotImplementedError(f"{self.what} has no tensor cores")
  def range_bounds(self, u: UOp) -> tuple[str, str]: return "0", self.operand(u.src[0], dtypes.index)
  def math(self, fn: str, dt: DType, *a: str) -> str:
    t = self.ltype(dt)
    return self.call(f"llvm.{fn}.{SFX[t]}", t, *[(t, x) for x in a])
  def f64_to_f16(self, x: str) -> str: return self.ins(f"fptrunc double {x} to half")

  # ---- emitting (the per-kernel state lives on the copy that render makes)
  def emit(self, s: str) -> None: self.body.append("  " + s)
  def ins(self, s: str) -> str:
    self.n += 1
    t = f"%t{self.n}"
    self.emit(f"{t} = {s}")
    return t
  def label(self, l: str) -> None: self.body.append(f"{l}:"); self.cur = l
  def block(self) -> str:
    self.blocks += 1
    return f"B{self.blocks}"
  def val(self, s: UOp) -> str:
    # accumulators are re-read at every use: mem2reg/SROA turn these loads into phis
    return self.ins(f"load {self.ltype(s.dtype)}, {self.ptr(self.acc_space)} {self.regs[s]}") if s in self.regs else self.r[s]
  def call(self, fn: str, ret: str, *args: tuple[str, str]) -> str:
    self.used[fn] = f"declare {ret} @{fn}({', '.join(t for t, _ in args)})"
    return self.ins(f"call {ret} @{fn}({', '.join(f'{t} {a}' for t, a in args)})")

  # ---- conversions
  def cast(self, x: str, src: DType, dt: DType) -> str:
    if dt in self.emulated: return self.round_to(self.cast(x, src, dtypes.float32), dt)   # the register stays float
    src, dt = self.rdt(src), self.rdt(dt)
    s, d = self.ltype(src), self.ltype(dt)
    if dt == dtypes.bool:
      if src == dtypes.bool: return x
      return self.ins(f"fcmp une {s} {x}, {const(0, src)}" if dtypes.is_float(src) else f"icmp ne {s} {x}, 0")
    if src == dtypes.bool: return self.ins(f"{'uitofp' if dtypes.is_float(dt) else 'zext'} i1 {x} to {d}")
    sf, df = dtypes.is_float(src), dtypes.is_float(dt)
    if sf and df:
      if s == d: return x
      if src == dtypes.float64 and dt == dtypes.float16: return self.f64_to_f16(x)
      return self.ins(f"{'fpext' if dt.itemsize > src.itemsize else 'fptrunc'} {s} {x} to {d}")
    if df: return self.ins(f"{'uitofp' if dtypes.is_unsigned(src) else 'sitofp'} {s} {x} to {d}")
    if sf:   # like C on x86: narrow and unsigned 32-bit targets go through a wider signed int, so negatives wrap (no poison)
      if dt.itemsize < 4 or dt == dtypes.uint32:
        w = "i64" if dt == dtypes.uint32 else "i32"
        return self.ins(f"trunc {w} {self.ins(f'fptosi {s} {x} to {w}')} to {d}")
      return self.ins(f"{'fptoui' if dt == dtypes.uint64 else 'fptosi'} {s} {x} to {d}")
    if src.itemsize == dt.itemsize: return x
    if dt.itemsize < src.itemsize: return self.ins(f"trunc {s} {x} to {d}")
    return self.ins(f"{'zext' if dtypes.is_unsigned(src) else 'sext'} {s} {x} to {d}")
  def convert(self, v: str, src: DType, dt: DType) -> str:
    # the same register type is no conversion, except into an emulated format (its grid is coarser than float's)
    return v if src == dt or (self.ltype(src) == self.ltype(dt) and dt not in self.emulated) else self.cast(v, src, dt)
  def operand(self, s: UOp, dt: DType) -> str: return self.convert(self.val(s), s.dtype, dt)
  def bitcast(self, x: str, src: DType, dt: DType) -> str:
    ms, md = self.emulated.get(src, src), self.emulated.get(dt, dt)   # emulated formats reinterpret their stored bits
    if dtypes.bool in (ms, md) or ms.itemsize != md.itemsize: raise NotImplementedError(f"{self.what}: bitcast {src} -> {dt}")
    if src in self.emulated: x = self.to_bits(x, src)
    v = x if self.ltype(ms) == self.ltype(md) else self.ins(f"bitcast {self.ltype(ms)} {x} to {self.ltype(md)}")
    return self.from_bits(v, dt) if dt in self.emulated else v

  # ---- ALU
  def int_div(self, op: Ops, dt: DType, a: str, b: str, d: UOp) -> str:
    t, sg = self.ltype(dt), not self.unsigned(dt)
    inst = ("sdiv" if sg else "udiv") if op is Ops.IDIV else ("srem" if sg else "urem")
    if d.op is Ops.CONST:
      if d.arg == 0: return self.const(0, dt)
      if not (sg and d.arg == -1): return self.ins(f"{inst} {t} {a}, {b}")
    # x/0 is defined as 0 and MIN/-1 as the wrapped quotient (both trap on x86 and are UB in LLVM): never divide by 0 or -1
    z = self.ins(f"icmp eq {t} {b}, 0")
    bad = self.ins(f"or i1 {z}, {self.ins(f'icmp eq {t} {b}, -1')}") if sg else z
    q = self.ins(f"{inst} {t} {a}, {self.ins(f'select i1 {bad}, {t} 1, {t} {b}')}")
    if sg: q = self.ins(f"select i1 {bad}, {t} {self.ins(f'sub {t} 0, {a}') if op is Ops.IDIV else '0'}, {t} {q}")
    return self.ins(f"select i1 {z}, {t} 0, {t} {q}")

  def alu(self, u: UOp) -> str:
    op, dt, ins = u.op, u.dtype, self.ins
    if op in GroupOp.Comparison:
      sd = u.src[0].dtype
      x, y, st = self.val(u.src[0]), self.operand(u.src[1], sd), self.ltype(sd)
      if dtypes.is_float(self.rdt(sd)): return ins(f"fcmp {({Ops.CMPLT: 'olt', Ops.CMPNE: 'une', Ops.CMPEQ: 'oeq'})[op]} {st} {x}, {y}")
      return ins(f"icmp {({Ops.CMPLT: 'ult' if self.unsigned(sd) else 'slt', Ops.CMPNE: 'ne', Ops.CMPEQ: 'eq'})[op]} {st} {x}, {y}")
    if op is Ops.WHERE:
      c = self.operand(u.src[0], dtypes.bool)
      return ins(f"select i1 {c}, {self.ltype(dt)} {self.operand(u.src[1], dt)}, {self.ltype(dt)} {self.operand(u.src[2], dt)}")
    a = [self.operand(s, dt) for s in u.src]
    t, fl, b = self.ltype(dt), dtypes.is_float(self.rdt(dt)), dt == dtypes.bool
    if op is Ops.NEG: return ins(f"xor i1 {a[0]}, true" if b else f"fneg {t} {a[0]}" if fl else f"sub {t} 0, {a[0]}")
    if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.TRUNC, Ops.POW):
      if not fl: raise NotImplementedError(f"{self.what}: {op.name} on {dt}")
      return self.math(op.name.lower(), dt, *a)
    if op is Ops.RECIP: return ins(f"fdiv {t} {self.const(1, dt)}, {a[0]}") if fl else self.int_div(Ops.IDIV, dt, "1", a[0], u.src[0])
    if op is Ops.ADD: return ins(f"{'or' if b else 'fadd' if fl else 'add'} {t} {a[0]}, {a[1]}")
    if op is Ops.SUB: return ins(f"{'fsub' if fl else 'sub'} {t} {a[0]}, {a[1]}")
    if op is Ops.MUL: return ins(f"{'and' if b else 'fmul' if fl else 'mul'} {t} {a[0]}, {a[1]}")
    if op is Ops.FDIV: return ins(f"fdiv {t} {a[0]}, {a[1]}")
    if op in (Ops.IDIV, Ops.MOD): return self.int_div(op, dt, a[0], a[1], u.src[1])
    if op is Ops.MAX:
      if b: return ins(f"or i1 {a[0]}, {a[1]}")
      if fl: c = ins(f"or i1 {ins(f'fcmp ogt {t} {a[0]}, {a[1]}')}, {ins(f'fcmp uno {t} {a[0]}, {a[0]}')}")   # a NaN in a wins, like the reference
      else: c = ins(f"icmp {'ugt' if self.unsigned(dt) else 'sgt'} {t} {a[0]}, {a[1]}")
      return ins(f"select i1 {c}, {t} {a[0]}, {t} {a[1]}")
    if op in (Ops.AND, Ops.OR, Ops.XOR, Ops.SHL): return ins(f"{op.name.lower()} {t} {a[0]}, {a[1]}")
    if op is Ops.SHR: return ins(f"{'lshr' if self.unsigned(dt) else 'ashr'} {t} {a[0]}, {a[1]}")
    if op is Ops.MULACC:
      m = ins(f"{'fmul' if fl else 'mul'} {t} {a[0]}, {a[1]}")
      return ins(f"{'fadd' if fl else 'add'} {t} {m}, {a[2]}")
    raise NotImplementedError(f"{self.what} can't render {op.name} on {dt}")

  # ---- memory
  def address(self, ind: UOp, gate: str | None) -> str:
    idx = self.operand(ind.src[1], dtypes.int64)
    if gate is not None: idx = self.ins(f"select i1 {gate}, i64 {idx}, i64 0")   # a masked lane reads element 0, then discards it
    return self.ins(f"getelementptr inbounds {self.mtype(ind.src[0].dtype.base)}, {self.ptr(self.space(ind.src[0]))} {self.r[ind.src[0]]}, i64 {idx}")
  def load(self, u: UOp) -> str:
    ind = u.src[0]
    bdt = ind.src[0].dtype.base
    gate = self.operand(ind.src[2], dtypes.bool) if len(ind.src) > 2 else None
    v = self.ins(f"load {self.mtype(bdt)}, {self.ptr(self.space(ind.src[0]))} {self.address(ind, gate)}")
    if bdt == dtypes.bool: v = self.ins(f"icmp ne i8 {v}, 0")
    elif bdt in self.emulated: v = self.from_bits(v, bdt)
    v = self.convert(v, bdt, u.dtype)
    return self.ins(f"select i1 {gate}, {self.ltype(u.dtype)} {v}, {self.ltype(u.dtype)} {self.const(0, u.dtype)}") if gate else v
  def store(self, u: UOp) -> None:
    ind = u.src[0]
    bdt = ind.src[0].dtype.base
    v = self.operand(u.src[1], bdt)
    if bdt == dtypes.bool: v = self.ins(f"zext i1 {v} to i8")
    elif bdt in self.emulated: v = self.to_bits(v, bdt)
    if gated := len(ind.src) > 2:   # a gated store is a branch around it
      gate, y, n = self.operand(ind.src[2], dtypes.bool), self.block(), self.block()
      self.emit(f"br i1 {gate}, label %{y}, label %{n}")
      self.label(y)
    self.emit(f"store {self.mtype(bdt)} {v}, {self.ptr(self.space(ind.src[0]))} {self.address(ind, None)}")
    if gated:
      self.emit(f"br label %{n}")
      self.label(n)

  # ---- the walk
  def render(self, name: str, uops: list[UOp]) -> str:
    k = copy.copy(self)   # a fresh copy holds this kernel's state, so one renderer can render several kernels at once
    k.r, k.regs, k.loops, k.used = {}, {}, {}, {}   # UOp -> value, DEFINE_REG/REDUCE -> alloca, RANGE -> (label, iv), fn -> declare
    k.bufs, k.var_args, k.allocas, k.body = [], [], [], []
    k.n, k.blocks, k.cur = 0, 0, "entry"
    k.index_dtype = index_dtype(uops, k)
    for u in uops: k.lower(u)
    params = [f"{k.ptr(k.buf_space)} noalias {n}" for _, n in sorted(k.bufs)] + [f"i{k.var_arg_bits} {n}" for _, n in sorted(k.var_args)]
    return k.kernel(name, params, uops)

  def lower(self, u: UOp) -> None:
    op, r, emit, label = u.op, self.r, self.emit, self.label
    if op is Ops.DEFINE_GLOBAL:
      r[u] = f"%data{u.arg}"
      self.bufs.append((u.arg, r[u]))
    elif op is Ops.DEFINE_VAR:
      if self.var_arg_bits == 32 and (u.vmin < INT32_MIN or u.vmax > INT32_MAX):
        raise IndexWidthError(f"{self.what} passes Variable {u.arg[0]!r} as a 32-bit int; its range [{u.vmin}, {u.vmax}] does not fit")
      arg = "%var_" + "".join(c if c.isalnum() else "_" for c in u.arg[0]) + f"_{len(self.var_args)}"
      self.var_args.append((u.arg[0], arg))
      # the argument's width is the ABI's, the value's is this kernel's index width
      same = self.var_arg_bits == self.index_dtype.itemsize * 8
      r[u] = arg if same else self.cast(arg, {32: dtypes.int32, 64: dtypes.int64}[self.var_arg_bits], self.index_dtype)
    elif op is Ops.CONST: r[u] = self.const(u.arg, u.dtype)
    elif op in (Ops.INDEX, Ops.NOOP, Ops.SINK): pass   # an INDEX is folded into its LOAD/STORE
    elif op is Ops.SPECIAL: r[u] = self.special(u)
    elif op is Ops.RANGE:
      start, end = self.range_bounds(u)
      k = len(self.loops)
      lp, iv, pre = f"L{k}", f"%i{k}", self.cur
      r[u], self.loops[u] = iv, (lp, iv)
      emit(f"br label %{lp}.h")
      label(f"{lp}.h")
      it = self.ltype(dtypes.index)
      emit(f"{iv} = phi {it} [{start}, %{pre}], [{iv}.n, %{lp}.l]")
      emit(f"%{lp}.c = icmp slt {it} {iv}, {end}")
      emit(f"br i1 %{lp}.c, label %{lp}.b, label %{lp}.x")
      label(f"{lp}.b")
    elif op is Ops.END:
      lp, iv = self.loops[u.src[0]]
      emit(f"br label %{lp}.l")
      label(f"{lp}.l")
      emit(f"{iv}.n = add nsw {self.ltype(dtypes.index)} {iv}, 1")
      emit(f"br label %{lp}.h")
      label(f"{lp}.x")
    elif op is Ops.DEFINE_REG:
      acc, t = f"%acc{u.arg[0]}", self.ltype(u.dtype)
      self.regs[u] = self.regs[u.src[0]] = acc
      self.allocas.append(f"  {acc} = alloca {t}" + (f", addrspace({self.acc_space})" if self.acc_space else ""))
      emit(f"store {t} {self.const(u.arg[1], u.dtype)}, {self.ptr(self.acc_space)} {acc}")   # re-initialized each time its scope runs
    elif op is Ops.ASSIGN:
      emit(f"store {self.ltype(u.src[0].dtype)} {self.operand(u.src[1], u.src[0].dtype)}, {self.ptr(self.acc_space)} {self.regs[u.src[0]]}")
    elif op is Ops.REDUCE:
      r[u] = self.val(u)   # after its loops: the final value of the accumulator
      del self.regs[u]
    elif op is Ops.LOAD: r[u] = self.load(u)
    elif op is Ops.STORE: self.store(u)
    elif op is Ops.VECTORIZE:   # a tensor-core fragment (codegen/opt_tc.py)
      et = self.ltype(u.dtype.scalar())
      if all(x.op is Ops.CONST and x.arg == 0 for x in u.src): r[u] = "zeroinitializer"
      else:
        v = "poison"
        for i, x in enumerate(u.src): v = self.ins(f"insertelement <{u.dtype.count} x {et}> {v}, {et} {self.operand(x, u.dtype.scalar())}, i32 {i}")
        r[u] = v
    elif op is Ops.GEP: r[u] = self.ins(f"extractelement <{u.src[0].dtype.count} x {self.ltype(u.dtype)}> {r[u.src[0]]}, i32 {u.arg[0]}")
    elif op is Ops.WMMA: r[u] = self.wmma(u, *[r[x] for x in u.src[:3]])
    elif op is Ops.CAST: r[u] = self.cast(self.val(u.src[0]), u.src[0].dtype, u.dtype)
    elif op is Ops.BITCAST: r[u] = self.bitcast(self.val(u.src[0]), u.src[0].dtype, u.dtype)
    elif op in GroupOp.ALU: r[u] = self.alu(u)
    else: raise NotImplementedError(f"{self.what} can't render {op.name}")
