"""The spec validator: well-formed graphs pass at each stage, malformed ones raise SpecError naming node and rule."""
import pytest
from tinycore.uop import UOp, Ops, Variable
from tinycore.dtype import dtypes
from tinycore.spec import verify, SpecError

def c(v, dt=dtypes.index): return UOp.const(dt, v)
i = Variable("i", 0, 9)
buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(10), (), 0)
out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(10), (), 1)
r = UOp(Ops.RANGE, dtypes.index, (c(10),), ("g", 0))

def bad(u, stage, *words):
  with pytest.raises(SpecError) as e: verify(u, stage)
  msg = str(e.value)
  for w in words: assert w in msg, msg
  return e.value

def good_kernel():
  ld = buf.index(r).load()
  return UOp(Ops.SINK, dtypes.void, (out.index(r).store(ld * c(2.0, dtypes.float32)),))

def test_good_kernel(): assert verify(good_kernel(), "kernel")
def test_alu_dtypes_agree():
  e = bad(UOp(Ops.ADD, dtypes.index, (i, c(1, dtypes.int32))), "kernel", "ADD", "source dtype")
  assert e.uop.op is Ops.ADD and "expr:" in str(e)
def test_comparison_outputs_bool(): bad(UOp(Ops.CMPLT, dtypes.index, (i, c(3))), "kernel", "CMPLT must output bool")
def test_where_condition_bool(): bad(UOp(Ops.WHERE, dtypes.index, (i, c(1), c(2))), "kernel", "WHERE condition must be bool")
def test_where_branches(): bad(UOp(Ops.WHERE, dtypes.index, (i.lt(3), c(1), c(2.0, dtypes.float32))), "kernel", "branches")
def test_arity(): bad(UOp(Ops.ADD, dtypes.index, (i,)), "kernel", "takes 2 sources")
def test_idiv_int_only(): bad(UOp(Ops.IDIV, dtypes.float32, (c(1.0, dtypes.float32), c(2.0, dtypes.float32))), "kernel", "integer only")
def test_const_arg_type():
  bad(UOp(Ops.CONST, dtypes.int32, (), 1.5), "kernel", "int CONST")
  # (args equal across types hash-cons together: 7 would return a live 7.0 node, so use a value nothing else makes)
  bad(UOp(Ops.CONST, dtypes.float32, (), 987_654_321), "kernel", "float CONST")
  bad(UOp(Ops.CONST, dtypes.bool, (), 2), "kernel", "bool CONST")  # (1 would hash-cons to True)
  bad(UOp(Ops.CONST, dtypes.uint8, (), 300), "kernel", "out of the range")
def test_index_needs_pointer():
  bad(UOp(Ops.INDEX, dtypes.float32, (c(1.0, dtypes.float32), r)), "kernel", "INDEX's buffer")
  bad(UOp(Ops.INDEX, buf.dtype, (buf, c(1.0, dtypes.float32))), "kernel", "INDEX's index must be an int")
  bad(UOp(Ops.INDEX, buf.dtype, (buf, r, i)), "kernel", "valid must be bool")
def test_load_store():
  bad(UOp(Ops.LOAD, dtypes.float32, (r,)), "kernel", "LOAD's first source")
  bad(UOp(Ops.LOAD, dtypes.int32, (buf.index(r),)), "kernel", "LOAD dtype")
  bad(out.index(r).store(c(1, dtypes.int32)), "kernel", "STORE of")
def test_range_bound(): bad(UOp(Ops.RANGE, dtypes.index, (c(3.0, dtypes.float32),), ("g", 0)), "kernel", "RANGE bound must be an int")
def test_variable_and_bind():
  bad(UOp(Ops.DEFINE_VAR, dtypes.index, (), ("n", 5, 1)), "kernel", "min 5 > max 1")
  bad(UOp(Ops.BIND, dtypes.index, (Variable("n", 1, 5), c(9))), "kernel", "outside [1, 5]")
  with pytest.raises(ValueError, match="out of the bounds"): Variable("n", 1, 5).bind(9)
def test_dangling_reduce_range():
  rr = UOp(Ops.RANGE, dtypes.index, (c(4),), ("r", 0, 0))
  red = UOp(Ops.REDUCE, dtypes.float32, (buf.index(rr).load(), rr), Ops.ADD)
  ok = UOp(Ops.SINK, dtypes.void, (out.index(r).store(red),))
  assert verify(ok, "kernel")
  stray = UOp(Ops.SINK, dtypes.void, (out.index(r + rr).store(red),))
  bad(stray, "kernel", "outside the REDUCE")
def test_stage_separation():
  bad(UOp(Ops.SINK, dtypes.void, (UOp(Ops.RESHAPE, dtypes.float32, (buf,), (10,)),)), "kernel", "tensor-level op")
  bad(good_kernel(), "tensor", "kernel-level op")
  with pytest.raises(ValueError, match="unknown spec stage"): verify(good_kernel(), "nope")

def test_tensor_movement():
  x = UOp.const(dtypes.float32, 1.0, "CPU").reshape((1, 1)).expand((4, 6))
  assert verify(x.reshape((24,)).reshape((2, 12)).permute((1, 0)), "tensor")
  bad(x.reshape((5, 5)), "tensor", "changes the element count")
  bad(UOp(Ops.PERMUTE, dtypes.float32, (x,), (0, 0)), "tensor", "not a permutation")
  bad(UOp(Ops.EXPAND, dtypes.float32, (x,), (8, 6)), "tensor", "only 1-sized dims expand")
  bad(UOp(Ops.PAD, dtypes.float32, (x,), ((1, -1), (0, 0))), "tensor", "nonnegative")
  bad(UOp(Ops.SHRINK, dtypes.float32, (x,), ((0, 5), (0, 6))), "tensor", "outside the shape")
  bad(UOp(Ops.FLIP, dtypes.float32, (x,), (True,)), "tensor", "1 entries for 2 dims")
  bad(x + x.reshape((6, 4)), "tensor", "different shapes")

def test_program():
  ld = buf.index(r).load()
  st = out.index(r).store(ld)
  prog = [buf, out, r, buf.index(r), ld, out.index(r), st, UOp(Ops.END, dtypes.void, (r,))]
  assert verify(prog, "program")
  with pytest.raises(SpecError, match="never closed"): verify(prog[:-1], "program")
  with pytest.raises(SpecError, match="before it is defined"): verify([buf, out, r, ld, buf.index(r)], "program")

@pytest.mark.needs_device
def test_real_pipeline_passes():
  """Kernels the scheduler and lowerer really produce are well-formed at every stage."""
  np = pytest.importorskip("numpy")
  from tinycore.tensor import Tensor
  from tinycore.codegen.lowerer import lower_kernel
  from tinycore.codegen.linearize import linearize
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  a = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
  outs = [(a.permute(2, 0, 1).pad(((1, 1), (0, 0), (2, 0))) + 1).sum(axis=1), a.reshape(6, 4) @ Tensor.ones(4, 3), a[:, 1:, ::2].contiguous()]
  for o in outs:
    verify(o.uop, "tensor")
    for si in o.schedule():
      if si.is_copy: continue
      k = lower_kernel(si.ast)
      verify(k, "kernel")
      k = graph_rewrite(k, symbolic)
      verify(k, "kernel")
      verify(linearize(k), "program")
