"""Metal Shading Language from the linearized UOp program.

The shared C-style renderer supplies the op expressions (alu, literals, x/0 = 0, NaN-propagating MAX); this file
owns the program walk because MSL needs things the C walk has no hooks for: an address space on every pointer,
`[[buffer(n)]]`/thread-position attributes, threadgroup arrays and barriers, native vectors (float4), packed vector
memory access, and simdgroup matrices. float64 does not exist in Metal; bfloat is native from Metal 3.1
(macOS 14), else emulated (float registers, ushort storage)."""
from __future__ import annotations
from tinycore.codegen.index_width import index_dtype
from tinycore.renderer import TensorCore
from tinycore.renderer.cstyle import CStyleRenderer
from tinycore.renderer.fp8 import fp8_helpers
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType, dtypes, PtrDType

_TYPES = {dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort",
  dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong", dtypes.float16: "half",
  dtypes.bfloat16: "bfloat", dtypes.float32: "float", dtypes.index: "int", dtypes.void: "void"}
_PACKED = {"char", "uchar", "short", "ushort", "int", "uint", "half", "float"}   # packed_T4: element-aligned vectors
_SPACE = {"global": "device", "local": "threadgroup"}

# simdgroup_matrix 8x8: 32 lanes, 2 elements each, the same lane layout for A, B and C (see emulator.py)
def _frags():
  from tinycore_metal.emulator import _rc
  return (_rc, _rc, _rc)
# codegen (opt_tc.py) uses the half -> float one; the others are declared for the emulator
TENSOR_CORES = [TensorCore((8, 8, 8), di, do, 32, (2, 2, 2), f"simdgroup_8x8x8_{di.name}_{do.name}",
                           _frags() if (di, do) == (dtypes.float16, dtypes.float32) else None)
                for di, do in ((dtypes.float32, dtypes.float32), (dtypes.float16, dtypes.float32), (dtypes.float16, dtypes.float16),
                               (dtypes.bfloat16, dtypes.float32))]

_FP8 = fp8_helpers("static inline", byte="uchar", ldexp="ldexp", fabs="fabs")
_BF16 = r"""/* bfloat emulated (before Metal 3.1): round to nearest even, NaN stays quiet NaN */
static inline float __tc_from_bfloat16(ushort x) { return as_type<float>(uint(x) << 16); }
static inline ushort __tc_to_bfloat16(float f) { uint u = as_type<uint>(f); if (isnan(f)) return 0x7fc0; return ushort((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
static inline float __tc_round_bfloat16(float f) { return __tc_from_bfloat16(__tc_to_bfloat16(f)); }
"""

class MetalRenderer(CStyleRenderer):
  name, device = "METAL", "METAL"
  has_local, has_shared = True, True
  global_max = (2**32 - 1, 65535, 65535)   # threadgroups per grid dim
  local_max = (256, 256, 64)               # a pipeline may allow fewer than 1024: the runtime checks its maximum
  shared_max = 32 * 1024                   # threadgroup memory on Apple GPUs
  # codegen/opt_smem.py stages tensor-core GEMMs through threadgroup memory (synchronous copies, simdgroup fragments
  # gathered element by element); vectors have at most 4 lanes, so a copy moves 8 bytes of half
  shared_staging, copy_bytes = True, 8
  # fp32 GEMMs (no fp32 simdgroup fragments in codegen): opt_simt.py's FMA register tiles over the same panels, their
  # 16-byte threadgroup reads as packed_float4
  simt_staging = True
  tensor_cores = TENSOR_CORES
  arg_int = "constant int&"
  index_widths = (32,)   # its loops and thread ids are int: a kernel past 2**31-1 elements is refused with a clear error
  claimed_dtypes = frozenset(d for d in _TYPES if d not in (dtypes.void, dtypes.index)) | {dtypes.fp8e4m3, dtypes.fp8e5m2}
  def __init__(self, arch: str | None = None, native_bf16: bool = True):
    # arch: a Metal language version like "3.1"; bfloat is native from 3.1 unless told otherwise
    self.arch = arch
    if arch is not None and tuple(int(x) for x in arch.split(".")[:2]) < (3, 1): native_bf16 = False
    self.native_bf16 = native_bf16
    self.type_map = dict(_TYPES)
    self.emulated = {dtypes.fp8e4m3: dtypes.uint8, dtypes.fp8e5m2: dtypes.uint8}
    if not native_bf16: self.emulated[dtypes.bfloat16] = dtypes.uint16
  def make_compiler(self):
    # the Metal framework compiles at load time; on Linux rendering works and compiling says why it can't
    from tinycore_metal.compiler_metal import MetalCompiler
    return MetalCompiler(self.arch)

  # ---- types and expressions
  def ctype(self, dt: DType) -> str:
    if isinstance(dt, PtrDType): return f"{_SPACE[dt.addrspace]} {self.ctype(self.emulated.get(dt.base, dt.base))}*"
    if dt.scalar() == dtypes.float64: raise NotImplementedError("Metal has no float64: cast to float32 first")
    if dt.count > 1:
      if dt.count not in (2, 3, 4): raise NotImplementedError(f"Metal has no {dt.count}-wide vectors ({dt})")
      return f"{self.ctype(dt.scalar())}{dt.count}"
    return "float" if dt in self.emulated else self.type_map[dt]
  def literal(self, v, dt: DType) -> str:
    if dt.count > 1: return f"{self.ctype(dt)}({self.literal(v, dt.scalar())})"
    return super().literal(v, dt)
  def math(self, fn: str, dt: DType, *a: str) -> str:
    # precise:: keeps float IEEE-accurate even if the library is built with fast math; half has native functions
    if dt.scalar() == dtypes.float16: return f"{fn}({', '.join(a)})"
    p = "" if fn == "trunc" else "precise::"
    if dt.scalar() == dtypes.bfloat16 and self.native_bf16: return f"bfloat({p}{fn}({', '.join(f'float({x})' for x in a)}))"
    return f"{p}{fn}({', '.join(a)})"
  def alu(self, op: Ops, dt: DType, a: list[str], srcs: tuple[UOp, ...]) -> str:
    if op is Ops.WHERE and dt.count > 1: return f"select({a[2]}, {a[1]}, {a[0]})"
    if op is Ops.MAX and dt.count > 1 and dtypes.is_float(dt): return f"select({a[1]}, {a[0]}, ({a[0]}>{a[1]})||isnan({a[0]}))"
    if op is Ops.MULACC and dtypes.is_float(dt) and dt.scalar() not in self.emulated: return f"fma({a[0]}, {a[1]}, {a[2]})"
    return super().alu(op, dt, a, srcs)
  def cast(self, x: str, src: DType, dt: DType) -> str:
    if dt.scalar() == dtypes.bool: return f"({x}!=0)"
    if dt in self.emulated: return f"__tc_round_{dt.name}(float({x}))"
    # native bfloat converts only to and from float: everything else goes through it
    bf = dtypes.bfloat16
    if self.native_bf16 and (src == bf) != (dt == bf) and dtypes.float32 not in (src, dt): x = f"float({x})"
    return f"{self.ctype(dt)}({x})"
  def _bits(self, x: str, src: DType, dt: DType) -> str: return f"as_type<{self.ctype(dt)}>({x})"

  # ---- memory
  def _vload(self, buf: str, idx: str, dt: DType, base: DType, space: str) -> str:
    t = self.ctype(dt.scalar())
    if base not in self.emulated and t in _PACKED: return f"{self.ctype(dt)}(*(({space} packed_{t}{dt.count}*)({buf}+{idx})))"
    return f"{self.ctype(dt)}({', '.join(self.load(buf, f'{idx}+{i}', base) for i in range(dt.count))})"
  def _vstore(self, buf: str, idx: str, val: str, dt: DType, base: DType, space: str) -> str:
    t = self.ctype(dt.scalar())
    if base not in self.emulated and t in _PACKED: return f"*(({space} packed_{t}{dt.count}*)({buf}+{idx})) = packed_{t}{dt.count}({val});"
    return " ".join(f"{buf}[{idx}+{i}] = {self.store_value(f'{val}[{i}]', base)};" for i in range(dt.count))

  # ---- threads
  def render_special(self, u: UOp, name: str, bound: str | None) -> list[str]:
    d, arg = "xyz"[int(name[-1])], (u.arg if isinstance(u.arg, tuple) else (u.arg,))
    if name.startswith("lidx"): return [f"int {name} = int(lid.{d});"]
    local = arg[1] if len(arg) > 1 else 1
    idx = f"int(gid.{d})*{local}+int(lid.{d})" if len(arg) > 1 and local > 1 else f"int(gid.{d})"
    out = [f"int {name} = {idx};"]
    # the grid is ceil(bound/local) groups: only a partial last group has threads to retire (early return is fine
    # without barriers; kernels with barriers must have exact grids, see docs/metal.md)
    b = u.src[0] if u.src else None
    if b is not None and not (b.op is Ops.CONST and b.arg % local == 0): out.append(f"if ({name} >= {bound}) return;")
    return out
  def _wmma(self, u: UOp, a: list[str]) -> str:
    tc = next(t for t in TENSOR_CORES if t.name == (u.arg[0] if isinstance(u.arg, tuple) else u.arg))
    self._wmmas[tc.name] = tc
    return f"__tc_{tc.name}({', '.join(a)})"
  def _wmma_fn(self, tc: TensorCore) -> str:
    ti, to = self.ctype(tc.dtype_in), self.ctype(tc.dtype_out)
    return (f"static inline {to}2 __tc_{tc.name}({ti}2 a, {ti}2 b, {to}2 c) {{\n"
      f"  simdgroup_matrix<{ti}, 8, 8> A; simdgroup_matrix<{ti}, 8, 8> B; simdgroup_matrix<{to}, 8, 8> C;\n"
      "  A.thread_elements()[0] = a[0]; A.thread_elements()[1] = a[1]; B.thread_elements()[0] = b[0]; B.thread_elements()[1] = b[1];\n"
      "  C.thread_elements()[0] = c[0]; C.thread_elements()[1] = c[1];\n"
      "  simdgroup_multiply_accumulate(C, A, B, C);\n"
      f"  return {to}2(C.thread_elements()[0], C.thread_elements()[1]);\n}}\n")

  # ---- the walk
  def render(self, name: str, uops: list[UOp]) -> str:
    index_dtype(uops, self)   # refuses a kernel whose indices need more than index_widths allows
    r: dict[UOp, str] = {}
    space: dict[UOp, str] = {}
    bufs: list[tuple[int, str, DType]] = []
    vars: list[tuple[str, DType]] = []
    body: list[str] = []
    self._wmmas: dict[str, TensorCore] = {}
    depth, n = 1, 0
    def line(s: str): body.append("  " * depth + s)
    def vec_index(ind: UOp) -> int: return ind.arg[1] if isinstance(ind.arg, tuple) and ind.arg and ind.arg[0] == "vec" else 1
    for u in uops:
      op = u.op
      if op is Ops.DEFINE_GLOBAL:
        r[u], space[u] = f"data{u.arg}", "device"
        bufs.append((u.arg, r[u], u.dtype))
      elif op is Ops.DEFINE_LOCAL:
        r[u], space[u] = f"temp{len(space)}", "threadgroup"
        line(f"threadgroup {self.ctype(self.emulated.get(u.dtype.base, u.dtype.base))} {r[u]}[{u.dtype.size}];")
      elif op is Ops.DEFINE_VAR:
        r[u] = u.arg[0]
        vars.append((r[u], u.dtype))
      elif op is Ops.CONST: r[u] = self.literal(u.arg, u.dtype)
      elif op in (Ops.INDEX, Ops.NOOP, Ops.SINK, Ops.REDUCE): pass   # INDEX is read by LOAD/STORE; REDUCE aliases its accumulator
      elif op is Ops.SPECIAL:
        r[u] = u.arg[0] if isinstance(u.arg, tuple) else u.arg
        for l in self.render_special(u, r[u], r[u.src[0]] if u.src else None): line(l)
      elif op is Ops.RANGE:
        kind = u.arg[0]
        r[u] = f"{'g' if kind == 'g' else 'r'}idx{u.arg[1]}" + (f"_{u.arg[2]}" if kind == "r" else "")
        line(f"for (int {r[u]} = 0; {r[u]} < {r[u.src[0]]}; {r[u]}++) {{")
        depth += 1
      elif op in (Ops.END, Ops.ENDIF):
        depth -= 1
        line("}")
      elif op is Ops.IF:
        line(f"if ({r[u.src[0]]}) {{")
        depth += 1
      elif op is Ops.BARRIER: line("threadgroup_barrier(mem_flags::mem_threadgroup);")
      elif op is Ops.DEFINE_REG:
        r[u] = r[u.src[0]] = f"acc{u.arg[0]}"
        line(f"{self.ctype(u.dtype)} {r[u]} = {self.literal(u.arg[1], u.dtype)};")
      elif op is Ops.ASSIGN: line(f"{r[u.src[0]]} = {r[u.src[1]]};")
      elif op is Ops.STORE:
        ind = u.src[0]
        buf, idx, base, val = r[ind.src[0]], r[ind.src[1]], ind.src[0].dtype.base, r[u.src[1]]
        if vec_index(ind) > 1: st = self._vstore(buf, idx, val, u.src[1].dtype, base, space[ind.src[0]])
        else: st = f"{buf}[{idx}] = {self.store_value(val, base)};"
        line(f"if ({r[ind.src[2]]}) {{ {st} }}" if len(ind.src) > 2 else st)
      else:
        if op is Ops.LOAD:
          ind = u.src[0]
          buf, idx, base = r[ind.src[0]], r[ind.src[1]], ind.src[0].dtype.base
          expr = self._vload(buf, idx, u.dtype, base, space[ind.src[0]]) if vec_index(ind) > 1 else self.load(buf, idx, base)
          if len(ind.src) > 2: expr = f"({r[ind.src[2]]}?{expr}:{self.literal(0, u.dtype)})"
        elif op is Ops.CAST: expr = self.cast(r[u.src[0]], u.src[0].dtype, u.dtype)
        elif op is Ops.BITCAST: expr = self.bitcast(r[u.src[0]], u.src[0].dtype, u.dtype)
        elif op is Ops.VECTORIZE: expr = f"{self.ctype(u.dtype)}({', '.join(r[s] for s in u.src)})"
        elif op is Ops.GEP:
          idx = u.arg if isinstance(u.arg, tuple) else (u.arg,)
          expr = f"{r[u.src[0]]}[{idx[0]}]" if len(idx) == 1 else f"{self.ctype(u.dtype)}({', '.join(f'{r[u.src[0]]}[{i}]' for i in idx)})"
        elif op is Ops.WMMA: expr = self._wmma(u, [r[s] for s in u.src])
        elif op in GroupOp.ALU: expr = self.alu(op, u.dtype, [r[s] for s in u.src], u.src)
        else: raise NotImplementedError(f"{type(self).__name__} can't render {op.name}")
        r[u] = f"v{n}"; n += 1
        line(f"{self.ctype(u.dtype)} {r[u]} = {expr};")
    # buffers in buffer-number order, then the variables by name (the order ProgramSpec.vars has), then positions
    params = [f"{self.ctype(dt)} {nm} [[buffer({i})]]" for i, (_, nm, dt) in enumerate(sorted(bufs, key=lambda b: b[0]))]
    params += [f"constant int& {nm} [[buffer({len(bufs) + i})]]" for i, (nm, _) in enumerate(sorted(vars))]
    params += ["uint3 gid [[threadgroup_position_in_grid]]", "uint3 lid [[thread_position_in_threadgroup]]"]
    return self.render_kernel(name, body, params, uops)
  def render_kernel(self, name: str, body: list[str], params: list[str], uops: list[UOp] = ()) -> str:
    used = {u.dtype.scalar() for u in uops} | {u.dtype.base for u in uops if isinstance(u.dtype, PtrDType)}
    pre = "#include <metal_stdlib>\n" + ("#include <metal_simdgroup_matrix>\n" if self._wmmas else "") + "using namespace metal;\n"
    if dtypes.bfloat16 in used and dtypes.bfloat16 in self.emulated: pre += _BF16
    if used & {dtypes.fp8e4m3, dtypes.fp8e5m2}: pre += _FP8
    pre += "".join(self._wmma_fn(tc) for tc in self._wmmas.values())
    return pre + f"kernel void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"
