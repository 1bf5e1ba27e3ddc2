"""Pattern matching over UOp graphs: UPat, PatternMatcher and graph_rewrite."""
from __future__ import annotations
import itertools, inspect
from typing import Any, Callable, Iterable
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType
from tinycore.helpers import TRACK_REWRITES

class UPat:
  """A pattern: op(s), dtype(s), sources, arg and a capture name. `src` as a tuple matches in order, as a list tries every
  permutation (for commutative ops), as a single UPat matches every source against it."""
  __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len", "custom_early_reject", "_match")
  def __init__(self, op: Ops | Iterable[Ops] | None = None, dtype: DType | Iterable[DType] | None = None, src=None, arg: Any = None,
               name: str | None = None, allow_any_len: bool = False):
    self.op = None if op is None else (frozenset([op]) if isinstance(op, Ops) else frozenset(op))
    self.dtype = None if dtype is None else (frozenset([dtype]) if isinstance(dtype, DType) else frozenset(dtype))
    if self.op is not None and (bad := [o for o in self.op if not isinstance(o, Ops)]): raise TypeError(f"UPat op must be Ops, got {bad[0]!r}")
    if self.dtype is not None and (bad := [d for d in self.dtype if not isinstance(d, DType)]):  # type: ignore[misc]
      raise TypeError(f"UPat dtype must be a DType, got {bad[0]!r}")  # type: ignore[index]
    if name is not None and not isinstance(name, str): raise TypeError(f"UPat name must be a str, got {name!r}")
    if src is not None and not isinstance(src, (tuple, list, UPat)):
      raise TypeError(f"UPat src must be a tuple, a list (permutations) or a UPat, not {type(src).__name__}")
    for s in (src if isinstance(src, (tuple, list)) else [src] if src is not None else []):
      if not isinstance(s, UPat): raise TypeError(f"UPat sources must be UPats, got {s!r}")
    self.src, self.arg, self.name, self.allow_any_len = src, arg, name, allow_any_len
    self._match = _compile(self)

  @staticmethod
  def var(name: str | None = None, dtype=None) -> UPat: return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name: str | None = None, dtype=None) -> UPat: return UPat(Ops.CONST, dtype, name=name)
  @staticmethod
  def const(dtype, b) -> UPat: return UPat(Ops.CONST, dtype, arg=b)
  # sugar so rules read like the expressions they match
  def _alu(self, op, *srcs) -> UPat:
    srcs = tuple(s if isinstance(s, UPat) else UPat.const(None, s) for s in srcs)
    return UPat(op, None, list((self,) + srcs) if op in GroupOp.Commutative else (self,) + srcs)
  def __add__(self, x): return self._alu(Ops.ADD, x)
  def __mul__(self, x): return self._alu(Ops.MUL, x)
  def __sub__(self, x): return self._alu(Ops.SUB, x)
  def __floordiv__(self, x): return self._alu(Ops.IDIV, x)
  def __mod__(self, x): return self._alu(Ops.MOD, x)
  def lt(self, x): return self._alu(Ops.CMPLT, x)
  def ne(self, x): return self._alu(Ops.CMPNE, x)
  def maximum(self, x): return self._alu(Ops.MAX, x)
  def __repr__(self):
    ops = "|".join(sorted(o.name for o in self.op)) if self.op else "*"
    return f"UPat({ops}{', name=' + repr(self.name) if self.name else ''}{', arg=' + repr(self.arg) if self.arg is not None else ''})"
  def match(self, u: UOp) -> list[dict[str, UOp]]:
    """Every way `u` matches, each as a dict of captures."""
    return self._match(u, {})

def _compile(p: UPat) -> Callable:
  """Build a matcher closure for one pattern: it returns the list of capture dicts (empty: no match). The node checks are
  inline and only the ones the pattern uses run; lists instead of generators keep a failed match to a few comparisons."""
  ops, dts, arg, name, src = p.op, p.dtype, p.arg, p.name, p.src
  has_arg, any_len = arg is not None, p.allow_any_len
  if isinstance(src, tuple): n, orders = len(src), [src]
  elif isinstance(src, list): n, orders = len(src), list(dict.fromkeys(itertools.permutations(src)))  # dedup identical orderings
  else: n, orders = -1, None

  def head(u: UOp, store: dict) -> dict | None:
    """The checks on `u` itself and its capture: the store to continue with, or None."""
    if ops is not None and u.op not in ops: return None
    if dts is not None and u.dtype not in dts and u.dtype.scalar() not in dts: return None
    if has_arg and u.arg != arg: return None
    if n >= 0 and (len(u.src) < n if any_len else len(u.src) != n): return None
    if name is None: return store
    if (prev := store.get(name)) is not None: return store if prev is u else None
    s = store.copy(); s[name] = u
    return s

  if src is None:
    def match(u, store):
      s = head(u, store)
      return [] if s is None else [s]
    return match
  if orders is None:  # one UPat for every source
    sub = src._match  # type: ignore[union-attr]
    def match_all(u, store):
      if (s := head(u, store)) is None: return []
      stores = [s]
      for x in u.src:
        stores = [s2 for s1 in stores for s2 in sub(x, s1)]
        if not stores: break
      return stores
    return match_all
  subs = [tuple(q._match for q in order) for order in orders]
  if len(subs) == 1 and n == 2:  # the common case, unrolled
    m0, m1 = subs[0]
    def match2(u, store):
      if (s := head(u, store)) is None: return []
      out = []
      for s1 in m0(u.src[0], s): out.extend(m1(u.src[1], s1))
      return out
    return match2
  def match_src(u, store):
    if (s := head(u, store)) is None: return []
    out = []
    for order in subs:
      stores = [s]
      for m, x in zip(order, u.src):
        stores = [s2 for s1 in stores for s2 in m(x, s1)]
        if not stores: break
      out.extend(stores)
    return out
  return match_src

class RewriteError(RuntimeError): pass

# (pattern, fn, fn takes ctx, where fn is defined, the capture name a bare-op rule passes, pass it positionally)
_Rule = tuple["UPat", Callable, bool, str, "str | None", bool]

class PatternMatcher:
  """An ordered list of (UPat, fn) rules, dispatched by op. `fn(**captures)` (plus `ctx` if it takes one) returns a
  replacement UOp or None."""
  def __init__(self, patterns: list[tuple[UPat, Callable]]):
    self.patterns = list(patterns)
    self.pdict: dict[Ops, list[_Rule]] = {}
    self.wildcard: list[_Rule] = []
    for p, fn in self.patterns:
      if not isinstance(p, UPat): raise TypeError(f"a PatternMatcher rule needs a UPat, got {type(p).__name__}: {p!r}")
      if not callable(fn): raise TypeError(f"the rule for {p!r} is not callable")
      try: params = inspect.signature(fn).parameters
      except (TypeError, ValueError): params = inspect.Signature().parameters
      # rules whose pattern checks nothing but the op skip matching; one-argument rules are called positionally
      direct = p.name if p.src is None and p.dtype is None and p.arg is None and p.op is not None and p.name is not None else None
      positional = direct is not None and list(params) == [direct]
      entry = (p, fn, "ctx" in params, _where(fn), direct, positional)
      if p.op is None: self.wildcard.append(entry)
      for o in (p.op or ()): self.pdict.setdefault(o, []).append(entry)
    # wildcard rules apply to every op, after the op-specific ones registered before them keep their order
    for o in list(self.pdict): self.pdict[o] = self.pdict[o] + [w for w in self.wildcard if w not in self.pdict[o]]
  def __add__(self, other: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.patterns + other.patterns)
  def rewrite(self, u: UOp, ctx=None) -> UOp | None:
    for p, fn, wants_ctx, where, direct, positional in self.pdict.get(u.op, self.wildcard):
      if positional:
        try: ret = fn(u)
        except Exception as e: _rule_failed(e, where, p, u)
        if ret is not None and ret is not u: return self._applied(where, u, ret)
        continue
      for captures in ([{direct: u}] if direct is not None else p._match(u, {})):
        try: ret = fn(ctx=ctx, **captures) if wants_ctx else fn(**captures)
        except Exception as e: _rule_failed(e, where, p, u)
        if ret is not None and ret is not u: return self._applied(where, u, ret)
    return None
  def _applied(self, where: str, u: UOp, ret) -> UOp:
    # rules may return other values (the gradient rules return a tuple per source); graph_rewrite insists on UOps
    if TRACK_REWRITES: tracked_rewrites.append((where, u, ret))
    if viz_recorder is not None: viz_recorder.applied(where, u, ret)
    return ret

def _rule_failed(e: Exception, where: str, p: UPat, u: UOp):
  """A TypeError in a rule is a broken rule: RewriteError naming it. Anything else keeps its type (callers may catch it)
  and gains a note naming the rule and the node."""
  if isinstance(e, RewriteError): raise e
  if isinstance(e, TypeError): raise RewriteError(f"rule {where} for {p!r} failed on {u.op.name}: {e}") from e
  # BaseException.add_note is Python 3.11+; on 3.10 the exception goes on without the note
  if hasattr(e, "add_note"): e.add_note(f"while applying rule {where} for {p!r} on {u.op.name} {u.dtype}")
  raise e

tracked_rewrites: list[tuple[str, UOp, UOp]] = []
def _where(fn) -> str:
  code = getattr(fn, "__code__", None)
  return f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}" if code else repr(fn)

def _checked(ret, u: UOp):
  if ret is not None and not isinstance(ret, UOp):
    where = tracked_rewrites[-1][0] if TRACK_REWRITES and tracked_rewrites else "a rule"
    raise RewriteError(f"{where} returned {type(ret).__name__}, not a UOp or None, on {u.op.name}")
  return ret

# VIZ=1 (tinycore/viz/switch.py) puts its recorder here; off, graph_rewrite pays this one global check
viz_recorder: Any = None

def graph_rewrite(sink: UOp, pm: PatternMatcher, ctx=None, top_down: bool = False, max_steps: int = 10_000_000) -> UOp:
  """Rewrite to a fixed point. Bottom-up (default): a node is rewritten after its sources. Top-down: rules are applied to
  a node before its sources are visited (what expansion-style passes want). Iterative, memoized on node identity."""
  if viz_recorder is not None: return viz_recorder.graph_rewrite(_rewrite, sink, pm, ctx, top_down, max_steps)
  return _rewrite(sink, pm, ctx, top_down, max_steps)

def _rewrite(sink: UOp, pm: PatternMatcher, ctx, top_down: bool, max_steps: int) -> UOp:
  replace: dict[UOp, UOp] = {}
  stack: list[tuple[UOp, int, Any]] = [(sink, 0, None)]
  steps = 0
  while stack:
    n, stage, extra = stack.pop()
    if n in replace and stage != 2: continue
    if stage == 0:
      if top_down:
        # rules on the node itself first, to a fixed point
        cur = n
        while (r := _checked(pm.rewrite(cur, ctx), cur)) is not None:
          steps += 1
          if steps > max_steps: raise RewriteError(f"graph_rewrite did not converge after {max_steps} rewrites")
          cur = r
          if cur in replace: break
        if cur is not n:
          stack.append((n, 2, cur)); stack.append((cur, 0, None)); continue
      stack.append((n, 1, None))
      stack.extend((s, 0, None) for s in reversed(n.src) if s not in replace)
    elif stage == 1:
      new_src = tuple(replace[s] for s in n.src)
      nn = n if new_src == n.src else n.replace(src=new_src)
      if nn is not n and nn in replace: replace[n] = replace[nn]; continue
      r = _checked(pm.rewrite(nn, ctx), nn) if not top_down or nn is not n else None
      if r is None:
        replace[n] = nn
        if nn is not n: replace[nn] = nn
      else:
        steps += 1
        if steps > max_steps: raise RewriteError(f"graph_rewrite did not converge after {max_steps} rewrites")
        stack.append((n, 2, r)); stack.append((r, 0, None))
    else:
      replace[n] = replace[extra]
  return replace[sink]

import tinycore.viz.switch  # noqa: E402,F401  (VIZ/PROFILE from the environment switch recording on here)
