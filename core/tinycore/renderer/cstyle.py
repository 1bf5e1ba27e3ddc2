"""The shared C-style renderer: the C (CPU), CUDA, HIP, Metal and OpenCL-C renderers specialize it (WGSL and the IR renderers don't)."""
from __future__ import annotations
import math
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType, dtypes, PtrDType
from tinycore.renderer import Renderer, workgroup_threads
from tinycore.codegen.index_width import index_dtype, IndexWidthError, INT32_MIN, INT32_MAX

class CStyleRenderer(Renderer):
  kernel_prefix = ""
  buffer_prefix = ""
  arg_int = "const int"
  var_arg_bits = 32       # the width of a Variable's kernel argument (arg_int): a wider bound range is refused
  index_dtype = dtypes.int32   # the current kernel's index type, set by render (codegen/index_width.py)
  restrict = "restrict"   # C; the C++ dialects (CUDA, HIP) spell it __restrict__
  type_map: dict[DType, str] = {dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
    dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
    dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16", dtypes.float32: "float", dtypes.float64: "double",
    dtypes.index: "int", dtypes.void: "void"}
  # formats held in registers as float and converted at loads, stores and casts (no native arithmetic)
  emulated: dict[DType, DType] = {dtypes.bfloat16: dtypes.uint16, dtypes.fp8e4m3: dtypes.uint8, dtypes.fp8e5m2: dtypes.uint8}
  prelude = ""

  # ---- types and literals
  def ctype(self, dt: DType) -> str:
    if isinstance(dt, PtrDType): return self.ctype(self.emulated.get(dt.base, dt.base)) + "*"
    if dt == dtypes.index: return self.type_map[self.index_dtype]
    if dt.count > 1 and dt.scalar() == dtypes.bool: return f"tc_mask_{dt.count}"   # comparison lanes: -1/0 ints
    if dt.count > 1: return f"tc_{self.ctype(dt.scalar()).replace(' ', '_')}_{dt.count}"
    if dt in self.emulated: return "float"
    return self.type_map[dt]
  def literal(self, v, dt: DType) -> str:
    s = self._literal(v, dt)
    # a negative literal stands in parentheses: after a unary or binary minus, "-" "-3" would lex as the -- operator
    return f"({s})" if s.startswith("-") else s
  def _literal(self, v, dt: DType) -> str:
    if dt in self.emulated: dt = dtypes.float32
    if dt == dtypes.index: dt = self.index_dtype
    if dtypes.is_float(dt):
      if math.isnan(v): s = "NAN"
      elif math.isinf(v): s = "INFINITY" if v > 0 else "(-INFINITY)"
      else: s = repr(float(v)) + ("" if dt == dtypes.float64 else "f")
      return s if dt in (dtypes.float32, dtypes.float64) else f"(({self.ctype(dt)}){s})"
    if dt == dtypes.bool: return "1" if v else "0"
    if dt in (dtypes.int64,): return f"{int(v)}ll"
    if dt in (dtypes.uint64,): return f"{int(v)}ull"
    if dt in (dtypes.uint32,): return f"{int(v)}u"
    if dt == dtypes.int32: return str(int(v)) if v != -2**31 else "(-2147483647-1)"
    return f"(({self.ctype(dt)}){int(v)})"

  # ---- ops
  def alu(self, op: Ops, dt: DType, a: list[str], srcs: tuple[UOp, ...]) -> str:
    fl = dtypes.is_float(dt)
    if op is Ops.NEG: return f"(!{a[0]})" if dt == dtypes.bool else f"(-{a[0]})"
    if op is Ops.EXP2: return self.math("exp2", dt, a[0])
    if op is Ops.LOG2: return self.math("log2", dt, a[0])
    if op is Ops.SIN: return self.math("sin", dt, a[0])
    if op is Ops.SQRT: return self.math("sqrt", dt, a[0])
    if op is Ops.TRUNC: return self.math("trunc", dt, a[0])
    if op is Ops.RECIP:
      return f"(1/{a[0]})" if not fl or dt in self.emulated else f"(1.0f/{a[0]})" if dt.count > 1 else f"(({self.ctype(dt)})1/{a[0]})"
    if op is Ops.ADD: return f"({a[0]}+{a[1]})" if dt != dtypes.bool else f"({a[0]}|{a[1]})"
    if op is Ops.SUB: return f"({a[0]}-{a[1]})"
    if op is Ops.MUL: return f"({a[0]}*{a[1]})" if dt != dtypes.bool else f"({a[0]}&{a[1]})"
    if op is Ops.FDIV: return f"({a[0]}/{a[1]})"
    if op in (Ops.IDIV, Ops.MOD):
      sym = "/" if op is Ops.IDIV else "%"
      d = srcs[1]
      if d.op is Ops.CONST and d.arg not in (0, -1): return f"({a[0]}{sym}{a[1]})"
      # division by zero and MIN/-1 are undefined in C (and trap on x86): x/0 is 0 like the reference, x/-1 is -x (wraps)
      neg1 = f"(-{a[0]})" if op is Ops.IDIV else "0"
      return f"({a[1]}==0?0:{a[1]}==-1?{neg1}:{a[0]}{sym}{a[1]})" if not dtypes.is_unsigned(dt) else f"({a[1]}==0?0:{a[0]}{sym}{a[1]})"
    if op is Ops.MAX:
      if fl: return f"(({a[0]}>{a[1]}||{a[0]}!={a[0]})?{a[0]}:{a[1]})"
      return f"(({a[0]}>{a[1]})?{a[0]}:{a[1]})"
    if op is Ops.CMPLT: return f"({a[0]}<{a[1]})"
    if op is Ops.CMPNE: return f"({a[0]}!={a[1]})"
    if op is Ops.CMPEQ: return f"({a[0]}=={a[1]})"
    if op is Ops.AND: return f"({a[0]}&{a[1]})"
    if op is Ops.OR: return f"({a[0]}|{a[1]})"
    if op is Ops.XOR: return f"({a[0]}^{a[1]})"
    if op is Ops.SHL: return f"({a[0]}<<{a[1]})"
    if op is Ops.SHR: return f"({a[0]}>>{a[1]})"
    if op is Ops.WHERE: return f"({a[0]}?{a[1]}:{a[2]})"
    if op is Ops.MULACC: return f"(({a[0]}*{a[1]})+{a[2]})"
    if op is Ops.POW: return self.math("pow", dt, a[0], a[1])
    raise NotImplementedError(f"{type(self).__name__} can't render {op.name}")
  def math(self, fn: str, dt: DType, *a: str) -> str:
    if dt == dtypes.float64: return f"{fn}({', '.join(a)})"
    if dt == dtypes.float32 or dt in self.emulated: return f"{fn}f({', '.join(a)})"
    return f"(({self.ctype(dt)}){fn}f({', '.join(f'(float){x}' for x in a)}))"
  def cast(self, x: str, src: DType, dt: DType) -> str:
    if dt == dtypes.bool: return f"({x}!=0)"
    if dt in self.emulated: return f"__tc_round_{dt.name}((float)({x}))"
    return f"(({self.ctype(dt)})({x}))"
  def bitcast(self, x: str, src: DType, dt: DType) -> str:
    # emulated formats live as float in registers: go through their bit patterns
    if src in self.emulated: x, src = f"__tc_to_{src.name}({x})", self.emulated[src]
    if dt in self.emulated: return f"__tc_from_{dt.name}({self._bits(x, src, self.emulated[dt])})"
    return self._bits(x, src, dt)
  def _bits(self, x: str, src: DType, dt: DType) -> str:
    # a GNU statement expression with memcpy: gcc and clang both accept it in C (gcc's __builtin_bit_cast is C++ only)
    return f"({{{self.ctype(dt)} __d; {self.ctype(src)} __s = ({x}); memcpy(&__d, &__s, sizeof(__d)); __d;}})"
  def load(self, buf: str, idx: str, dt: DType) -> str:
    v = f"{buf}[{idx}]"
    return f"__tc_from_{dt.name}({v})" if dt in self.emulated else v
  def store_value(self, x: str, dt: DType) -> str: return f"__tc_to_{dt.name}({x})" if dt in self.emulated else x

  # ---- program structure (overridden by GPU dialects)
  def render_special(self, u: UOp, name: str, bound: str) -> list[str]:
    """Declare thread index `name` (SPECIAL arg: (name, local size)) and retire threads at or past `bound`."""
    raise NotImplementedError(f"{type(self).__name__} has no thread indices (has_local is False)")
  def render_range(self, u: UOp, name: str, bound: str, first_global: bool) -> str:
    return f"for ({self.ctype(dtypes.index)} {name} = 0; {name} < {bound}; {name}++) {{"
  def kernel_params(self, bufs: list[tuple[str, DType, bool]], vars: list[tuple[str, DType]]) -> list[str]:
    return [f"{self.buffer_prefix}{self.ctype(dt)} {self.restrict} {n}" for n, dt, _ in bufs] + [f"{self.arg_int} {n}" for n, _ in vars]
  def vec_select(self, op: Ops, u: UOp, a: list[str]) -> str:
    """WHERE/MAX on vector lanes as bit selects with a lane mask (C has no vector ?:). Scalars are splatted first."""
    dt, mt = u.dtype, self.ctype(dtypes.bool.vec(u.dtype.count))
    vals = [x if s.dtype.count > 1 else self.splat(x, dt) for x, s in zip(a, u.src)]
    if op is Ops.MAX: m, x, y = f"(({vals[0]}>{vals[1]})|({vals[0]}!={vals[0]}))", vals[0], vals[1]
    else:
      c = u.src[0]
      m = a[0] if c.dtype.count > 1 else f"(({mt}){{0}}-(int)({a[0]}))"   # scalar condition: all lanes -1 or 0
      x, y = vals[1], vals[2]
    return f"(({self.ctype(dt)})(({m}&({mt}){x})|(~{m}&({mt}){y})))"
  def mask_alu(self, op: Ops, u: UOp, a: list[str]) -> str:
    """An ALU whose operands are bool lanes. Vector comparisons give -1/0 lanes, so a scalar bool (1/0) is widened to
    -1/0 first (else `m != 1` is true in every lane), and the ops that read bools as numbers are bit ops on masks."""
    a = [f"(-(int)({x}))" if s.dtype == dtypes.bool and not (op is Ops.WHERE and i == 0) else x for i, (x, s) in enumerate(zip(a, u.src))]
    if op is Ops.CMPLT: return f"(~{a[0]}&{a[1]})"   # signed -1 < 0 would read True < False as true
    if op is Ops.MAX or (op is Ops.ADD and u.dtype.scalar() == dtypes.bool): return f"({a[0]}|{a[1]})"
    if op is Ops.MUL and u.dtype.scalar() == dtypes.bool: return f"({a[0]}&{a[1]})"
    if op is Ops.NEG: return f"(~{a[0]})"
    if op is Ops.WHERE: return self.vec_select(op, u, a)
    return self.alu(op, u.dtype, a, u.src)
  # ---- vector memory access: the lanes in memory always have the element type of the buffer addressed (a mask of int
  # lanes into a bool buffer would write 4 bytes per 1-byte element, past the buffer's end)
  def vload(self, ptr: str, buf: DType, dt: DType) -> str:
    """An expression of type `dt` (n lanes) read from n consecutive elements of a `buf` buffer at `ptr`."""
    n = dt.count
    if buf != dt.scalar(): raise NotImplementedError(f"{type(self).__name__}: vector load of {dt} from a {buf} buffer")
    if buf == dtypes.bool: return f"(__builtin_convertvector(*({self.ctype(dtypes.uint8.vec(n))}*){ptr}, {self.ctype(dt)})!=0)"
    # formats held as float in registers are widened lane by lane by a helper
    if buf in self.emulated: return f"__tc_from_{buf.name}_v{n}({ptr})"
    return f"*({self.ctype(dt)}*){ptr}"
  def vstore(self, ptr: str, buf: DType, x: str, dt: DType) -> str:
    """A statement writing the n lanes of `x` (type `dt`) to n consecutive elements of a `buf` buffer at `ptr`."""
    n = dt.count
    if buf != dt.scalar(): raise NotImplementedError(f"{type(self).__name__}: vector store of {dt} into a {buf} buffer")
    if buf == dtypes.bool:   # -1/0 int lanes -> 0/1 bytes
      return f"*({self.ctype(dtypes.uint8.vec(n))}*){ptr} = __builtin_convertvector({x}&1, {self.ctype(dtypes.uint8.vec(n))});"
    if buf in self.emulated: return f"__tc_to_{buf.name}_v{n}({ptr}, {x});"
    return f"*({self.ctype(dt)}*){ptr} = {x};"
  def splat(self, x: str, dt: DType) -> str: return f"(({self.ctype(dt)}){{{', '.join([x] * dt.count)}}})"
  def render_wmma(self, u: UOp, r: dict) -> list[str]:
    """Lines declaring r[u] for a WMMA, or the VECTORIZE/GEP around one (codegen/opt_tc.py); dialects with tensor cores."""
    raise NotImplementedError(f"{type(self).__name__} can't render {u.op.name}")
  def render_extra(self, u: UOp, r: dict) -> list[str] | None:
    """Lines for `u` (setting r[u]) where the dialect renders it itself, else None: GPU dialects render DEFINE_LOCAL,
    BARRIER and shared-memory copies (codegen/opt_smem.py) here."""
    return None
  typedefs = ""
  def render_kernel(self, name: str, body: list[str], params: list[str]) -> str:
    return self.prelude + self.typedefs + f"{self.kernel_prefix}void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"

  def render(self, name: str, uops: list[UOp]) -> str:
    self.threads = workgroup_threads(uops)   # for render_kernel's launch bounds (GPU dialects)
    self.index_dtype = index_dtype(uops, self)
    r: dict[UOp, str] = {}
    bufs: list[tuple[int, str, DType]] = []
    vars: list[tuple[str, DType]] = []
    body: list[str] = []
    depth = 1
    first_global_seen = False
    n = 0
    def line(s: str): body.append("  " * depth + s)
    for u in uops:
      op = u.op
      if (extra := self.render_extra(u, r)) is not None:   # the dialect's own (shared memory, barriers, async copies)
        for ln in extra: line(ln)
        continue
      if op is Ops.DEFINE_GLOBAL:
        r[u] = f"data{u.arg}"
        bufs.append((u.arg, r[u], u.dtype))
        continue
      if op is Ops.DEFINE_VAR:
        if self.var_arg_bits == 32 and (u.vmin < INT32_MIN or u.vmax > INT32_MAX):
          raise IndexWidthError(f"{type(self).__name__} passes Variable {u.arg[0]!r} as a 32-bit int; its range [{u.vmin}, {u.vmax}] does not fit")
        r[u] = u.arg[0]
        vars.append((r[u], u.dtype))
        continue
      if op is Ops.CONST: r[u] = self.literal(u.arg, u.dtype); continue
      if op is Ops.INDEX: continue
      if op is Ops.SPECIAL:
        r[u] = u.arg[0]
        for l in self.render_special(u, r[u], r[u.src[0]]): line(l)
        continue
      if op is Ops.RANGE:
        kind = u.arg[0]
        r[u] = f"{'g' if kind == 'g' else 'r'}idx{u.arg[1]}" + (f"_{u.arg[2]}" if kind == "r" else "")
        line(self.render_range(u, r[u], r[u.src[0]], kind == "g" and not first_global_seen))
        if kind == "g": first_global_seen = True
        depth += 1
        continue
      if op is Ops.END:
        depth -= 1
        line("}")
        continue
      if op is Ops.DEFINE_REG and isinstance(u.dtype, PtrDType):
        # a per-thread array (fused attention's scratch tiles), read and written through INDEX like a buffer; aligned
        # for whole-vector access
        r[u] = r[u.src[0]] = f"tmp{u.arg[0]}"
        line(f"{self.ctype(u.dtype.base)} {r[u]}[{u.dtype.size}] __attribute__((aligned(64)));")
        continue
      if op is Ops.DEFINE_REG:
        r[u] = r[u.src[0]] = f"acc{u.arg[0]}"
        init = self.literal(u.arg[1], u.dtype.scalar())
        line(f"{self.ctype(u.dtype)} {r[u]} = {init if u.dtype.count == 1 else self.splat(init, u.dtype)};")
        continue
      if op is Ops.ASSIGN:
        line(f"{r[u.src[0]]} = {r[u.src[1]]};")
        continue
      if op is Ops.REDUCE: continue   # aliased to its accumulator
      if op is Ops.STORE and u.src[0].arg is not None:   # a vector store of contiguous lanes
        ind = u.src[0]
        st = self.vstore(f"({r[ind.src[0]]}+{r[ind.src[1]]})", ind.src[0].dtype.base, r[u.src[1]], u.src[1].dtype)
        # a gated one (a tile's tail, its index clamped in bounds) must not write: it would overwrite the last valid chunk
        line(f"if ({r[ind.src[2]]}) {st}" if len(ind.src) > 2 else st)
        continue
      if op is Ops.STORE:
        ind = u.src[0]
        buf, idx = r[ind.src[0]], r[ind.src[1]]
        val = self.store_value(r[u.src[1]], ind.src[0].dtype.base)
        if len(ind.src) > 2: line(f"if ({r[ind.src[2]]}) {buf}[{idx}] = {val};")
        else: line(f"{buf}[{idx}] = {val};")
        continue
      if op in (Ops.WMMA, Ops.VECTORIZE) or (op is Ops.GEP and u.src[0].op is Ops.WMMA):   # tensor cores: the dialect's render_wmma
        r[u] = f"v{n}"; n += 1
        for l in self.render_wmma(u, r): line(l)
        continue
      if op is Ops.LOAD and u.src[0].arg is not None:
        expr = self.vload(f"({r[u.src[0].src[0]]}+{r[u.src[0].src[1]]})", u.src[0].src[0].dtype.base, u.dtype)
      elif op is Ops.LOAD:
        ind = u.src[0]
        v = self.load(r[ind.src[0]], r[ind.src[1]], ind.src[0].dtype.base)
        if len(ind.src) > 2: v = f"({r[ind.src[2]]}?{v}:{self.literal(0, u.dtype)})"
        expr = v
      elif op is Ops.GEP: expr = f"{r[u.src[0]]}[{u.arg[0]}]"
      elif op is Ops.CAST: expr = self.cast(r[u.src[0]], u.src[0].dtype, u.dtype)
      elif op is Ops.BITCAST: expr = self.bitcast(r[u.src[0]], u.src[0].dtype, u.dtype)
      elif op in GroupOp.ALU and any(s.dtype.count > 1 and s.dtype.scalar() == dtypes.bool for s in u.src[op is Ops.WHERE:]):
        expr = self.mask_alu(op, u, [r[s] for s in u.src])
      elif op in GroupOp.ALU and u.dtype.count > 1 and op in (Ops.WHERE, Ops.MAX): expr = self.vec_select(op, u, [r[s] for s in u.src])
      elif op in GroupOp.ALU: expr = self.alu(op, u.dtype, [r[s] for s in u.src], u.src)
      else: raise NotImplementedError(f"{type(self).__name__} can't render {op.name}")
      r[u] = f"v{n}"; n += 1
      line(f"{self.ctype(u.dtype)} {r[u]} = {expr};")
    # parameters in buffer-number order (data2 before data10), every buffer declared even if unread
    # emulated formats (half/bf16 held as float) use the float vector type of the same width
    vtypes = {dtypes.float32.vec(x.dtype.count) if x.dtype.scalar() in self.emulated else x.dtype
              for x in uops if x.dtype.count > 1 and not isinstance(x.dtype, PtrDType)}
    # selects need masks; bool lanes travel to and from memory as bytes
    vtypes = sorted(vtypes | {dtypes.bool.vec(d.count) for d in vtypes} | {dtypes.uint8.vec(d.count) for d in vtypes if d.scalar() == dtypes.bool},  # type: ignore[assignment]
                    key=lambda d: (d.name, d.count))
    # vector types with element alignment: lanes start anywhere in a buffer
    self.typedefs = "".join(f"typedef {'int' if d.scalar() == dtypes.bool else self.ctype(d.scalar())} {self.ctype(d)} "
                            f"__attribute__((vector_size({(4 if d.scalar() == dtypes.bool else d.itemsize) * d.count}), "
                            f"aligned({4 if d.scalar() == dtypes.bool else d.itemsize})));\n" for d in vtypes)
    return self.render_kernel(name, body, self.kernel_params([(n, dt, False) for _, n, dt in sorted(bufs)], sorted(vars)))
