"""Control flow that can be resolved while building the graph: If picks its branch from the condition's value, Loop
unrolls for the trip count and condition it reads. A condition computed on the device is realized to decide (the
graph after it then depends on that value, so such a model is not one static graph)."""
from __future__ import annotations
import collections
import numpy as np
from tinycore.onnx.registry import op, is_static

def _subgraph_inputs(graph): return [i.name for i in graph.input]

@op("If")
def if_(ctx, ins, attrs):
  cond = bool(ctx.array(ins[0]).reshape(-1)[0])
  branch = attrs["then_branch"] if cond else attrs["else_branch"]
  return tuple(ctx.run_graph(branch, ctx.scope))

@op("Loop")
def loop(ctx, ins, attrs):

  body = attrs["body"]
  names = _subgraph_inputs(body)
  trip = int(ctx.scalar(ins[0])) if len(ins) > 0 and ins[0] is not None else None
  cond = bool(ctx.scalar(ins[1])) if len(ins) > 1 and ins[1] is not None else True
  carried = list(ins[2:])
  if trip is None and not (len(ins) > 1 and ins[1] is not None):
    raise ValueError("Loop with neither a trip count nor a condition never ends")
  scans: list[list] = []
  i = 0
  while cond and (trip is None or i < trip):
    env = dict(zip(names, [np.array(i, dtype=np.int64), np.array(cond), *carried]))
    outs = ctx.run_graph(body, collections.ChainMap(env, ctx.scope))
    c = outs[0]
    cond = bool(ctx.scalar(c)) if c is not None else True
    carried = outs[1:1 + len(carried)]
    step_scans = outs[1 + len(carried):]
    if not scans: scans = [[] for _ in step_scans]
    for acc, v in zip(scans, step_scans): acc.append(v)
    i += 1
  n_scan = len(body.output) - 1 - len(carried)
  stacked = []
  for k in range(n_scan):
    vals = scans[k] if scans else []
    if not vals: stacked.append(np.zeros((0,), dtype=np.float32)); continue
    if all(is_static(v) for v in vals): stacked.append(np.stack([np.asarray(v) for v in vals]))
    else:
      ts = [ctx.tensor(v).unsqueeze(0) for v in vals]
      stacked.append(ts[0].cat(*ts[1:], dim=0) if len(ts) > 1 else ts[0])

  return tuple(carried) + tuple(stacked)

def _take(ctx, x, axis: int, t: int):
  """Slice t of x along axis, that axis dropped."""
  x = ctx.tensor(x)
  keep = tuple((t, t + 1) if a == axis else (0, s) for a, s in enumerate(x.shape))
  return x.shrink(keep).reshape(tuple(s for a, s in enumerate(x.shape) if a != axis))

@op("Scan", since=9)
def scan(ctx, ins, attrs):
  """Unrolled: the body runs once per position of the scan inputs, states carried, per-step outputs stacked."""
  body, m = attrs["body"], attrs["num_scan_inputs"]
  states, xs = list(ins[:len(ins) - m]), [ctx.tensor(x) for x in ins[len(ins) - m:]]
  in_axes = [a % x.ndim for a, x in zip(attrs.get("scan_input_axes", [0] * m), xs)]
  in_dirs = attrs.get("scan_input_directions", [0] * m)
  lengths = {x.shape[a] for x, a in zip(xs, in_axes)}
  if len(lengths) != 1: raise ValueError(f"Scan inputs disagree on the sequence length: {sorted(lengths)}")
  steps = lengths.pop()
  names = _subgraph_inputs(body)
  n_out = len(body.output) - len(states)
  per_step: list[list] = [[] for _ in range(n_out)]
  for t in range(steps):
    slices = [_take(ctx, x, a, steps - 1 - t if d else t) for x, a, d in zip(xs, in_axes, in_dirs)]
    outs = ctx.run_graph(body, collections.ChainMap(dict(zip(names, [*states, *slices])), ctx.scope))
    states = list(outs[:len(states)])
    for acc, v in zip(per_step, outs[len(states):]): acc.append(ctx.tensor(v))
  out_axes, out_dirs = attrs.get("scan_output_axes", [0] * n_out), attrs.get("scan_output_directions", [0] * n_out)
  stacked = []
  for vals, a, d in zip(per_step, out_axes, out_dirs):
    if not vals: raise ValueError("Scan over a sequence of length 0 has no outputs to stack")
    if d: vals = vals[::-1]
    axis = a % (vals[0].ndim + 1)
    ts = [v.unsqueeze(axis) for v in vals]
    stacked.append(ts[0].cat(*ts[1:], dim=axis) if len(ts) > 1 else ts[0])
  return tuple(states) + tuple(stacked)
