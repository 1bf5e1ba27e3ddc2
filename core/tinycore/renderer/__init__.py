"""Renderer: turns a linearized UOp program into device source. It owns its compiler and declares the capabilities
that codegen reads (locals, shared memory, limits, dtypes, tensor cores)."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any
from tinycore.uop import UOp, Ops
from tinycore.dtype import DType

@dataclass(frozen=True)
class TensorCore:
  """One matrix instruction: C[M,N] += A[M,K] @ B[K,N] with the per-lane element layout the emulator and renderers share.

  frags: (a, b, c), each fn(lane, element) -> (row, col) of A, B and C that lane's element holds; lane may be a UOp,
  so they use only + * // % on it. Codegen (codegen/opt_tc.py) uses a tensor core only when it has them."""
  dims: tuple[int, int, int]
  dtype_in: DType
  dtype_out: DType
  threads: int
  elements_per_thread: tuple[int, int, int] = (0, 0, 0)
  name: str = ""
  frags: tuple | None = None

def workgroup_threads(uops: list[UOp]) -> int:
  """Threads in one workgroup of a linearized GPU program: the product of its SPECIALs' local sizes (renderers put it in
  launch bounds, so the compiler may use every register a thread of that block can have)."""
  n = 1
  for u in uops:
    if u.op is Ops.SPECIAL: n *= u.arg[1]
  return n

@dataclass
class ProgramSpec:
  """What the runtime needs to launch a rendered kernel."""
  name: str
  src: str
  device: str
  global_size: tuple[int, ...] = (1, 1, 1)
  local_size: tuple[int, ...] | None = (1, 1, 1)
  vars: tuple[UOp, ...] = ()            # DEFINE_VARs, in the order the kernel takes them
  n_bufs: int = 0
  outs: tuple[int, ...] = (0,)
  ins: tuple[int, ...] = ()
  uops: list[UOp] | None = None
  ops: int = 0                          # estimated FLOPs, for GlobalCounters and DEBUG=2
  mem: int = 0                          # estimated bytes moved
  applied_opts: tuple = ()
  index_dtype: DType | None = None      # int32 or int64: the type its index math was rendered in (codegen/index_width.py)

class Renderer:
  name: str = ""
  device: str = ""
  arch: str | None = None
  has_local: bool = False
  has_shared: bool = False
  global_max: tuple[int, ...] | None = None
  local_max: tuple[int, ...] | None = None
  shared_max: int = 0
  tensor_cores: list[TensorCore] = []
  supports_float4: bool = True
  # codegen may emit n-wide vector values (dtype.vec(n)): loads/stores of n consecutive elements and lane-wise math on
  # them (renderer/cstyle.py vload/vstore); False: every value is a scalar
  vector_types: bool = False
  # inf, nan and -0 behave as IEEE 754 says in every float op. False where the language lets the compiler assume finite
  # math (WGSL does: lavapipe folds -0.0*x to -0.0 for x = inf); the fuzzer then feeds such a device finite inputs only
  ieee_specials: bool = True
  claimed_dtypes: frozenset[DType] | None = None   # None: every dtype
  def supported_dtypes(self) -> frozenset[DType]:
    """The dtypes this renderer can compute in (tinygrad's spelling; claimed_dtypes=None means every dtype)."""
    from tinycore.dtype import dtypes
    return self.claimed_dtypes if self.claimed_dtypes is not None else frozenset(dtypes.fields().values())
  # the integer widths this renderer can give index math. Default: 32 and 64. Codegen renders a kernel's indices in int32
  # unless a value or a buffer's element count leaves int32, then in int64 if 64 is listed here, else it refuses the kernel
  # with an error naming the limit (codegen/index_width.py). A renderer reads its kernel's choice with index_dtype(uops, self).
  index_widths: tuple[int, ...] = (32, 64)
  # has_local: outputs per thread (TM rows, TN columns) of a reduce kernel's register tile (codegen/opt_gpu.py);
  # 4x8 was fastest on an H200, a CPU under OpenCL (PoCL) wants 8x8. GPU_TILE=TM,TN overrides it
  register_tile: tuple[int, int] = (4, 8)
  # shared-memory GEMM staging (codegen/opt_smem.py), where the renderer opts in: bytes one asynchronous global->shared copy moves (0: copies are
  # plain loads and stores between barriers), and whether a warp loads tensor-core fragments from shared memory with
  # one cooperative instruction (NVIDIA ldmatrix)
  shared_staging: bool = False   # opts in: the renderer renders DEFINE_LOCAL, BARRIER and opt_smem.py's copies
  async_copy: int = 0
  matrix_load: bool = False
  copy_bytes: int = 16   # the widest plain vector load/store a staging copy may use (Metal: 4 lanes, so 8 bytes of half)
  staged_epilogue: bool = True   # a staged GEMM's finished C tile goes out through the freed panels, 16 bytes a store (c_tile.py)
  # fp32 GEMMs without tensor cores staged the same way, FMA register tiles reading 16 bytes of shared memory at a time
  # (codegen/opt_simt.py); the renderer must render INDEX arg ("vec", n, align) as an `align`-byte aligned access
  simt_staging: bool = False
  # the scheduler pads a sliding window's input (conv, pooling) once, in its own kernel, so the window kernel has no
  # bounds checks (engine/schedule.py, PREPAD). False where kernels read the halo through gated loads as cheaply
  # (NVIDIA: the staged GEMM's copies zero-fill it), which saves that kernel and its buffer
  prepad_windows: bool = True
  # no thread indices (a CPU): (rows, columns) of float32 accumulators a matmul's output tile keeps in vector registers
  # (codegen/opt.py widens the vector axis to `columns` and unrolls `rows` rows). None: the generic 8 x 16 choice
  register_block: tuple[int, int] | None = None
  # under register_block: the rows of the tallest register tile of the same columns the registers hold (0: none taller).
  # BEAM offers it on any matmul (UPCAST_T where it doesn't divide the rows); matmul_tile_rows is the heuristic's choice
  matmul_tall_rows: int = 0
  # fused attention (codegen/attention.py, attention_backward.py): (float32 lanes per vector register, vector registers)
  # for its register tiles; None (default): the renderer doesn't render those programs (VECTORIZE, vector registers,
  # many-lane GEP as a shuffle), so attention is scheduled as matmuls and a softmax
  attention_vector: tuple[int, int] | None = None
  # the tensor-core flash attention forward (codegen/attention_tc.py) for 16-bit inputs: needs an m16n8k16 TensorCore,
  # async_copy, matrix_load and warp shuffles (CUSTOM arg ("warp_xor", mask)) rendered. False (default): not used
  attention_tensor_cores: bool = False
  def matmul_panels(self, M: int, K: int, N: int, transposed: bool) -> int:
    """For a float32 matmul (M, K) @ (K, N): copy the right operand into panels [N/p][K][p] of p columns first, so the
    kernel streams each panel contiguously instead of walking it down its rows? Return p, or 0 for no copy (default).
    `transposed`: the operand is a transposed view (x @ W.T)."""
    return 0
  def matmul_padded_panels(self, M: int, K: int, N: int, transposed: bool) -> int:
    """For a float32 matmul (M, K) @ (K, N) that matmul_panels doesn't pack in whole panels (p doesn't divide N, or no
    copy): copy the right operand into panels of p columns anyway, the last one padded with zero columns, compute the
    product over whole panels (N rounded up to p) and drop the extra columns after? Return p, or 0 (default). For a batch
    of right operands M counts the rows of all their left operands (the work the copy's two extra kernels serve)."""
    return 0
  def matmul_panel_group(self, panel_bytes: int, panels: int) -> int:
    """For a float32 matmul whose right operand is packed in `panels` panels of `panel_bytes` each, with the panel loop
    outermost: how many panels each row tile of the left operand visits before the next row tile (codegen/opt.py's
    GROUP), so the left operand streams once per group of panels instead of once per panel. 1: no grouping (default)."""
    return 1
  def matmul_tile_rows(self, M: int, K: int = 0) -> int:
    """For a float32 matmul of M output rows (reduce length K, 0 if unknown) under the register block: the rows of a
    register tile that needn't divide M (codegen/opt.py's UPCAST_T: the last tile's rows past M repeat row M-1, their
    stores gated off), where it beats the rows that divide M on this shape. 0: the register block's rows, or fewer
    that divide M (default)."""
    return 0
  def matmul_narrow_transpose(self, M: int, K: int, N: int) -> bool:
    """For a float32 matmul (M, K) @ (K, N) with few columns (a classifier head) whose left operand is row-major: copy
    the right operand transposed, (N, K) contiguous, so both operands run contiguously along the reduce (dot products
    in vector lanes) instead of N scalar columns? Default False."""
    return False
  def matmul_row_panels(self, M: int, K: int, N: int) -> int:
    """For a float32 matmul (M, K) @ (K, N) whose left operand is a transposed view (x.T @ g, a weight gradient): copy
    it into row panels [M/p][K][p] first, so each reduce step reads its p rows' elements from one cache line instead
    of one per step from a row far away? Return p, or 0 for no copy (default)."""
    return 0
  def winograd_tile(self, bs: int, cin: int, cout: int, out_h: int, out_w: int) -> int:
    """For a float32 3x3 stride-1 conv (bs, cin) -> (bs, cout, out_h, out_w): compute it by Winograd F(m, 3) with this
    output tile m (2 or 4; conv_winograd.py), or 0 for the direct convolution (default)."""
    return 0
  def make_compiler(self) -> Any:
    """This renderer's compiler, made on first use, so rendering (codegen tests, the emulator) needs no toolchain."""
    return None
  @property
  def compiler(self) -> Any:
    if getattr(self, "_compiler", None) is None: self._compiler = self.make_compiler()
    return self._compiler
  @compiler.setter
  def compiler(self, c): self._compiler = c
  def render(self, name: str, uops: list[UOp]) -> str: raise NotImplementedError(f"{type(self).__name__} must implement render")
  def __repr__(self): return f"<{type(self).__name__} {self.name}{':' + self.arch if self.arch else ''}>"
