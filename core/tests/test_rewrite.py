"""UPat / PatternMatcher / graph_rewrite: matching semantics, fixed points, top-down, errors that name the rule."""
import pytest
from tinycore.uop import UOp, Ops, Variable
from tinycore.dtype import dtypes
from tinycore.rewrite import UPat, PatternMatcher, graph_rewrite, RewriteError
from tinycore import rewrite

def c(v, dt=dtypes.index): return UOp.const(dt, v)
x, y = Variable("x", 0, 9), Variable("y", 0, 9)

class TestUPat:
  def test_op_dtype_arg(self):
    assert UPat(Ops.CONST, dtypes.index, arg=3).match(c(3)) == [{}]
    assert UPat(Ops.CONST, dtypes.int32).match(c(3)) == []
    assert UPat(Ops.CONST, arg=4).match(c(3)) == []
    assert UPat((Ops.ADD, Ops.MUL), name="a").match(x * 2) == [{"a": x * 2}]
  def test_sources_in_order_and_permuted(self):
    p = UPat(Ops.ADD, src=(UPat.var("a"), UPat.cvar("k")))
    assert p.match(x + 1) == [{"a": x, "k": c(1)}] and p.match(c(1) + x) == []
    pp = UPat(Ops.ADD, src=[UPat.var("a"), UPat.cvar("k")])
    assert pp.match(c(1) + x) == [{"a": x, "k": c(1)}]
  def test_same_name_means_same_node(self):
    p = UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("a")))
    assert p.match(x + x) == [{"a": x}] and p.match(x + y) == []
  def test_every_source(self):
    p = UPat(Ops.SINK, src=UPat(Ops.CONST))
    assert p.match(UOp(Ops.SINK, dtypes.void, (c(1), c(2)))) == [{}]
    assert p.match(UOp(Ops.SINK, dtypes.void, (c(1), x))) == []
  def test_allow_any_len(self):
    p = UPat(Ops.SINK, src=(UPat(Ops.CONST),), allow_any_len=True)
    assert p.match(UOp(Ops.SINK, dtypes.void, (c(1), x))) == [{}]
  def test_sugar(self):
    m = (UPat.var("a") + UPat.cvar("k")).match(c(2) + x)
    assert m == [{"a": x, "k": c(2)}]
  def test_malformed(self):
    with pytest.raises(TypeError, match="src must be"): UPat(Ops.ADD, src=3)
    with pytest.raises(TypeError, match="sources must be UPats"): UPat(Ops.ADD, src=(x,))
    with pytest.raises(TypeError, match="op must be Ops"): UPat("ADD")
    with pytest.raises(TypeError, match="dtype must be a DType"): UPat(Ops.ADD, dtype="int")
    with pytest.raises(TypeError, match="name must be a str"): UPat(Ops.ADD, name=3)
    with pytest.raises(TypeError, match="needs a UPat"): PatternMatcher([(Ops.ADD, lambda: None)])
    with pytest.raises(TypeError, match="not callable"): PatternMatcher([(UPat(Ops.ADD), 3)])

class TestGraphRewrite:
  fold = PatternMatcher([(UPat(Ops.ADD, src=(UPat.cvar("a"), UPat.cvar("b"))), lambda a, b: c(a.arg + b.arg))])
  def test_bottom_up_fixed_point(self):
    e = ((c(1) + c(2)) + c(3)) + c(4)
    assert graph_rewrite(e, self.fold) is c(10)
  def test_no_match_returns_same_node(self):
    e = x + y
    assert graph_rewrite(e, self.fold) is e
  def test_sources_rebuilt(self):
    e = UOp(Ops.SINK, dtypes.void, (x + (c(1) + c(2)),))
    assert graph_rewrite(e, self.fold).src[0] is x + c(3)
  def test_chained_rules(self):
    pm = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("k"))), lambda a, k: a + a if k.arg == 2 else None)]) + self.fold
    assert graph_rewrite(x * 2, pm) is x + x
  def test_rule_order_first_wins(self):
    pm = PatternMatcher([(UPat(Ops.ADD, name="e"), lambda e: c(1)), (UPat(Ops.ADD, name="e"), lambda e: c(2))])
    assert graph_rewrite(x + y, pm) is c(1)
  def test_ctx(self):
    seen = []
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda ctx, v: ctx.append(v.arg[0]))])
    graph_rewrite(x + y, pm, ctx=seen)
    assert sorted(seen) == ["x", "y"]
  def test_top_down(self):
    # top-down sees the parent before its sources are rewritten
    order = []
    pm = PatternMatcher([(UPat((Ops.ADD, Ops.MUL), name="e"), lambda e: order.append(e.op))])
    graph_rewrite((x * 2) + y, pm, top_down=True)
    assert order == [Ops.ADD, Ops.MUL]
    order.clear(); graph_rewrite((x * 2) + y, pm)
    assert order == [Ops.MUL, Ops.ADD]
  def test_deep_graph(self):
    e = x
    for i in range(20000): e = e + y
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: c(1) if v.arg[0] == "y" else None)])
    r = graph_rewrite(e, pm)
    assert r.src[1] is c(1) and len(r.toposort()) == 20002
  def test_not_converging(self):
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: Variable(v.arg[0], v.arg[1], v.arg[2] + 1))])
    with pytest.raises(RewriteError, match="converge"): graph_rewrite(x, pm, max_steps=50)

class TestRuleErrors:
  def test_type_error_names_rule(self):
    pm = PatternMatcher([(UPat(Ops.ADD, name="e"), lambda e: len(e.op))])
    with pytest.raises(RewriteError, match=r"test_rewrite.py:\d+.*ADD"): graph_rewrite(x + y, pm)
  def test_wrong_capture_names_rule(self):
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("b"))), lambda a, z: None)])
    with pytest.raises(RewriteError, match="test_rewrite.py"): graph_rewrite(x + y, pm)
  def test_other_errors_keep_type_with_note(self):
    def boom(e): raise ValueError("bad")
    pm = PatternMatcher([(UPat(Ops.ADD, name="e"), boom)])
    with pytest.raises(ValueError) as ei: graph_rewrite(x + y, pm)
    assert any("while applying rule test_rewrite.py" in n for n in ei.value.__notes__)
  def test_non_uop_return(self):
    pm = PatternMatcher([(UPat(Ops.ADD, name="e"), lambda e: 5)])
    with pytest.raises(RewriteError, match="returned int"): graph_rewrite(x + y, pm)

def test_track_rewrites():
  from tinycore.helpers import Context
  rewrite.tracked_rewrites.clear()
  with Context(TRACK_REWRITES=1):
    graph_rewrite(c(1) + c(2), TestGraphRewrite.fold)
  assert len(rewrite.tracked_rewrites) == 1 and rewrite.tracked_rewrites[0][2] is c(3)
  rewrite.tracked_rewrites.clear()
