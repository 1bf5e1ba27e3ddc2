"""OnnxRunner: run a loaded ONNX graph as a lazy tinycore graph, node by node, in topological (file) order.

Values known while building (initializers that are small integers, Shape results, anything computed only from them)
stay numpy and are folded with the onnx package's reference kernels, so shape arithmetic never becomes device work and
the Tensor graph that remains is static: a call is lazy (nothing runs until an output is realized) and can be wrapped in
TinyJit.

With `dynamic_axes={"seq": 512}` the declared dims of that name become a symbolic Variable (dynamic.py): every size up to
the maximum runs the same kernels, and `jit=True` replays one TinyJit capture for all of them."""
from __future__ import annotations
import collections
from typing import Any
import numpy as np
from tinycore.onnx.loader import LoadedModel, load
from tinycore.onnx.registry import SINCE, UnsupportedOpError, attr_value, is_static, load_all
from tinycore.onnx.context import OpContext, onnx_dtype
from tinycore.onnx.dynamic import DynamicAxes, is_sym, read_concrete
from tinycore.onnx import symbolic_fold

STATIC_INT_LIMIT = 64        # integer initializers up to this many elements stay numpy (they are shapes, axes, indices)
FOLD_LIMIT = 1 << 16         # fold a node on the host only when its static inputs are this small
NO_FOLD = {"If", "Loop", "Scan", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}

def _graph_ops(graph) -> set[str]:
  ops = set()
  for n in graph.node:
    ops.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}")
    for a in n.attribute:
      if a.type == 5: ops |= _graph_ops(a.g)
      if a.type == 10: ops |= set().union(*(_graph_ops(g) for g in a.graphs))
  return ops

def declared_shape(value_info) -> list[int | str | None]:
  """Declared dims of a graph input: ints, names of dynamic axes, or None when unnamed."""
  t = value_info.type.tensor_type
  if not t.HasField("shape"): return []
  return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]

class OnnxRunner:
  def __init__(self, model, device: str | None = None, dynamic_axes: dict[str, int] | None = None, jit: bool = False):
    """`dynamic_axes`: {dim_param name: largest size} for the declared dims to bind as symbolic Variables (others still
    accept any size, building a graph per size). `jit`: run the graph under one TinyJit (replayed while the inputs keep
    their shapes, or differ only in dynamic axes); its outputs are then overwritten by the next call."""
    from tinycore.device import Device
    self.model: LoadedModel = model if isinstance(model, LoadedModel) else load(model)
    self.device = device or Device.DEFAULT
    self.handlers = load_all()
    missing = sorted(o for o in _graph_ops(self.model.graph) if o not in self.handlers)
    if missing: raise UnsupportedOpError(f"tinycore.onnx doesn't implement: {', '.join(missing)}")
    from tinycore.tensor import Tensor
    self.constants: dict[str, Any] = {}
    for name, arr in self.model.weights.items():
      small_int = arr.dtype.kind in "iub" and arr.size <= STATIC_INT_LIMIT
      self.constants[name] = np.array(arr) if small_int else Tensor(np.require(arr, requirements='C'), device=self.device).realize()
    graph = self.model.graph
    init = set(self.model.weights)
    self.inputs = {i.name: i for i in graph.input if i.name not in init}
    self.output_names = [o.name for o in graph.output]
    self._fold_cache: dict[bytes, Any] = {}
    self._const_cache: dict[tuple, Any] = {}
    self.dynamic = DynamicAxes(dynamic_axes) if dynamic_axes else None
    if self.dynamic is not None:
      declared = {d for vi in self.inputs.values() for d in declared_shape(vi) if isinstance(d, str)}
      unknown = sorted(set(self.dynamic.maxima) - declared)
      if unknown: raise ValueError(f"dynamic_axes {unknown} name no input dim; the model's named dims are {sorted(declared)}")
    self._jit = None
    if jit:
      from tinycore.engine.jit import TinyJit
      self._jit = TinyJit(self._run_outputs)

  # ---- inputs
  def _bind_input(self, name: str, value, values: dict[str, int]) -> Any:
    from tinycore.tensor import Tensor
    vi = self.inputs[name]
    if vi.type.HasField("sequence_type"):   # seq(tensor): a list of values, each bound like a tensor input
      if not isinstance(value, (list, tuple)): raise TypeError(f"input {name!r} is a sequence: pass a list, got {type(value).__name__}")
      return [v if isinstance(v, Tensor) else Tensor(np.require(np.asarray(v), requirements='C'), device=self.device) for v in value]
    tt = vi.type.tensor_type
    want = onnx_dtype(tt.elem_type, f"input {name!r}") if tt.elem_type else None   # refuses string inputs, naming them
    if not isinstance(value, Tensor):
      arr = np.asarray(value)
      if arr.dtype.kind == "V" or arr.dtype.name.startswith(("bfloat16", "float8", "float4", "int4", "uint4")):
        # ml_dtypes' host arrays (what onnx's numpy_helper returns for these types) have no Tensor constructor yet
        raise UnsupportedOpError(f"input {name!r}: feeding a numpy {arr.dtype.name} array (pass a Tensor of that dtype instead)")
    shape = declared_shape(vi)
    if self.dynamic is not None and any(isinstance(d, str) and d in self.dynamic.vars for d in shape):
      if isinstance(value, Tensor) and all(isinstance(d, int) for d in value.shape): value = value.numpy()
      if not isinstance(value, Tensor):
        arr = np.asarray(value)
        if len(shape) != arr.ndim: raise ValueError(f"input {name!r} has shape {arr.shape}, the model declares {len(shape)} dims")
        value = self.dynamic.bind(name, shape, arr, self.device, values)
    x = value if isinstance(value, Tensor) else Tensor(np.require(np.asarray(value), requirements='C'), device=self.device)
    if want is not None:
      if x.dtype != want:
        raise TypeError(f"input {name!r} must be {want.name}, got {x.dtype.name}")
    if shape:
      if len(shape) != len(x.shape) or any(isinstance(d, int) and d > 0 and d != s for d, s in zip(shape, x.shape)):
        raise ValueError(f"input {name!r} has shape {tuple(x.shape)}, the model declares {tuple(d if d else '?' for d in shape)}")
    return x

  def __call__(self, inputs: dict[str, Any] | None = None, **kwargs) -> dict[str, Any]:
    feeds = {**(inputs or {}), **kwargs}
    unknown = set(feeds) - set(self.inputs)
    if unknown: raise ValueError(f"unknown input(s) {sorted(unknown)}; the model's inputs are {list(self.inputs)}")
    missing = [n for n in self.inputs if n not in feeds]
    if missing: raise ValueError(f"missing input(s) {missing}; the model's inputs are {list(self.inputs)}")
    values: dict[str, int] = {}
    bound = {n: self._bind_input(n, v, values) for n, v in feeds.items()}
    if self._jit is not None: outs = self._jit(**bound)
    else: outs = self._run_outputs(**bound)
    if self.dynamic is not None: outs = [o if isinstance(o, list) else read_concrete(o, values) for o in outs]
    return dict(zip(self.output_names, outs))

  def _run_outputs(self, **bound) -> list:
    env: dict[str, Any] = dict(self.constants)
    env.update(bound)
    outs = self.run_graph(self.model.graph, env)
    ctx = OpContext(self.model.opset, self.device, self.run_graph, const_cache=self._const_cache)
    outs = [[ctx.tensor(x) for x in v] if isinstance(v, list) else ctx.tensor(v) for v in outs]   # a list: a sequence output
    if self._jit is not None: outs = [[x.realize() for x in v] if isinstance(v, list) else v.realize() for v in outs]
    return outs

  # ---- graph execution (also used for If/Loop bodies, with the outer scope visible)
  def run_graph(self, graph, env) -> list:
    scope: collections.ChainMap = collections.ChainMap({}, env)
    for init in graph.initializer:   # subgraph initializers
      if init.name not in scope:
        from tinycore.onnx.loader import tensor_to_numpy
        scope[init.name] = tensor_to_numpy(init, where="subgraph")
    for node in graph.node:
      absent = [n for n in node.input if n and n not in scope]
      if absent: raise ValueError(f"ONNX node {node.name or node.op_type}: input(s) {absent} are never produced before it")
      ins = [scope[n] if n else None for n in node.input]
      outs = self._run_node(node, ins, scope)
      if not isinstance(outs, (tuple, list)): outs = (outs,)
      for name, v in zip(node.output, outs):
        if name: scope[name] = v
    return [scope[o.name] for o in graph.output]

  def _run_node(self, node, ins: list, scope):
    op_type = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
    if self.model.opset < SINCE.get(op_type, 1):
      raise UnsupportedOpError(f"{op_type} at opset {self.model.opset}: tinycore.onnx follows opset {SINCE[op_type]}+ for this op")
    attrs = {a.name: attr_value(a) for a in node.attribute}
    present = [x for x in ins if x is not None]
    if any(is_sym(x) for x in present):   # shape arithmetic on symbolic sizes: exact on the host, or the handler runs
      if op_type not in NO_FOLD and (done := symbolic_fold.fold(op_type, ins, attrs)) is not None: return done
    elif present and op_type not in NO_FOLD and all(is_static(x) and x.size <= FOLD_LIMIT for x in present):
      folded = self._fold(node, ins)
      if folded is not None: return folded
    ctx = OpContext(self.model.opset, self.device, self.run_graph, node.name or op_type, len(node.output), scope, self._const_cache)
    try: return self.handlers[op_type](ctx, ins, attrs)
    except UnsupportedOpError: raise
    except (ValueError, TypeError, RuntimeError) as e:
      raise type(e)(f"ONNX node {node.name or '?'} ({op_type}): {e}") from e

  def _fold(self, node, ins: list):
    """Evaluate a node whose inputs are all static with onnx's reference kernels (numpy); None when it can't."""
    try:
      from onnx import helper
      from onnx.reference import ReferenceEvaluator
      key = node.SerializeToString()
      if key not in self._fold_cache:
        names = [f"i{k}" if n else "" for k, n in enumerate(node.input)]
        outs = [f"o{k}" if n else "" for k, n in enumerate(node.output)]
        n2 = helper.make_node(node.op_type, names, outs, domain=node.domain)
        n2.attribute.extend(node.attribute)
        g = helper.make_graph([n2], "fold", [helper.make_tensor_value_info(n, 0, None) for n in names if n],
                              [helper.make_tensor_value_info(n, 0, None) for n in outs if n])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.model.opset)])
        self._fold_cache[key] = (ReferenceEvaluator(m), [n for n in names if n])
      ev, names = self._fold_cache[key]
      res = ev.run(None, {n: np.asarray(v) for n, v in zip(names, [x for x in ins if x is not None])})
      out, it = [], iter(res)
      for n in node.output: out.append(np.asarray(next(it)) if n else None)
      return tuple(out)
    except Exception:
      return None
