"""OpenCL C (1.2 and later) from the linearized UOp program: the shared C-style walk with OpenCL's address spaces,
work-item functions, overloaded math built-ins and `as_T` bit casts.

Dtypes follow the device's extensions: `half` arithmetic is native with cl_khr_fp16; without it half is still
supported, held as float in registers and converted at memory with the core built-ins vload_half/vstore_half_rte
(which need no extension), like bfloat16 and fp8 always are. float64 needs cl_khr_fp64: without it rendering a
double is an error naming the device. Booleans live in buffers as bytes: OpenCL leaves sizeof(bool) to the
implementation and forbids bool in kernel arguments."""
from __future__ import annotations
from tinycore.renderer.cstyle import CStyleRenderer
from tinycore.renderer.fp8 import fp8_helpers
from tinycore.uop import UOp, Ops
from tinycore.dtype import DType, dtypes, PtrDType

_TYPES = {dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort",
  dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong", dtypes.float16: "half",
  dtypes.float32: "float", dtypes.float64: "double", dtypes.index: "int", dtypes.void: "void"}
_ALWAYS = frozenset(_TYPES) - {dtypes.void, dtypes.index, dtypes.float64} | {dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2}

# half without cl_khr_fp16: a pointer to half may be declared anyway, and vload_half/vstore_half convert through one
_HALF = r"""TCF float __tc_from_half(ushort x) { return vload_half(0, (const __private half*)&x); }
TCF ushort __tc_to_half(float f) { ushort h; vstore_half_rte(f, 0, (__private half*)&h); return h; }
TCF float __tc_round_half(float f) { return __tc_from_half(__tc_to_half(f)); }
"""
_BF16 = r"""/* bfloat16: round to nearest even, NaN stays a quiet NaN */
TCF float __tc_from_bfloat16(ushort x) { return as_float((uint)x << 16); }
TCF ushort __tc_to_bfloat16(float f) { uint u = as_uint(f); if (isnan(f)) return (ushort)0x7fc0; return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
TCF float __tc_round_bfloat16(float f) { return __tc_from_bfloat16(__tc_to_bfloat16(f)); }
"""
_FP8 = fp8_helpers("TCF", byte="uchar", ldexp="ldexp", fabs="fabs")

class CLRenderer(CStyleRenderer):
  name, device = "CL", "CL"
  has_local, has_shared = True, True
  # OpenCL 1.2 guarantees 16 KiB of local memory and 1 work-item per group; these defaults (a typical GPU) are
  # replaced by the opened device's own limits (device.py), so codegen shapes workgroups for the real device
  global_max = (2**31 - 1, 65535, 65535)   # work-groups per dim (the index math is 32-bit)
  local_max = (256, 256, 64)
  shared_max = 32 * 1024
  buffer_prefix, arg_int = "__global ", "const int"
  def __init__(self, arch: str | None = None, extensions: frozenset[str] | str = frozenset(), local_max: tuple[int, ...] | None = None,
               shared_max: int | None = None, device_name: str = "CL"):
    # arch: a label for messages and the compile-cache key (the device's name); extensions: what the device reports
    self.arch = arch
    self.extensions = frozenset(extensions.split() if isinstance(extensions, str) else extensions)
    if local_max is not None: self.local_max = tuple(local_max)
    if shared_max is not None: self.shared_max = shared_max
    self.device_name = device_name
    self.native_half = "cl_khr_fp16" in self.extensions
    self.type_map = dict(_TYPES)
    self.emulated = {dtypes.bfloat16: dtypes.uint16, dtypes.fp8e4m3: dtypes.uint8, dtypes.fp8e5m2: dtypes.uint8}
    if not self.native_half: self.emulated[dtypes.float16] = dtypes.uint16
    self.claimed_dtypes = _ALWAYS | ({dtypes.float64} if "cl_khr_fp64" in self.extensions else frozenset())
  def make_compiler(self):
    # built against a device: the first one the ICD loader lists (device.py gives an opened device its own)
    from tinycore_opencl.device import default_compiler
    return default_compiler()

  def _check(self, dt: DType) -> None:
    if dt.scalar() not in self.claimed_dtypes and dt.scalar() not in (dtypes.void, dtypes.index):
      what = "float64 (the device lacks cl_khr_fp64)" if dt.scalar() == dtypes.float64 else str(dt.scalar())
      raise NotImplementedError(f"{self.device_name} ({self.arch or 'OpenCL'}) does not support {what}")

  # ---- types and expressions
  def ctype(self, dt: DType) -> str:
    if isinstance(dt, PtrDType):
      self._check(dt.base)
      # bool is 1 byte in every tinycore buffer; OpenCL doesn't fix sizeof(bool)
      base = dtypes.uint8 if dt.base == dtypes.bool else self.emulated.get(dt.base, dt.base)
      return f"{self.type_map[base]}*"
    self._check(dt)
    if dt.count > 1: raise NotImplementedError(f"{type(self).__name__} renders no vector values ({dt}): vector_types is False")
    return "float" if dt in self.emulated else self.type_map[dt]
  def _literal(self, v, dt: DType) -> str:
    # OpenCL C has no `long long`: 64-bit integer literals take the l/ul suffix
    if dt == dtypes.int64: return f"{int(v)}l" if v != -2**63 else "(-9223372036854775807l-1)"
    if dt == dtypes.uint64: return f"{int(v)}ul"
    return super()._literal(v, dt)
  def math(self, fn: str, dt: DType, *a: str) -> str:
    # the built-ins are overloaded (no f suffix); native half computes in float for float's accuracy
    if dt == dtypes.float16 and self.native_half: return f"((half){fn}({', '.join(f'(float){x}' for x in a)}))"
    return f"{fn}({', '.join(a)})"
  def _bits(self, x: str, src: DType, dt: DType) -> str: return f"as_{self.ctype(dt)}(({self.ctype(src)})({x}))"

  # ---- program structure
  def render_special(self, u: UOp, name: str, bound: str) -> list[str]:
    d, local = int(name[-1]), u.arg[1]
    idx = f"(int)get_group_id({d})*{local}+(int)get_local_id({d})" if local > 1 else f"(int)get_group_id({d})"
    # threads past the bound retire at once (safe while kernels have no barriers); where the bound is a multiple of
    # the work-group every work-item is in range, and no early exit keeps PoCL's work-item loops vectorizable
    b = u.src[0]
    if b.op is Ops.CONST and b.arg % local == 0: return [f"int {name} = {idx};"]
    return [f"int {name} = {idx};", f"if ({name} >= {bound}) return;"]
  def render(self, name: str, uops: list[UOp]) -> str:
    self._wg = [1, 1, 1]
    for u in uops:
      if u.op is Ops.SPECIAL: self._wg[int(u.arg[0][-1])] = u.arg[1]
    used = {u.dtype.scalar() for u in uops} | {u.dtype.base for u in uops if isinstance(u.dtype, PtrDType)}
    pre = ""
    if dtypes.float16 in used and self.native_half: pre += "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
    if dtypes.float64 in used: pre += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    if used & set(self.emulated): pre += "#define TCF static inline\n"
    if dtypes.float16 in used and not self.native_half: pre += _HALF
    if dtypes.bfloat16 in used: pre += _BF16
    if used & {dtypes.fp8e4m3, dtypes.fp8e5m2}: pre += _FP8
    self.prelude = pre
    return super().render(name, uops)
  def render_kernel(self, name: str, body: list[str], params: list[str]) -> str:
    # the launch always uses the workgroup codegen chose, so the compiler may specialize for it
    wg = ", ".join(str(x) for x in self._wg)
    return self.prelude + f"__kernel __attribute__((reqd_work_group_size({wg}))) void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"
