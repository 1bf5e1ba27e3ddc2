"""CUDA C for NVRTC: the shared C-style renderer with CUDA's kernel signature, thread indices and types.

half/bfloat16 are native (`half`, `__nv_bfloat16` from cuda_fp16.h/cuda_bf16.h) when the toolkit's headers are there
(NVRTC ships none); otherwise they are emulated like fp8: float in registers, their bits in memory, converted by the
small device helpers below. fp8 is emulated in registers (software, any arch), but its matmuls run on tensor cores from
sm_89: codegen's WMMA UOps (codegen/opt_tc.py, opt_smem.py) become mma.sync inline PTX (render_wmma, at the end):
m16n8k16 for half/bf16 (sm_80+), m16n8k8 tf32, m16n8k32 e4m3/e5m2 (sm_89+) fed with the bytes as they are in memory."""
from __future__ import annotations
from tinycore.renderer.cstyle import CStyleRenderer
from tinycore.renderer.fp8 import fp8_helpers
from tinycore.uop import UOp, Ops
from tinycore.dtype import DType, dtypes
from tinycore.codegen.opt_smem import ASYNC, ASYNC_COMMIT, ASYNC_WAIT, LDMATRIX
from tinycore_nv.tensor_cores import PTX_TYPE
from tinycore.codegen.attention_tc import WARP_XOR

DEFAULT_ARCH = "sm_80"

_HELPERS = r"""#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#define TCD static __device__ __forceinline__
template <class T, class F> TCD T __tc_bits(F f) { static_assert(sizeof(T) == sizeof(F), "bitcast size"); T t; memcpy(&t, &f, sizeof(T)); return t; }
TCD unsigned __tc_tf32(float f) { unsigned r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f)); return r; }
TCD float __tc_from_bfloat16(unsigned short x) { return __uint_as_float((unsigned int)x << 16); }
TCD unsigned short __tc_to_bfloat16(float f) { unsigned int u = __float_as_uint(f); if (f != f) return 0x7fc0; return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
TCD float __tc_round_bfloat16(float f) { return __tc_from_bfloat16(__tc_to_bfloat16(f)); }
TCD float __tc_from_half(unsigned short x) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x)); return f; }
TCD unsigned short __tc_to_half(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
TCD float __tc_round_half(float f) { return __tc_from_half(__tc_to_half(f)); }
"""

def _hw_fp8_encode(fmt: str, inf: str) -> str:
  """sm_89+: cvt.rn.satfinite (nearest even, finite overflow to the largest finite, as the software encoder does) for
  one byte, the low one of the pair; NaN and (for e5m2, which keeps it) inf first, so every float gives the same byte."""
  return (f"if (f != f) return 0x7f; {inf}unsigned short h; "
          f'asm("cvt.rn.satfinite.{fmt}x2.f32 %0, %1, %1;" : "=h"(h) : "f"(f)); return (unsigned char)h;')
HW_FP8 = {"fp8e4m3": _hw_fp8_encode("e4m3", ""), "fp8e5m2": _hw_fp8_encode("e5m2", "if (fabsf(f) == INFINITY) return f > 0 ? 0x7c : 0xfc; ")}

def parse_arch(arch: str | None) -> str:
  """'sm_90', '90', 'SM90' -> 'sm_90'."""
  if not arch: return DEFAULT_ARCH
  a = arch.lower().replace("sm_", "").replace("sm", "").replace("compute_", "")
  if not a.rstrip("af").isdigit(): raise ValueError(f"NV: arch {arch!r} is not like sm_90")
  return f"sm_{a}"

class CUDARenderer(CStyleRenderer):
  name, device = "CUDA", "NV"
  has_local, has_shared = True, True
  global_max = (2**31 - 1, 65535, 65535)   # grid dims (in blocks)
  local_max = (1024, 1024, 64)             # block dims; __launch_bounds__ keeps big blocks launchable
  shared_max = 48 * 1024                   # per block: the static __shared__ limit; an arch's opt-in maximum (shared_memory.py)
  # codegen/opt_smem.py: cp.async moves 16 bytes global->shared without registers (sm_80+), ldmatrix loads mma fragments
  shared_staging, async_copy, matrix_load = True, 0, False
  simt_staging = True   # fp32 GEMMs: staged FMA tiles (codegen/opt_simt.py), their 16-byte accesses rendered aligned below
  prepad_windows = False   # a conv's padding halo is read by the staged GEMM's zero-filling cp.async: no pad kernel
  kernel_prefix, restrict = 'extern "C" __global__ ', "__restrict__"
  def __init__(self, arch: str | None = None, native_half: bool | None = None, compiler=None):
    from tinycore_nv.nvrtc import find_cuda_include
    self.arch = parse_arch(arch)
    # mma.sync.m16n8k16 f16/bf16 -> f32 exists from sm_80 (tensor_cores.py: the same layouts the emulator runs)
    from tinycore_nv.tensor_cores import tensor_cores, has_mma
    self.tensor_cores = tensor_cores(self.arch)
    # ... and with them (plus warp shuffles, render_extra) the tensor-core flash attention (codegen/attention_tc.py)
    if has_mma(self.arch): self.async_copy, self.matrix_load, self.attention_tensor_cores = 16, True, True
    from tinycore_nv.shared_memory import block_limit
    self.shared_max = block_limit(self.arch)
    self.native_half = find_cuda_include() is not None if native_half is None else native_half
    self.type_map = {**CStyleRenderer.type_map, dtypes.bool: "bool", dtypes.float16: "half", dtypes.bfloat16: "__nv_bfloat16"}
    self.emulated = {dtypes.fp8e4m3: dtypes.uint8, dtypes.fp8e5m2: dtypes.uint8}
    if not self.native_half: self.emulated |= {dtypes.float16: dtypes.uint16, dtypes.bfloat16: dtypes.uint16}
    from tinycore_nv.tensor_cores import has_fp8_mma
    self.prelude = ("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" if self.native_half else "") + _HELPERS + \
      fp8_helpers("TCD", encoders=HW_FP8 if has_fp8_mma(self.arch) else None)
    self._compiler = compiler
  def make_compiler(self):
    # NVRTC is loaded on first compile: rendering (codegen tests, the emulator) works without it
    from tinycore_nv.nvrtc import NVRTCCompiler
    return NVRTCCompiler(self.arch)

  def render_special(self, u: UOp, name: str, bound: str) -> list[str]:
    d, local = "xyz"[int(name[-1])], u.arg[1]
    ct = self.ctype(dtypes.index)   # 64-bit kernels widen blockIdx before the multiply
    idx = f"({ct})blockIdx.{d}*{local}+threadIdx.{d}" if local > 1 else f"({ct})blockIdx.{d}"
    # threads past the bound retire at once: safe while kernels have no barriers
    return [f"{ct} {name} = {idx};", f"if ({name} >= {bound}) return;"]
  def _bits(self, x: str, src: DType, dt: DType) -> str: return f"__tc_bits<{self.ctype(dt)}>(({self.ctype(src)})({x}))"
  def math(self, fn: str, dt: DType, *a: str) -> str:
    if dt in (dtypes.float16, dtypes.bfloat16) and self.native_half: return f"(({self.ctype(dt)}){fn}f({', '.join(f'(float){x}' for x in a)}))"
    return super().math(fn, dt, *a)
  def cast(self, x: str, src: DType, dt: DType) -> str:
    # half<->bfloat16 have no direct conversion: through float
    if self.native_half and src in (dtypes.float16, dtypes.bfloat16) and dt not in (dtypes.bool, dtypes.float32) and dt not in self.emulated:
      x = f"(float)({x})"
    if self.native_half and dt in (dtypes.float16, dtypes.bfloat16) and src not in (dtypes.float32, dtypes.float64, dtypes.bool): x = f"(float)({x})"
    if self.native_half and src == dtypes.bool and dt in (dtypes.float16, dtypes.bfloat16): x = f"(float)({x})"
    return super().cast(x, src, dt)
  def render(self, name: str, uops: list[UOp]) -> str:
    # 16-byte global loads that only feed a shared-memory store are copies (no register value): render_extra pairs them
    # (cp.async also moves 4 or 8 bytes)
    def nbytes(x: UOp) -> int: return x.dtype.count * x.dtype.itemsize
    self._copies = {u.src[1] for u in uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_LOCAL and u.src[1].op is Ops.LOAD
                    and (nbytes(u.src[1]) == 16 or (u.arg == ASYNC and nbytes(u.src[1]) in (4, 8)))}
    # a shared-memory GEMM is written for 2 resident blocks per SM (one's barrier wait hides behind the other's math):
    # the launch bound's minimum caps registers at what two blocks leave each thread
    # (a warp tile whose fp32 accumulators alone take more than half of that budget runs one block rather than spill)
    def aligned(x: UOp) -> bool: return isinstance(x.src[0].arg, tuple) and len(x.src[0].arg) == 3 and x.src[0].arg[0] == "vec"
    self._vcopies = {u.src[1] for u in uops if u.op is Ops.STORE and u.src[1].op is Ops.LOAD and aligned(u) and aligned(u.src[1])
                     and u.src[0].arg[2] == u.src[1].src[0].arg[2] == nbytes(u.src[1])}
    accs = sum(1 for u in uops if u.op is Ops.DEFINE_REG)
    self._min_blocks = 2 if any(u.op is Ops.DEFINE_LOCAL for u in uops) and accs <= 64 else 1
    # panels past the static 48 KB live in dynamic shared memory, each at a 16-byte aligned offset (shared_memory.py)
    from tinycore_nv.shared_memory import STATIC_MAX
    self._smem_at, total = {}, 0
    for u in uops:
      if u.op is Ops.DEFINE_LOCAL:
        self._smem_at[u] = total
        total += -(-u.dtype.size * self.emulated.get(u.dtype.base, u.dtype.base).itemsize // 16) * 16
    self._dynamic_smem = total if total > STATIC_MAX else 0
    return super().render(name, uops)
  def render_extra(self, u: UOp, r: dict) -> list[str] | None:
    """Shared memory (opt_smem.py): __shared__ panels, barriers, cp.async groups, 16-byte copies and ldmatrix; warp shuffles."""
    def smem_ptr(ind: UOp) -> str: return f"(unsigned)__cvta_generic_to_shared({r[ind.src[0]]}+{r[ind.src[1]]})"
    if u.op is Ops.CUSTOM and isinstance(u.arg, tuple) and u.arg[0] == WARP_XOR:   # every lane of the warp takes part
      r[u] = f"sh{id(u):x}"
      return [f"{self.ctype(u.dtype)} {r[u]} = __shfl_xor_sync(0xffffffffu, {r[u.src[0]]}, {int(u.arg[1])});"]
    if u.op is Ops.DEFINE_LOCAL:
      r[u], ct = f"smem{u.arg}", self.ctype(self.emulated.get(u.dtype.base, u.dtype.base))
      if not self._dynamic_smem: return [f"__shared__ __align__(16) {ct} {r[u]}[{u.dtype.size}];"]
      at = self._smem_at[u]
      return (["extern __shared__ __align__(16) unsigned char tc_dynamic_smem[];"] if at == 0 else []) + \
             [f"{ct}* {r[u]} = ({ct}*)(tc_dynamic_smem + {at});"]
    if u.op is Ops.BARRIER:
      if u.arg is None: return ["__syncthreads();"]
      if u.arg[0] == ASYNC_COMMIT: return ['asm volatile("cp.async.commit_group;" ::: "memory");']
      if u.arg[0] == ASYNC_WAIT: return [f'asm volatile("cp.async.wait_group {int(u.arg[1])};" ::: "memory");']
      raise NotImplementedError(f"CUDA can't render barrier {u.arg!r}")
    if u.op is Ops.LOAD and u in self._copies:
      ind = u.src[0]
      r[u] = f"({r[ind.src[0]]}+{r[ind.src[1]]})"
      return []
    if u.op is Ops.STORE and u.src[1] in self._copies:
      # a gated source (padding, a tile's tail) fills with zeros; a gated destination (past the last k step) is skipped
      src, dst, n = u.src[1].src[0], u.src[0], u.src[1].dtype.count * u.src[1].dtype.itemsize
      gate = r[src.src[2]] if len(src.src) > 2 else None
      if u.arg == ASYNC:
        # cp.async's zero-fill form: source size 0 reads nothing (the address stays the buffer's own, in bounds)
        ptr = f"({gate}?{r[u.src[1]]}:{r[src.src[0]]})" if gate else r[u.src[1]]
        size = f', "r"({gate}?{n}:0)' if gate else ""
        line = (f'asm volatile("cp.async.{"cg" if n == 16 else "ca"}.shared.global [%0], [%1], {n}{", %2" if gate else ""};" :: '
                f'"r"({smem_ptr(dst)}), "l"({ptr}){size} : "memory");')
      else:
        line = f"*(uint4*)({r[dst.src[0]]}+{r[dst.src[1]]}) = {f'!{gate} ? make_uint4(0,0,0,0) : ' if gate else ''}*(const uint4*){r[u.src[1]]};"
      return [f"if ({r[dst.src[2]]}) {line}" if len(dst.src) > 2 else line]
    if u.op in (Ops.LOAD, Ops.STORE) and isinstance(u.src[0].arg, tuple) and len(u.src[0].arg) == 3 and u.src[0].arg[0] == "vec":
      return self._aligned_access(u, r)
    if u.op is Ops.LOAD and isinstance(u.src[0].arg, tuple) and u.src[0].arg[0] == LDMATRIX:
      _, mats, trans = u.src[0].arg
      r[u] = f"frag{id(u):x}"
      outs = ", ".join(f'"=r"({r[u]}[{i}])' for i in range(mats))
      regs = ",".join(f"%{i}" for i in range(mats))
      return [f"unsigned {r[u]}[{mats}];",
              f'asm volatile("ldmatrix.sync.aligned.m8n8.x{mats}{".trans" if trans else ""}.shared.b16 {{{regs}}}, [%{mats}];" : {outs} : '
              f'"r"({smem_ptr(u.src[0])}));']
    return None
  def _aligned_access(self, u: UOp, r: dict) -> list[str]:
    """INDEX arg ("vec", n, align): n consecutive elements at an `align`-byte boundary, moved by one instruction
    (LDS.128, STG.128, ...) through CUDA's aligned vector types (the generic vector types only promise element alignment)."""
    ind = u.src[0]
    n, align = ind.arg[1], ind.arg[2]
    ptr = f"({r[ind.src[0]]}+{r[ind.src[1]]})"
    if u in self._vcopies:   # only copied on (c_tile.py: shared -> global): no register value, the store moves the bits
      r[u] = ptr
      return []
    if u.op is Ops.STORE and u.src[1] in self._vcopies:
      ct = {16: "uint4", 8: "uint2", 4: "unsigned"}[align]
      line = f"*({ct}*){ptr} = *(const {ct}*){r[u.src[1]]};"
      return [f"if ({r[ind.src[2]]}) {line}" if len(ind.src) > 2 else line]
    if u.op is Ops.LOAD:   # 4-byte lanes: float4, int2, ...
      dt = u.dtype.scalar()
      if dt.itemsize != 4 or n not in (2, 4) or align != 4 * n: raise NotImplementedError(f"CUDA: aligned load of {u.dtype}")
      vt = {dtypes.float32: "float", dtypes.int32: "int", dtypes.uint32: "uint"}[dt] + str(n)
      # lanes in an array (NVRTC has no generic vector types), indexed by constants: registers, like the mma fragments
      r[u], ct = f"vl{id(u):x}", self.ctype(dt)
      return [f"{ct} {r[u]}[{n}];", f"{{ {vt} t = *(const {vt}*){ptr}; {', '.join(f'{r[u]}[{i}] = t.{c}' for i, c in enumerate('xyzw'[:n]))}; }}"]
    # a store's value is a VECTORIZE, rendered (render_wmma) as a float array or as 16-bit elements packed in pairs
    dt, x = u.src[1].dtype.scalar(), r[u.src[1]]
    if dt == dtypes.float32 and n in (2, 4) and align == 4 * n: line = f"*(float{n}*){ptr} = make_float{n}({', '.join(f'{x}[{i}]' for i in range(n))});"
    elif dt in (dtypes.float16, dtypes.bfloat16) and n in (4, 8) and align == 2 * n:
      line = f"*(uint{n // 2}*){ptr} = make_uint{n // 2}({', '.join(f'{x}[{i}]' for i in range(n // 2))});"
    else: raise NotImplementedError(f"CUDA: aligned store of {u.src[1].dtype}")
    return [f"if ({r[ind.src[2]]}) {line}" if len(ind.src) > 2 else line]
  def render_kernel(self, name: str, body: list[str], params: list[str]) -> str:
    # the block size caps registers per thread, so a 1024-thread block always launches
    mb = getattr(self, "_min_blocks", 1)
    bounds = f"{self.threads}, {mb}" if mb > 1 and mb * self.threads <= 2048 else f"{self.threads}"
    from tinycore_nv.shared_memory import symbol
    dyn = getattr(self, "_dynamic_smem", 0)
    # the loader reads how much dynamic shared memory to opt in to and launch with from the module itself
    decl = f'extern "C" {{ __device__ unsigned int {symbol(name)} = {dyn}; }}\n' if dyn else ""
    head = decl + f"{self.kernel_prefix}__launch_bounds__({bounds}) void {name}({', '.join(params)}) {{\n"
    return self.prelude + self.typedefs + head + "\n".join(body) + "\n}\n"

  # ***** tensor cores: WMMA (codegen/opt_tc.py) as mma.sync inline PTX
  def render_wmma(self, u: UOp, r: dict) -> list[str]:
    """A fragment (VECTORIZE of 16-bit values) is an array of .b32 registers, two elements each, low half first; the
    accumulator operand and the result are float[4]; a GEP of the result is an element of that array."""
    if u.op is Ops.GEP: return [f"float {r[u]} = {r[u.src[0]]}[{u.arg[0]}];"]
    if u.op is Ops.VECTORIZE:
      dt, xs = u.dtype.scalar(), [r[s] for s in u.src]
      if dt == dtypes.float32: return [f"float {r[u]}[{len(xs)}] = {{{', '.join(xs)}}};"]
      if dt.itemsize == 1:   # fp8, four to a register, low byte first: the bytes as loaded (gathered from shared memory)
        def byte(s: UOp, x: str) -> str:
          ind = s.src[0] if s.op is Ops.LOAD else None
          if ind is not None and ind.op is Ops.INDEX and len(ind.src) == 2 and ind.arg is None: return f"(unsigned){r[ind.src[0]]}[{r[ind.src[1]]}]"
          return f"(unsigned)__tc_to_{dt.name}({x})"   # a computed value: encoded again
        bs = [byte(s, x) for s, x in zip(u.src, xs)]
        words = [" | ".join(f"({bs[i + j]} << {8 * j})" for j in range(4)) for i in range(0, len(bs), 4)]
        return [f"unsigned {r[u]}[{len(words)}] = {{{', '.join(words)}}};"]
      if dt in self.emulated: bits = lambda x: f"__tc_to_{dt.name}({x})"
      else: bits = lambda x: f"__{'half' if dt == dtypes.float16 else 'bfloat16'}_as_ushort({x})"
      pairs = [f"((unsigned)({bits(xs[i])}) | ((unsigned)({bits(xs[i + 1])}) << 16))" for i in range(0, len(xs), 2)]
      return [f"unsigned {r[u]}[{len(pairs)}] = {{{', '.join(pairs)}}};"]
    a, b, c = (r[s] for s in u.src[:3])
    if u.src[0].dtype.scalar() == dtypes.float32:   # tf32: float fragments, rounded by cvt.rna on the way in
      ops = ", ".join([f'"=f"({r[u]}[{i}])' for i in range(4)])
      ins = ", ".join([f'"r"(__tc_tf32({a}[{i}]))' for i in range(4)] + [f'"r"(__tc_tf32({b}[{i}]))' for i in range(2)] + [f'"f"({c}[{i}])' for i in range(4)])
      return [f"float {r[u]}[4];",
              f'asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, '
              f'{{%10,%11,%12,%13}};" : {ops} : {ins});']
    # 16-bit operands: m16n8k16; 8-bit (fp8 e4m3/e5m2, sm_89+): m16n8k32. Both take 4 + 2 .b32 registers.
    ta, tb = (PTX_TYPE[s.dtype.scalar()] for s in u.src[:2])
    shape = "m16n8k32" if u.src[0].dtype.itemsize == 1 else "m16n8k16"
    ops = ", ".join([f'"=f"({r[u]}[{i}])' for i in range(4)])
    ins = ", ".join([f'"r"({a}[{i}])' for i in range(4)] + [f'"r"({b}[{i}])' for i in range(2)] + [f'"f"({c}[{i}])' for i in range(4)])
    return [f"float {r[u]}[4];",
            f'asm volatile("mma.sync.aligned.{shape}.row.col.f32.{ta}.{tb}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, '
            f'{{%10,%11,%12,%13}};" : {ops} : {ins});']
