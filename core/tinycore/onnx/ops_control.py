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
