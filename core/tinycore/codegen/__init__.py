"""Codegen: kernel AST -> lowered ranges and index math -> simplified -> linearized -> rendered source."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import dtypes
from tinycore.helpers import DEBUG
from tinycore.renderer import Renderer, ProgramSpec
from tinycore.codegen.lowerer import lower_kernel
from tinycore.codegen.linearize import linearize

def is_fused(ast: UOp) -> bool:
  """A kernel the scheduler keeps whole (a CUSTOM node with its own program writer): no optimizer actions, no BEAM."""
  return ast.op is Ops.SINK and bool(ast.src) and ast.src[0].op is Ops.CUSTOM and hasattr(ast.src[0].arg, "out_shape")

def kernel_name(ast: UOp) -> str:
  root = ast.src[0]
  if is_fused(ast): return root.arg.prefix + "_".join(str(s) for s in root.src[0].shape)
  has_reduce = any(u.op is Ops.REDUCE_AXIS for u in root.toposort())
  dims = "_".join(str(s) if isinstance(s, int) else "s" for s in root.shape)   # symbolic dims read as 's'
  return ("r_" if has_reduce else "E_") + dims if root.shape else ("r" if has_reduce else "E")

def _estimate(uops: list[UOp]) -> tuple[int, int]:
  """FLOPs and bytes of one run, multiplying each op by the trip counts of its enclosing loops."""
  ops = mem = 0
  mult, stack = 1, []
  for u in uops:
    # a thread index (GPU) runs the rest of the kernel once per index: like a loop that is never closed
    if u.op is Ops.SPECIAL and u.src[0].op is Ops.CONST: mult *= u.src[0].arg
    elif u.op is Ops.RANGE:
      b = u.src[0].arg if u.src[0].op is Ops.CONST else 1
      stack.append(b); mult *= b
    elif u.op is Ops.END: mult //= stack.pop() or 1
    elif u.op in GroupOp.ALU and u.dtype.scalar() not in (dtypes.index, dtypes.bool): ops += mult * u.dtype.count
    elif u.op is Ops.LOAD or u.op is Ops.STORE:
      dt = u.dtype if u.op is Ops.LOAD else u.src[1].dtype
      mem += mult * dt.itemsize * dt.count
  return ops, mem

def prepare_kernel(ast: UOp, device: str, renderer: Renderer | None = None) -> UOp:
  """The kernel the optimizer's actions apply to: lowered, simplified, its divided ranges split (codegen/split.py), with
  the device's kernel-stage rules. BEAM searches this same kernel, so the axes it names are the ones get_program sees."""
  from tinycore.stages import apply_stage
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  from tinycore.codegen.split import split_ranges, merge_ranges
  k = graph_rewrite(lower_kernel(ast), symbolic)
  # a reduction's output ranges that every buffer reads as one are one range (a 1x1 conv's pixels), where ranges are
  # loops (a GPU maps them to thread dimensions of its own)
  if renderer is not None and not renderer.has_local and any(u.op is Ops.REDUCE for u in k.toposort()): k = merge_ranges(k)
  return apply_stage(split_ranges(k), device, "kernel")

def get_program(ast: UOp, renderer: Renderer, opts: tuple | None = None, device: str | None = None) -> ProgramSpec:
  """`opts`: optimization actions to apply (codegen/opt.py); None uses the heuristic, () none. `device`: whose plugin rules
  apply at the kernel and program stages (tinycore/stages.py); default the renderer's own device."""
  from tinycore.stages import apply_program_stage
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  from tinycore.codegen.opt import optimize
  from tinycore.helpers import NOOPT
  device = device or renderer.device
  if is_fused(ast):
    # a fused kernel writes its own program (codegen/attention.py); the device's program-stage rules still apply
    from tinycore.codegen.attention import attention_program
    uops = apply_program_stage(attention_program(ast, renderer), device)
  else:
    k = prepare_kernel(ast, device, renderer)
    if not NOOPT or opts: k = optimize(k, renderer, opts)
    if renderer.has_local:
      from tinycore.codegen.gpudims import to_gpu_dims
      k = graph_rewrite(to_gpu_dims(k, (renderer.local_max or (256,))[0]), symbolic)
    from tinycore.codegen.mma_accumulate import fuse_mma_accumulate, fuse_fma_accumulate
    uops = apply_program_stage(fuse_fma_accumulate(fuse_mma_accumulate(linearize(k))), device)
  # a buffer the simplified kernel no longer reads is still a parameter: the runtime passes every buffer
  have = {u.arg for u in uops if u.op is Ops.DEFINE_GLOBAL}
  uops = [u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL and u.arg not in have] + uops
  if DEBUG >= 6:
    for i, u in enumerate(uops): print(f"{i:4d} {u.op.name:<14} {str(u.dtype):<20} {u.arg if u.op is not Ops.CONST else u.arg!r}")
  name = kernel_name(ast)
  from tinycore.codegen.index_width import index_dtype
  idt = index_dtype(uops, renderer)   # raises a clear error before rendering if the renderer can't hold the indices
  if DEBUG >= 3: print(f"{name}: index math in int{idt.itemsize * 8}")
  src = renderer.render(name, uops)
  glob = next((u for u in uops if u.op is Ops.RANGE and u.arg[0] == "g"), None)
  # a symbolic bound stays a UOp here; the runner evaluates it with the call's variable values
  gsize = ((glob.src[0].arg if glob.src[0].op is Ops.CONST else glob.src[0]) if glob is not None else 1, 1, 1)
  lsize = (1, 1, 1)
  if renderer.has_local:
    from tinycore.codegen.gpudims import launch_dims
    gsize, lsize = launch_dims(uops)
  vars = tuple(sorted((u for u in uops if u.op is Ops.DEFINE_VAR), key=lambda v: v.arg[0]))
  n_bufs = sum(1 for u in uops if u.op is Ops.DEFINE_GLOBAL)
  ops, mem = _estimate(uops)
  if is_fused(ast):   # its key loop's trip count depends on the query tile (causal): counted by the writer
    from tinycore.codegen.attention import attention_flops
    ops = attention_flops(ast)
  return ProgramSpec(name, src, renderer.device, gsize, lsize, vars, n_bufs, uops=uops, ops=ops, mem=mem, index_dtype=idt)  # type: ignore[arg-type]
