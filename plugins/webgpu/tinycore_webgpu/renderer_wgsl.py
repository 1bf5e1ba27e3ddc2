"""WGSL from a linearized UOp program: one compute entry point, buffers as storage arrays, threads from SPECIALs.

WGSL has only 32-bit scalars (+f16 behind `enable f16;`), so:
- bool/int8/uint8 (1 byte) and int16/uint16 (2 bytes) are packed into u32 words. Registers hold them as i32/u32, wrapped
  back to their width after every op. Stores go through atomicAnd+atomicOr on an `array<atomic<u32>>`: neighbouring
  threads own neighbouring bytes of one word, and a plain read-modify-write would lose one of the two writes.
- float16 is native f16 when the adapter has `shader-f16`; otherwise it is held as f32 and packed like int16
  (pack2x16float/unpack2x16float), so half tensors still work.
- int64/uint64/float64 (and bfloat16/fp8) have no WGSL type: rendering them raises UnsupportedDType naming the dtype.
- WGSL has no inf/nan literals: bitcast<f32>(0x7f800000u) etc. Integer x/0 is 0 like the reference (WGSL gives x).
- The grid is folded: the runtime dispatches the workgroups as a flat count spread over x/y/z (<=65535 each) and the
  kernel rebuilds its logical (g0, g1, g2) workgroup id from the flat id and the sizes in the `tc_info` buffer
  (which also carries the symbolic Variables)."""
from __future__ import annotations
import math
import numpy as np
from tinycore.codegen.index_width import index_dtype
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType, dtypes, PtrDType
from tinycore.renderer import Renderer

class UnsupportedDType(NotImplementedError):
  """A dtype WGSL cannot represent."""

_PACKED = {dtypes.bool: 1, dtypes.int8: 1, dtypes.uint8: 1, dtypes.int16: 2, dtypes.uint16: 2}
_F32_BITS = {math.inf: "0x7f800000u", -math.inf: "0xff800000u"}

class WGSLRenderer(Renderer):
  name, device = "WGSL", "WEBGPU"
  has_local, has_shared = True, False
  local_max = (256, 256, 64)
  supports_float4 = False
  # WGSL lets an implementation assume no inf/nan during shader execution (WGSL spec, "Floating Point Evaluation"):
  # lavapipe turns -0.0*x into -0.0 even for x = -inf, so inf/nan results are not guaranteed here
  ieee_specials = False
  index_widths = (32,)   # WGSL has no 64-bit integers: a kernel past 2**31-1 elements is refused with a clear error
  def __init__(self, compiler=None, f16: bool = True):
    self.compiler, self.f16 = compiler, f16
    self.packed = {**_PACKED, **({} if f16 else {dtypes.float16: 2})}
    self.claimed_dtypes = frozenset([dtypes.float32, dtypes.float16, dtypes.int32, dtypes.uint32, *_PACKED])

  # ---- types and literals
  def ty(self, dt: DType) -> str:
    if isinstance(dt, PtrDType): dt = dt.base
    if dt.count > 1: raise UnsupportedDType(f"WGSL renderer has no vector dtype {dt} (codegen should not vectorize for WEBGPU)")
    if dt in (dtypes.int32, dtypes.index, dtypes.int8, dtypes.int16): return "i32"
    if dt in (dtypes.uint32, dtypes.uint8, dtypes.uint16): return "u32"
    if dt == dtypes.float32 or (dt == dtypes.float16 and not self.f16): return "f32"
    if dt == dtypes.float16: self.uses_f16 = True; return "f16"
    if dt == dtypes.bool: return "bool"
    raise UnsupportedDType(f"WebGPU (WGSL) has no {dt.itemsize*8}-bit {dt.name} ({dt!r}): use float32/int32 (WGSL has 32-bit types, f16 with "
                           "shader-f16, packed 8/16-bit ints)")
  def literal(self, v, dt: DType) -> str:
    s = self._literal(v, dt)
    return f"({s})" if s.startswith("-") else s   # "-" "-3i" would lex as the -- operator
  def _literal(self, v, dt: DType) -> str:
    t = self.ty(dt)
    if t in ("f32", "f16"):
      x = float(np.float16(v) if t == "f16" else np.float32(v))   # out-of-range constants become inf, not a compile error
      if math.isnan(x) or math.isinf(x):
        bits = "0x7fc00000u" if math.isnan(x) else _F32_BITS[x]
        if t == "f32": return f"bitcast<f32>({bits})"
        return self.from_bits16('0x7e00u' if math.isnan(x) else '0x7c00u' if x > 0 else '0xfc00u')
      return repr(x) + ("f" if t == "f32" else "h")
    if t == "bool": return "true" if v else "false"
    if t == "u32": return f"{int(v) & 0xffffffff}u"
    v = int(v)
    return f"{v}i" if v != -2**31 else "bitcast<i32>(0x80000000u)"   # -2147483648i is a negation that overflows
  def wrap(self, x: str, dt: DType) -> str:
    """Bring an i32/u32 register back to the width of a narrow int dtype (C truncation on assignment)."""
    if dt in (dtypes.uint8, dtypes.uint16): return f"({x}&{'0xffu' if dt == dtypes.uint8 else '0xffffu'})"
    if dt in (dtypes.int8, dtypes.int16):
      s = 24 if dt == dtypes.int8 else 16
      return f"(({x}<<{s}u)>>{s}u)"   # i32 >> is arithmetic: sign-extends
    if dt == dtypes.float16 and not self.f16: return f"unpack2x16float(pack2x16float(vec2<f32>({x}, 0.0f))).x"   # round to half
    return x

  # ---- ops
  def alu(self, op: Ops, dt: DType, a: list[str], srcs: tuple[UOp, ...]) -> str:
    sdt = srcs[0].dtype if srcs else dt
    isbool, isfl = sdt == dtypes.bool, dtypes.is_float(sdt)
    if op is Ops.NEG: return f"(!{a[0]})" if isbool else f"(-{a[0]})"
    if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.TRUNC): return f"{op.name.lower()}({a[0]})"
    if op is Ops.RECIP: return f"({self.literal(1, dt)}/{a[0]})"
    if op is Ops.ADD: return f"({a[0]}|{a[1]})" if isbool else f"({a[0]}+{a[1]})"
    if op is Ops.MUL: return f"({a[0]}&{a[1]})" if isbool else f"({a[0]}*{a[1]})"
    if op is Ops.SUB: return f"({a[0]}-{a[1]})"
    if op is Ops.FDIV: return f"({a[0]}/{a[1]})"
    if op in (Ops.IDIV, Ops.MOD):
      sym, d, z = "/" if op is Ops.IDIV else "%", srcs[1], self.literal(0, dt)
      if d.op is Ops.CONST: return z if d.arg == 0 else f"({a[0]}{sym}{a[1]})"   # a const zero divisor is a WGSL compile error
      return f"select({a[0]}{sym}{a[1]}, {z}, {a[1]}=={self.literal(0, sdt)})"
    if op is Ops.MAX:
      if isbool: return f"({a[0]}|{a[1]})"
      if isfl: return f"select({a[1]}, {a[0]}, {a[0]}>{a[1]} || {self.isnan(a[0], sdt)})"   # NaN wins, like the reference
      return f"max({a[0]}, {a[1]})"
    if op is Ops.CMPLT: return f"(!{a[0]} && {a[1]})" if isbool else f"({a[0]}<{a[1]})"
    if op in (Ops.CMPNE, Ops.CMPEQ) and isfl and srcs[0] is srcs[1]:
      return self.isnan(a[0], sdt) if op is Ops.CMPNE else f"(!{self.isnan(a[0], sdt)})"
    if op is Ops.CMPNE: return f"(!({a[0]}=={a[1]}))" if isfl else f"({a[0]}!={a[1]})"   # naga's != is ordered: NaN != x came out false
    if op is Ops.CMPEQ: return f"({a[0]}=={a[1]})"
    if op is Ops.AND: return f"({a[0]}&{a[1]})"
    if op is Ops.OR: return f"({a[0]}|{a[1]})"
    if op is Ops.XOR: return f"({a[0]}!={a[1]})" if isbool else f"({a[0]}^{a[1]})"
    if op is Ops.SHL: return f"({a[0]}<<u32({a[1]}))"
    if op is Ops.SHR: return f"({a[0]}>>u32({a[1]}))"
    if op is Ops.WHERE: return f"select({a[2]}, {a[1]}, {a[0]})"
    if op is Ops.MULACC: return f"(({a[0]}*{a[1]})+{a[2]})"
    if op is Ops.POW:   # WGSL leaves pow(0, y <= 0) undefined (lavapipe: 0 for 0**-2); C says inf for y < 0, and x**0 is 1
      zero, inf = self.literal(0.0, dt), self.literal(math.inf, dt)
      return f"select(select(pow({a[0]}, {a[1]}), {inf}, {a[0]} == {zero} && {a[1]} < {zero}), {self.literal(1.0, dt)}, {a[1]} == {zero})"
    raise NotImplementedError(f"WGSL renderer can't render {op.name}")
  def isnan(self, x: str, dt: DType) -> str:
    # from the bits: the SPIR-V path (naga -> Vulkan driver) may fold x!=x to false as if no NaN existed
    if self.ty(dt) == "f16": return f"(({self.bits16(x, dt)}&0x7fffu) > 0x7c00u)"
    return f"((bitcast<u32>({x})&0x7fffffffu) > 0x7f800000u)"
  def cast(self, x: str, src: DType, dt: DType) -> str:
    if dt == dtypes.bool and dtypes.is_float(src):   # any magnitude bit set: nonzero or NaN (a NaN is true, as in C)
      return f"(({self.bits16(x, src)}&0x7fffu)!=0u)" if self.ty(src) == "f16" else f"((bitcast<u32>(f32({x}))&0x7fffffffu)!=0u)"
    if dt == dtypes.bool: return f"({x}!={self.literal(0, src)})"
    t, st = self.ty(dt), self.ty(src)
    if t == st: return self.wrap(x, dt)
    if st in ("f32", "f16") and t == "u32" and dt in (dtypes.uint8, dtypes.uint16):
      return self.wrap(f"bitcast<u32>(i32({x}))", dt)   # f32 -> u8 wraps negatives like C on x86, not saturate at 0
    return self.wrap(f"{t}({x})", dt)
  def bits16(self, x: str, dt: DType) -> str:
    """The 16 bits of a half register as u32 (through f32: exact both ways; naga can't bitcast vec2<f16>)."""
    return f"(pack2x16float(vec2<f32>(f32({x}), 0.0f))&0xffffu)"
  def from_bits16(self, x: str) -> str: return f"f16(unpack2x16float({x}).x)" if self.f16 else f"unpack2x16float({x}).x"
  def bitcast(self, x: str, src: DType, dt: DType) -> str:
    if src.itemsize != dt.itemsize: raise UnsupportedDType(f"bitcast {src.name} -> {dt.name} changes size")
    if src == dtypes.float16: x, src = self.bits16(x, src), dtypes.uint32
    if dt == dtypes.float16: return self.from_bits16(f"(bitcast<u32>({x})&0xffffu)")
    if dt.itemsize < 4: return self.wrap(f"bitcast<{self.ty(dt)}>({x})", dt)
    return f"bitcast<{self.ty(dt)}>({x})"

  # ---- memory
  def word(self, w: int, idx: str) -> tuple[str, str]:
    """(word index, bit shift) of element `idx` of a packed buffer with `w`-byte elements."""
    return (f"(({idx})>>2)", f"u32((({idx})&3)*8)") if w == 1 else (f"(({idx})>>1)", f"u32((({idx})&1)*16)")
  def load(self, buf: str, idx: str, dt: DType, atomic: bool) -> str:
    if (w := self.packed.get(dt)) is None: return f"{buf}[{idx}]"
    wi, sh = self.word(w, idx)
    word = f"atomicLoad(&{buf}[{wi}])" if atomic else f"{buf}[{wi}]"
    raw = f"(({word}>>{sh})&{'0xffu' if w == 1 else '0xffffu'})"
    if dt == dtypes.bool: return f"({raw}!=0u)"
    if dt == dtypes.float16: return self.from_bits16(raw)
    return self.wrap(f"bitcast<i32>({raw})", dt) if dt in (dtypes.int8, dtypes.int16) else raw
  def store(self, buf: str, idx: str, val: str, dt: DType) -> list[str]:
    if (w := self.packed.get(dt)) is None: return [f"{buf}[{idx}] = {val};"]
    wi, sh = self.word(w, idx)
    mask = "0xffu" if w == 1 else "0xffffu"
    bits = (f"select(0u, 1u, {val})" if dt == dtypes.bool else self.bits16(val, dt) if dt == dtypes.float16 else
            f"(bitcast<u32>({val})&{mask})")
    # clear our bits, then set them: other threads' bytes of the word are never touched, so no write is lost
    return [f"atomicAnd(&{buf}[{wi}], ~({mask}<<{sh}));", f"atomicOr(&{buf}[{wi}], {bits}<<{sh});"]

  # ---- the walk
  def render(self, name: str, uops: list[UOp]) -> str:
    index_dtype(uops, self)   # refuses a kernel whose indices need more than index_widths allows
    self.uses_f16 = False
    r: dict[UOp, str] = {}
    bufs: dict[int, DType] = {}
    stored = {u.src[0].src[0].arg for u in uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL}
    vars = sorted((u for u in uops if u.op is Ops.DEFINE_VAR), key=lambda v: v.arg[0])
    local = [1, 1, 1]
    for u in uops:
      if u.op is Ops.SPECIAL: local[int(u.arg[0][-1])] = u.arg[1]
    body: list[str] = []
    depth, n = 1, 0
    def line(s: str): body.append("  " * depth + s)
    for u in uops:
      op = u.op
      if op is Ops.DEFINE_GLOBAL:
        r[u] = f"data{u.arg}"
        bufs[u.arg] = u.dtype.base
        self.ty(u.dtype.base)   # reject unsupported dtypes here, with the dtype's name
        continue
      if op is Ops.DEFINE_VAR:
        r[u] = u.arg[0]
        line(f"let {r[u]}: {self.ty(u.dtype)} = {self.ty(u.dtype)}(tc_info[{3 + vars.index(u)}]);")
        continue
      if op is Ops.CONST: r[u] = self.literal(u.arg, u.dtype); continue
      if op is Ops.INDEX: continue
      if op is Ops.SPECIAL:
        r[u] = u.arg[0]
        d = int(u.arg[0][-1])
        line(f"let {r[u]}: i32 = i32(wg[{d}])*{u.arg[1]} + i32(lid[{d}]);")
        line(f"if ({r[u]} >= {r[u.src[0]]}) {{ return; }}")   # threads of the last workgroup past the bound
        continue
      if op is Ops.RANGE:
        kind = u.arg[0]
        r[u] = f"{kind}idx" + "_".join("".join(c for c in str(a) if c.isalnum()) for a in u.arg[1:])
        line(f"for (var {r[u]}: i32 = 0; {r[u]} < {r[u.src[0]]}; {r[u]}++) {{")
        depth += 1
        continue
      if op is Ops.END:
        depth -= 1
        line("}")
        continue
      if op is Ops.DEFINE_REG:
        r[u] = r[u.src[0]] = f"acc{u.arg[0]}"
        line(f"var {r[u]}: {self.ty(u.dtype)} = {self.literal(u.arg[1], u.dtype)};")
        continue
      if op is Ops.ASSIGN: line(f"{r[u.src[0]]} = {r[u.src[1]]};"); continue
      if op is Ops.REDUCE: continue   # aliased to its accumulator
      if op is Ops.STORE:
        ind = u.src[0]
        if ind.arg is not None: raise NotImplementedError("WGSL renderer has no vector stores")
        buf, idx, dt = r[ind.src[0]], r[ind.src[1]], ind.src[0].dtype.base
        sts = self.store(buf, idx, r[u.src[1]], dt)
        if len(ind.src) > 2: line(f"if ({r[ind.src[2]]}) {{ {' '.join(sts)} }}")
        else:
          for s in sts: line(s)
        continue
      if op is Ops.LOAD:
        ind = u.src[0]
        if ind.arg is not None: raise NotImplementedError("WGSL renderer has no vector loads")
        buf, idx, dt = r[ind.src[0]], r[ind.src[1]], ind.src[0].dtype.base
        atomic = ind.src[0].arg in stored and dt in self.packed
        if len(ind.src) > 2:   # masked: read a safe address, then select the zero
          valid = r[ind.src[2]]
          expr = f"select({self.literal(0, u.dtype)}, {self.load(buf, f'select(0, {idx}, {valid})', dt, atomic)}, {valid})"
        else: expr = self.load(buf, idx, dt, atomic)
      elif op is Ops.CAST: expr = self.cast(r[u.src[0]], u.src[0].dtype, u.dtype)
      elif op is Ops.BITCAST: expr = self.bitcast(r[u.src[0]], u.src[0].dtype, u.dtype)
      elif op in GroupOp.ALU:
        expr = self.alu(op, u.dtype, [r[s] for s in u.src], u.src)
        if u.dtype in self.packed and u.dtype != dtypes.bool: expr = self.wrap(expr, u.dtype)
      else: raise NotImplementedError(f"WGSL renderer can't render {op.name}")
      r[u] = f"v{n}"; n += 1
      line(f"let {r[u]}: {self.ty(u.dtype)} = {expr};")
    return self.render_kernel(name, body, bufs, stored, len(vars), local)

  def buffer_decl(self, i: int, dt: DType, stored: bool) -> str:
    el = ("atomic<u32>" if stored else "u32") if dt in self.packed else self.ty(dt)
    return f"@group(0) @binding({i}) var<storage, read_write> data{i}: array<{el}>;"
  def render_kernel(self, name: str, body: list[str], bufs: dict[int, DType], stored: set, nvars: int, local: list[int]) -> str:
    nb = max(bufs) + 1 if bufs else 0
    decls = [self.buffer_decl(i, bufs[i], i in stored) for i in sorted(bufs)]
    head = ["enable f16;"] if self.uses_f16 else []
    # tc_info: logical grid size in workgroups (3 dims), then the Variables
    decls.append(f"@group(0) @binding({nb}) var<storage, read> tc_info: array<i32>;")
    pre = ["  // the flat workgroup id over the folded dispatch, unfolded into the logical grid",
           "  let wid = gid.x + gid.y*nwg.x + gid.z*nwg.x*nwg.y;",
           "  let gsz = vec3<u32>(u32(tc_info[0]), u32(tc_info[1]), u32(tc_info[2]));",
           "  if (wid >= gsz.x*gsz.y*gsz.z) { return; }",
           "  let wg = vec3<u32>(wid % gsz.x, (wid / gsz.x) % gsz.y, wid / (gsz.x*gsz.y));"]
    sig = ("@builtin(workgroup_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, "
           "@builtin(num_workgroups) nwg: vec3<u32>")
    return "\n".join(head + [f"// {name}"] + decls + [f"@compute @workgroup_size({local[0]}, {local[1]}, {local[2]})",
                     f"fn main({sig}) {{"] + pre + body + ["}", ""])
