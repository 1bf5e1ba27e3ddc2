"""TinyJit: run a function twice the ordinary way, capture the kernels of the second call, then replay them.

Call 1 runs normally (it realizes whatever was still lazy outside, e.g. weights). Call 2 runs with a hook in
run_schedule that records every ExecItem. Later calls skip Python graph building and scheduling entirely: the
captured runners run on the new input buffers (swapped into the slots the capture-time inputs held), with the
values of bound Variables passed as var_vals. Intermediate buffers belong to the captured items; outputs come
back as Tensors on the captured output buffers, so each replay overwrites the previous call's outputs (tinygrad's
semantics: copy an output you want to keep).

Arguments that are not Tensors (ints, floats, strings, tuples, dtypes, None, objects such as `self`) are baked into
the kernels as constants, so they are guards, as in torch.compile: each distinct set of values gets its own capture
(up to `TinyJit.max_captures`, then a JitError says which argument varies). A number that changes every call belongs
in a Tensor or a bound Variable. Tensor inputs must keep their shape, dtype and device (JitError otherwise).
Random draws (Tensor.rand, randn, dropout) take their key from buffers that each replay refills from the RNG counter,
so a replayed step draws what the same step would draw without the JIT."""
from __future__ import annotations
import functools, weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar
from tinycore.uop import UOp, Ops
from tinycore.helpers import JIT, DEBUG, GlobalCounters, all_int
from tinycore.engine.jit_memory import CaptureRecorder, share_intermediates
from tinycore.viz import switch as viz
from tinycore.tensor import _derived

R = TypeVar("R")

class JitError(RuntimeError):
  """Wrong use of TinyJit: inputs changed shape/dtype/device, non-Tensor outputs, nested capture."""

_capturing: list = []   # the TinyJit currently capturing, if any (nesting is an error)

def _is_buf_view(u: UOp) -> bool:
  if u.op is Ops.MULTI: return all(_is_buf_view(s) for s in u.src)   # a sharded input: one buffer per device
  return (u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)) and u.base.arg.is_allocated()

def _parts(u: UOp) -> tuple[UOp, ...]: return u.src if u.op is Ops.MULTI else (u,)   # a sharded value: its shards

def _leaf_key(x, where: str):
  """What a non-Tensor argument contributes to the capture key: equal keys mean the capture's constants still hold."""
  if x is None or isinstance(x, (bool, int, str, bytes)): return (type(x), x)
  if isinstance(x, float): return (float, x.hex())    # hex: -0.0 and 0.0 differ, and NaN equals NaN
  if isinstance(x, complex): return (complex, x.real.hex(), x.imag.hex())
  if isinstance(x, slice): return (slice, _leaf_key(x.start, where), _leaf_key(x.stop, where), _leaf_key(x.step, where))
  if isinstance(x, (set, frozenset)): return (type(x), frozenset(_leaf_key(v, where) for v in x))
  if type(x).__module__ == "numpy":
    if hasattr(x, "shape") and getattr(x, "ndim", 0): raise JitError(f"TinyJit argument {where} is a numpy array: its values would be "  # type: ignore[arg-type]
                                                                    "frozen into the capture; pass Tensor(array) instead")
    return (type(x), _leaf_key(x.item(), where))       # a numpy scalar: by value
  try: hash(x)
  except Exception: return (type(x), "id", id(x))      # unhashable object: by identity (the entry keeps it alive)
  return (type(x), x)                                  # dtypes, enums, functions, modules, `self`: by their own equality

def _walk_args(args, kwargs) -> tuple[list, list, tuple, list]:
  """Tensors, bound Variables, the key of everything else, and the objects that key names by identity.
  Containers (lists, tuples, dicts, at any depth) are walked; their shape belongs to the key."""
  from tinycore.tensor import Tensor
  tensors, binds, refs = [], [], []
  key: list[tuple] = []
  def walk(x, where: str):
    if isinstance(x, Tensor): tensors.append(x)
    elif isinstance(x, UOp) and x.op is Ops.BIND: binds.append(x)
    elif isinstance(x, (list, tuple)):
      key.append((where, type(x), len(x)))
      for i, y in enumerate(x): walk(y, f"{where}[{i}]")
    elif isinstance(x, dict):
      key.append((where, dict, tuple(sorted(map(repr, x)))))
      for k in sorted(x, key=repr): walk(x[k], f"{where}[{k!r}]")
    else:
      key.append((where, _leaf_key(x, where)))
      refs.append(x)
  for i, a in enumerate(args): walk(a, f"{i}")
  if kwargs: key.append(("kwargs", tuple(sorted(kwargs))))   # f(a=t) and f(b=t) can compute different things
  for k in sorted(kwargs): walk(kwargs[k], repr(k))
  return tensors, binds, tuple(key), refs

def _prepare_inputs(tensors: list) -> list:
  """Make every input Tensor a realized buffer (or a view of one) and return the buffers; no scheduling when they
  already are, so a replay with realized inputs never enters the scheduler."""
  from tinycore.tensor import Tensor
  pending = [t for t in tensors if not _is_buf_view(t.uop) and not (not all_int(t.shape) and t.uop.base.op is Ops.BUFFER)]
  for t in pending:
    # a const, a lazy expression or a permuted view: give it its own contiguous buffer (values unchanged)
    if all_int(t.shape) and t.uop.op is not Ops.CONTIGUOUS: t.uop = t.contiguous().uop
  if pending: Tensor.realize(*pending)
  bufs = []
  for t in tensors:
    for u in _parts(t.uop):   # a sharded input gives its shards' buffers, in device order
      if u.base.op is not Ops.BUFFER: raise JitError(f"TinyJit input of shape {t.shape} could not be realized into a buffer")
      bufs.append(u.base.arg)
  if len({id(b) for b in bufs}) != len(bufs): raise JitError("TinyJit got the same buffer as two inputs; pass it once (or .clone() one)")
  return bufs

def _walk_view(u: UOp, fn) -> UOp:
  """Rebuild `u` with fn(node) -> replacement or None, reaching into movement args (symbolic shapes live there)."""
  memo: dict[UOp, UOp] = {}
  def arg(a): return go(a) if isinstance(a, UOp) else tuple(arg(x) for x in a) if isinstance(a, tuple) else a
  def go(n: UOp) -> UOp:
    if (r := memo.get(n)) is None:
      if (r := fn(n)) is None: r = n.replace(src=tuple(go(s) for s in n.src), arg=arg(n.arg))
      memo[n] = r
    return r
  return go(u)

def _unbind_view(u: UOp) -> UOp:
  """A tensor's view with bound Variables unbound and its buffer anonymized: two calls match when these are equal."""
  base = u.base
  return _walk_view(u, lambda n: n.src[0] if n.op is Ops.BIND else UOp(Ops.NOOP, n.dtype, (), n.arg.size) if n is base else None)

def _var_vals(tensors: list, binds: list) -> dict[UOp, int]:
  vv: dict[UOp, int] = {}
  def see(n: UOp):
    if n.op is Ops.BIND: vv[n.src[0]] = n.src[1].arg
    return None
  for t in tensors:
    if not _is_buf_view(t.uop): _walk_view(t.uop, see)   # plain buffers carry no Variables
  for b in binds: vv[b.src[0]] = b.src[1].arg
  return vv

class InputInfo(tuple):
  """(view signature, dtype, device) of one input; a plain tuple so building and comparing it per call is cheap."""
  __slots__ = ()
  def __new__(cls, t):
    # a sharded input: its layout too
    view = (t.uop.shape, t.uop.arg) if t.uop.op is Ops.MULTI else t.uop.shape if _is_buf_view(t.uop) else _unbind_view(t.uop)
    return tuple.__new__(cls, (view, t.dtype, t.device))
  def describe(self) -> str:
    v = self[0]
    shape = v[0] if isinstance(v, tuple) and v and isinstance(v[0], tuple) else v if isinstance(v, tuple) else v.shape
    return f"shape {shape} {self[1]} on {self[2]}"

@dataclass
class CapturedJit(Generic[R]):
  """The replayable result of a capture: kernels, which of their buffer slots are inputs, and how to rebuild the return value."""
  ret_template: Any                                   # the return value with Tensors replaced by _Out(i)
  jit_cache: list                                     # ExecItems, in run order
  input_replace: dict[tuple[int, int], int]           # (item index, buffer slot) -> input index
  # per output: a BUFFER view uop, or ("in", input index, view over placeholders or None, placeholders)
  out_uops: list
  expected_inputs: tuple[InputInfo, ...]
  expected_vars: frozenset
  rng_keys: list = field(default_factory=list)        # key buffers of the random draws, in draw order (refilled per replay)

  def __len__(self): return len(self.jit_cache)

  def free_inputs(self):
    # replayed items must not keep the caller's last inputs alive
    for (j, i) in self.input_replace: self.jit_cache[j].bufs[i] = None

  def __call__(self, input_bufs: list, var_vals: dict[UOp, int]) -> None:
    if self.rng_keys:
      from tinycore.tensor_random import refill_keys
      refill_keys(self.rng_keys)
    one_by_one = DEBUG.value >= 2 or viz.profiler is not None   # each kernel timed on its own
    if not one_by_one and (graphed := self._graphed()) is not None and graphed.all_graphed:
      return graphed(self.jit_cache, var_vals, input_bufs, self._launch_items)   # the graphs take the inputs as arguments
    for (j, i), k in self.input_replace.items(): self.jit_cache[j].bufs[i] = input_bufs[k]
    if one_by_one: self._launch_items(self.jit_cache, var_vals)
    elif graphed is not None: graphed(self.jit_cache, var_vals, input_bufs, self._launch_items)
    elif not self._launch_fast(var_vals): self._launch_items(self.jit_cache, var_vals)
    self.free_inputs()

  @staticmethod
  def _launch_items(items: list, var_vals: dict[UOp, int]) -> None:
    for ei in items: ei.run(var_vals)

  def _graphed(self):
    """The kernels as device graphs (engine/jit_graph.py), built on the first replay that finds every buffer allocated;
    None where no device takes them, or with JIT=2 (tinygrad's switch for graphs)."""
    if (g := self.__dict__.get("_graph")) is not None: return g or None
    if JIT.value >= 2: return None
    if any(b is not None and not b.is_allocated() and (j, i) not in self.input_replace
           for j, ei in enumerate(self.jit_cache) for i, b in enumerate(ei.bufs)): return None
    from tinycore.engine.jit_graph import build
    self.__dict__["_graph"] = g = build(self.jit_cache, self.input_replace, self.expected_vars) or False
    return g or None

  def _launch_fast(self, var_vals: dict[UOp, int]) -> bool:
    """Launch every kernel straight from its program with the device handles gathered first (no ExecItem, no counters
    per item); Variables (a decode step's position) are looked up per kernel that uses them. False, with nothing
    launched, where that isn't possible (a copy, a buffer not allocated yet: the first replay after capture allocates
    through ExecItem.run). A runner other than a compiled kernel takes part when it says so (`direct = True`): it is
    then called as runner(bufs, var_vals)."""
    if (plan := self.__dict__.get("_fast")) is None:
      from tinycore.engine.run import CompiledRunner
      ok = all(type(ei.runner) is CompiledRunner or getattr(ei.runner, "direct", False) for ei in self.jit_cache)
      plan = self.__dict__["_fast"] = [(ei.runner, ei.bufs, ei.var_vals, type(ei.runner) is CompiledRunner) for ei in self.jit_cache] if ok else []
      ps = [getattr(r, "p", None) for r, _, _, _ in plan]
      self.__dict__["_fast_work"] = (sum(p.ops for p in ps if p is not None), sum(p.mem for p in ps if p is not None))
    if not plan: return False
    try: handles = [[b._buf for b in bufs] if compiled else None for _, bufs, _, compiled in plan]
    except AttributeError: return False
    if any(not b.is_allocated() for r, bufs, _, compiled in plan if not compiled for b in bufs): return False
    from tinycore.engine.run import sym_infer
    for (r, bufs, own_vars, compiled), h in zip(plan, handles):
      vv = {**own_vars, **var_vals} if own_vars else var_vals
      if not compiled:
        r(bufs, vv)
        continue
      p = r.p
      if p.vars:
        vals = tuple([vv[v] for v in p.vars])
        r._check_bounds(bufs, vals)
      else: vals = ()
      gs = p.global_size if r._static_size else tuple(sym_infer(g, vv) for g in p.global_size)
      r.prg(*h, global_size=gs, local_size=p.local_size, vals=vals, wait=False, work=p.ops + p.mem)
    ops, mem = self.__dict__["_fast_work"]
    GlobalCounters.kernel_count += len(plan)
    GlobalCounters.global_ops += ops
    GlobalCounters.global_mem += mem
    return True


@dataclass(frozen=True)
class _Out:
  i: int   # a slot in the return template: the i-th output Tensor

def _map_ret(ret, fn):
  """Rebuild `ret` (Tensors, None, and tuples/lists/dicts of them) with fn applied to each Tensor."""
  from tinycore.tensor import Tensor
  if isinstance(ret, Tensor): return fn(ret)
  if ret is None: return None
  if isinstance(ret, (tuple, list)): return type(ret)(_map_ret(x, fn) for x in ret)
  if isinstance(ret, dict): return {k: _map_ret(v, fn) for k, v in ret.items()}
  raise JitError(f"a TinyJit function must return Tensors (or None, or tuples/lists/dicts of them), not {type(ret).__name__}: "
                 "a Python value computed during capture would be frozen on replay; return it as a Tensor")

def _out_tensors(ret) -> list:
  outs: list = []
  _map_ret(ret, lambda t: outs.append(t))
  return outs

class _Uploads:
  """Every upload from host data (Tensor(np_array), Tensor([..])) made inside an observed call, as (shape, dtype,
  digest, Buffer). A capture replays such an upload with the values it had when captured, like a constant (as jax.jit bakes
  numpy arrays into its trace). That is right for constants and silently wrong for per-call data, so the capture
  compares its uploads with call 1's: one that changed between the two calls is an error, not a stale replay."""
  def __init__(self): self.seen: list[tuple] = []
  def __call__(self, buf, x) -> None:
    from tinycore.digest import blake2b
    self.seen.append((x.shape, str(x.dtype), blake2b(memoryview(x.reshape(-1).view("uint8")), digest_size=16).digest(), buf))
  def __enter__(self):
    from tinycore.tensor import upload_observers
    upload_observers.append(self)
    return self
  def __exit__(self, *exc):
    from tinycore.tensor import upload_observers
    upload_observers.remove(self)

class _Entry:
  """The capture state for one set of non-Tensor argument values: calls seen, the capture, and what its key names by identity."""
  __slots__ = ("cnt", "captured", "refs", "seen", "uploads")
  def __init__(self, cnt: int = 0, captured: CapturedJit | None = None, refs: list | None = None):
    self.cnt, self.captured, self.refs = cnt, captured, refs or []
    self.uploads: list = []         # call 1's uploads from host data (see _Uploads), compared with the capture's
    self.seen: list | None = None   # per input: a weak reference to the uop that last passed the fast replay's checks

_NOT_PLAIN = object()   # _replay_plain_buffers: this call takes the general path
_BUFFER, _RESHAPE = Ops.BUFFER, Ops.RESHAPE

class TinyJit(Generic[R]):
  """`@TinyJit` on a function of Tensors: call 1 runs it, call 2 captures its kernels, calls 3+ replay them.
  Each distinct set of non-Tensor argument values counts its calls and captures on its own (see the module doc)."""
  max_captures = 8   # distinct non-Tensor argument sets kept per function; each holds its kernels and buffers

  def __init__(self, fxn: Callable[..., R] | None, captured: CapturedJit | None = None, prune: bool = False, capture_first: bool = False):
    if fxn is None and captured is None: raise ValueError("TinyJit needs a function or a CapturedJit")
    self.fxn, self.prune = fxn, prune   # prune: accepted for tinygrad compatibility, every captured kernel is kept
    # capture_first: capture on call 1, for a function that leaves nothing lazy outside it to realize once (it saves
    # building and scheduling the whole graph a second time: an LLM's first prompt chunk)
    self.capture_first = capture_first
    self.reset()
    if captured is not None: self._entries[()] = self._entry = _Entry(2, captured)   # loaded: replays calls without other arguments
    if fxn is not None: functools.update_wrapper(self, fxn)

  def reset(self):
    """Forget every capture: the next call runs normally again and the one after captures."""
    self._entries: dict[tuple, _Entry] = {}
    self._entry = _Entry()

  # the entry of the latest call (tests and tools read these)
  @property
  def cnt(self) -> int: return self._entry.cnt
  @property
  def captured(self) -> CapturedJit | None: return self._entry.captured
  @property
  def jit_cache(self) -> list: return self.captured.jit_cache if self.captured is not None else []

  # decorating a method: bind the instance like a function would
  def __get__(self, obj, objtype=None): return self if obj is None else functools.partial(self.__call__, obj)

  def _run_plain(self, args, kwargs):
    from tinycore.tensor import Tensor
    ret = self.fxn(*args, **kwargs)
    if outs := [t for t in _out_tensors(ret) if t.uop.op is not Ops.CONST]: Tensor.realize(*outs)
    return ret

  def _entry_for(self, key: tuple, refs: list) -> _Entry:
    if (e := self._entries.get(key)) is not None: return e
    if self.fxn is None: raise JitError("this TinyJit was built from a capture and has no function to capture other non-Tensor argument values")
    if len(self._entries) >= self.max_captures:
      varying = sorted({k[0] for old in self._entries for k in {*old} ^ {*key}})
      raise JitError(f"TinyJit {getattr(self.fxn, '__qualname__', self.fxn)!r} was called with {len(self._entries) + 1} different sets of "
                     f"non-Tensor arguments (varying: argument {', '.join(varying) or '?'}); each set is baked into its own capture and "
                     f"TinyJit.max_captures is {self.max_captures}. Pass a value that changes per call as a Tensor or a bound Variable.")
    e = self._entries[key] = _Entry(1 if self.capture_first else 0, refs=refs)
    return e

  def __call__(self, *args, **kwargs) -> R:
    if _capturing: raise JitError("a TinyJit function was called while another one is capturing; nested TinyJit is not supported")
    if not JIT.value: return self._run_plain(args, kwargs)
    # (a sentinel, not None: a function returning None replayed on the fast path and then again on the general one)
    if not kwargs and (fast := self._replay_plain_buffers(args)) is not _NOT_PLAIN: return fast
    tensors, binds, key, refs = _walk_args(args, kwargs)
    self._entry = e = self._entry_for(key, refs)
    if e.cnt == 0:
      with _Uploads() as ups: ret = self._run_plain(args, kwargs)
      e.cnt, e.uploads = 1, [u[:3] for u in ups.seen]   # not the Buffers: call 1's data must not stay alive
      return ret
    bufs = _prepare_inputs(tensors)
    infos = tuple(InputInfo(t) for t in tensors)
    var_vals = _var_vals(tensors, binds)
    if e.cnt == 1: return self._capture(e, args, kwargs, tensors, bufs, infos, var_vals)
    self._check(infos, var_vals)
    e.cnt += 1
    e.captured(bufs, var_vals)
    return self._rebuild(e.captured.ret_template, tensors)

  def _replay_plain_buffers(self, args: tuple) -> Any:
    """The common replay, cheaply: every argument a Tensor that is a realized buffer of the captured shape, dtype and
    device (checked per call; a Tensor whose uop is the one last seen there was checked then). The result, or _NOT_PLAIN
    to take the general path (which also raises the errors)."""
    if (e := self._entries.get(())) is None or (c := e.captured) is None or c.expected_vars or len(args) != len(c.expected_inputs): return _NOT_PLAIN
    if (seen := e.seen) is None: seen = e.seen = [None] * len(args)
    bufs = []
    # (the enum members read once: Ops.BUFFER is a ~0.1 us class attribute lookup on Python 3.11, and this loop is most of
    # a small replay's Python time)
    BUFFER, RESHAPE = _BUFFER, _RESHAPE
    for k, t in enumerate(args):
      if (u := getattr(t, "uop", None)).__class__ is not UOp: return _NOT_PLAIN   # not a Tensor: the general path says what it is
      b = u if (op := u.op) is BUFFER else u.src[0] if op is RESHAPE and u.src[0].op is BUFFER else None
      if b is None or not hasattr(b := b.arg, "_buf"): return _NOT_PLAIN
      # weakly: the JIT must not keep a caller's input alive
      if (r := seen[k]) is None or r() is not u:
        if (u.shape, t.dtype, t.device) != c.expected_inputs[k]: return _NOT_PLAIN
        seen[k] = weakref.ref(u)
      bufs.append(b)
    if len(bufs) > 1 and len(set(bufs)) != len(bufs): return _NOT_PLAIN   # Buffers hash by identity
    self._entry = e
    e.cnt += 1
    c(bufs, {})
    if (tmpl := c.ret_template).__class__ is _Out and (u := c.out_uops[tmpl.i]).__class__ is UOp:   # one output of its own
      return _derived(u, None)
    return self._rebuild(tmpl, args)

  def _rebuild(self, tmpl, tensors):
    from tinycore.tensor import Tensor
    if isinstance(tmpl, _Out):
      u = self.captured.out_uops[tmpl.i]
      if isinstance(u, tuple):   # an output on an input's buffer: the same view of this call's input
        t_in = tensors[u[1]]
        if u[2] is None: return t_in
        # the view was captured over placeholders, one per buffer of that input (a sharded input has one per shard)
        return Tensor(u[2].substitute({ph: p.base for ph, p in zip(u[3], _parts(t_in.uop))}))
      # Tensor(u) would resolve Device.DEFAULT (env parsing) per call; the uop already knows everything
      return _derived(u, None)
    if isinstance(tmpl, (tuple, list)): return type(tmpl)(self._rebuild(x, tensors) for x in tmpl)
    if isinstance(tmpl, dict): return {k: self._rebuild(v, tensors) for k, v in tmpl.items()}
    return tmpl   # None

  def _check(self, infos, var_vals):
    exp = self.captured.expected_inputs
    if len(infos) != len(exp):
      raise JitError(f"TinyJit was captured with {len(exp)} input Tensors, now called with {len(infos)}")
    for k, (a, b) in enumerate(zip(infos, exp)):
      if a != b:
        what = "dtype" if a[1] != b[1] else "device" if a[2] != b[2] else "shape"
        raise JitError(f"TinyJit input {k} changed {what}: captured with {b.describe()}, now {a.describe()}; "
                       "shapes may change only through bound Variables (call .reset() to recapture)")
    if frozenset(var_vals) != self.captured.expected_vars:
      names = lambda s: sorted(v.arg[0] for v in s)
      raise JitError(f"TinyJit was captured with Variables {names(self.captured.expected_vars)}, now called with {names(var_vals)}")

  def _check_uploads(self, before: list, now: list, refilled: set[int]) -> None:
    for k, (a, b) in enumerate(zip(before, now)):
      if a[:2] == b[:2] and a[2] != b[2] and id(b[3]) not in refilled:
        name = getattr(self.fxn, "__qualname__", self.fxn)
        raise JitError(f"TinyJit {name!r} makes a Tensor from host data (upload {k + 1}: shape {b[0]}, numpy dtype {b[1]}) whose "
                       "values changed between calls; a captured function would replay the values it had when captured. "
                       "Pass that data as a Tensor argument of the jitted function instead")

  def _capture(self, e: _Entry, args, kwargs, tensors, bufs, infos, var_vals):
    from tinycore.tensor import Tensor
    from tinycore.engine import run
    from tinycore import tensor_random
    recorder = CaptureRecorder()
    captured = recorder.items
    rng_keys: list = []
    _capturing.append(self)
    run.capture_hooks.append(recorder)
    tensor_random.key_observers.append(rng_keys.append)
    try:
      with _Uploads() as ups:
        ret = self.fxn(*args, **kwargs)
        outs = _out_tensors(ret)   # raises on non-Tensor leaves before anything is kept
        if lazy := [t for t in outs if t.uop.op is not Ops.CONST]: Tensor.realize(*lazy)
    finally:
      tensor_random.key_observers.remove(rng_keys.append)
      run.capture_hooks.remove(recorder)
      recorder.close()
      _capturing.pop()
    # a random draw's key is an upload that changes every call by design: the replay refills it (rng_keys)
    self._check_uploads(e.uploads, ups.seen, {id(b) for b in rng_keys})
    e.uploads = []
    if DEBUG >= 1: print(f"JIT captured {len(captured)} kernels with {len(bufs)} inputs")
    # where the capture-time input buffers sit in the kernels: those slots get the new inputs on replay
    pos = {id(b): k for k, b in enumerate(bufs)}
    owner = [k for k, t in enumerate(tensors) for _ in _parts(t.uop)]
    input_replace = {(j, i): pos[id(b)] for j, ei in enumerate(captured) for i, b in enumerate(ei.bufs) if id(b) in pos}
    # outputs: a buffer view uop, unless the output *is* an input (then replay returns that input)
    out_uops: list = []
    for t in outs:
      # multi: a sharded input gave several buffers, so the flat buffer index is mapped back to its tensor
      if (b := _parts(t.uop)[0].base).op is Ops.BUFFER and id(b.arg) in pos:
        k = owner[pos[id(b.arg)]]
        if t.uop is tensors[k].uop: out_uops.append(("in", k, None, ()))
        else:   # the view over placeholders, not over the capture-time input: a capture must not keep its inputs alive
          phs = tuple(UOp(Ops.NOOP, p.base.dtype, (), ("jit input", k, i)) for i, p in enumerate(_parts(tensors[k].uop)))
          out_uops.append(("in", k, t.uop.substitute({p.base: ph for p, ph in zip(_parts(tensors[k].uop), phs)}), phs))
      else: out_uops.append(t.uop)
    cnt = iter(range(len(outs)))
    tmpl = _map_ret(ret, lambda t: _Out(next(cnt)))
    e.captured = CapturedJit(tmpl, captured, input_replace, out_uops, infos, frozenset(var_vals), rng_keys)
    e.captured.free_inputs()
    # the capture's intermediates share memory best-fit, as the eager plan frees and reuses them (engine/jit_memory.py)
    share_intermediates(captured)
    e.cnt = 2
    return ret
