"""The views the page asks for, computed from a (validated) trace: the UOp graph after any step of a rewrite, the text
of a step's before/after trees (the diff view), a kernel's program listing, the summary lists.

Replaying works on the UOp table alone, so a saved file replays like a live run: the graph after k steps is the input
with the first k steps' `before -> after` applied wherever they appear, every user of a replaced node rebuilt with its
new sources. UOps are hash-consed, so a rebuilt node with the same op, dtype, arg and sources *is* the recorded one: a
bottom-up step (whose `before` already has rewritten sources) is found once its sources are replaced."""
from __future__ import annotations
from typing import Any

MAX_GRAPH_NODES = 1500   # dagre lays out a few thousand nodes in seconds; beyond, the page shows the part nearest the sink
MAX_TREE_LINES = 600

class TraceIndex:
  def __init__(self, trace: dict):
    self.trace = trace
    self.rows: list[list] = list(trace["uops"])   # + nodes that replays build (a parent rebuilt with new sources)
    self._keys: dict[tuple, int] | None = None
    self._steps: dict[tuple[int, int], int] = {}   # (rewrite, step) -> sink id after that many steps

  # ---- the node table
  def _key_map(self) -> dict[tuple, int]:
    if self._keys is None: self._keys = {(r[0], r[1], r[2], tuple(r[3])): i for i, r in enumerate(self.rows)}
    return self._keys
  def _intern(self, op: str, dtype: str, arg: str, src: list[int]) -> int:
    keys = self._key_map()
    if (i := keys.get(k := (op, dtype, arg, tuple(src)))) is None:
      i = keys[k] = len(self.rows)
      self.rows.append([op, dtype, arg, list(src)])
    return i

  def _apply(self, root: int, mapping: dict[int, int]) -> int:
    """`root`'s graph with every node in `mapping` replaced by its image (itself rewritten again if it is also a key),
    and every node above a replaced one rebuilt; a rebuilt node that is a key is replaced too, as graph_rewrite does when
    it meets a node it has rewritten before."""
    memo: dict[int, int] = {}
    stack = [root]
    budget = 20 * (len(self.rows) + len(mapping)) + 1000   # a cyclic mapping (only a forged file has one) must not hang
    while stack:
      budget -= 1
      if budget < 0: raise ValueError("the rewrite's steps form a cycle; it can't be replayed")
      x = stack[-1]
      if x in memo: stack.pop(); continue
      if (t := mapping.get(x)) is not None:
        if t in memo: memo[x] = memo[t]; stack.pop()
        else: stack.append(t)
        continue
      src = self.rows[x][3]
      if pending := [s for s in src if s not in memo]: stack.extend(reversed(pending)); continue
      new = [memo[s] for s in src]
      y = x if new == src else self._intern(self.rows[x][0], self.rows[x][1], self.rows[x][2], new)
      if y != x and y in mapping:
        if y in memo: memo[x] = memo[y]; stack.pop()
        else: stack.append(y)
        continue
      memo[x] = y
      stack.pop()
    return memo[root]

  def sink_after(self, r: int, k: int) -> int:
    """The sink of rewrite `r` after its first `k` steps: every step's `before` replaced wherever it appears."""
    rw = self.trace["rewrites"][r]
    steps = rw["steps"]
    if k <= 0: return rw["input"]
    if k >= len(steps): return rw["output"]
    if (hit := self._steps.get((r, k))) is None:
      if len(self._steps) > 4096: self._steps.clear()
      hit = self._steps[(r, k)] = self._apply(rw["input"], {b: a for _, b, a in steps[:k]})
    return hit

  # ---- payloads
  def graph(self, root: int, limit: int = MAX_GRAPH_NODES) -> dict:
    """Nodes reachable from `root`, nearest first (breadth-first), at most `limit`."""
    order, seen = [root], {root}
    for x in order:
      if len(order) >= limit: break
      for s in self.rows[x][3]:
        if s not in seen and len(order) < limit: seen.add(s); order.append(s)
    nodes = [{"id": i, "op": self.rows[i][0], "dtype": self.rows[i][1], "arg": self.rows[i][2], "src": [s for s in self.rows[i][3] if s in seen]}
             for i in order]
    return {"root": root, "nodes": nodes, "truncated": len(order) >= limit and any(s not in seen for i in order for s in self.rows[i][3])}

  def tree_text(self, root: int, limit: int = MAX_TREE_LINES) -> list[str]:
    """`root` as an indented tree, one node a line; a node already printed is referenced by id instead of repeated."""
    lines: list[str] = []
    printed: set[int] = set()
    stack = [(root, 0)]
    while stack and len(lines) < limit:
      x, depth = stack.pop()
      op, dtype, arg, src = self.rows[x]
      pad = "  " * depth
      if x in printed: lines.append(f"{pad}x{x} ({op}, see above)"); continue
      printed.add(x)
      lines.append(f"{pad}x{x} {op} {dtype}{' ' + arg if arg else ''}")
      stack.extend((s, depth + 1) for s in reversed(src))
    if stack: lines.append(f"... ({len(stack)} more subtrees not shown)")
    return lines

  def rewrite_view(self, r: int, k: int) -> dict:
    """Rewrite `r` as it stands after step `k` (0: its input): the graph, the nodes that step made, and its diff."""
    rw = self.trace["rewrites"][r]
    steps = rw["steps"]
    k = max(0, min(k, len(steps)))
    sink = self.sink_after(r, k)
    g = self.graph(sink)
    out: dict[str, Any] = {"rewrite": r, "step": k, "nsteps": len(steps), "matcher": rw["matcher"], "caller": rw["caller"], "stage": rw["stage"],
                           "kernel": rw["kernel"], "graph": g, "changed": [], "focus": None, "rule": None, "before": [], "after": []}
    if k > 0:
      where, before, after = steps[k - 1]
      prev = {n["id"] for n in self.graph(self.sink_after(r, k - 1))["nodes"]}
      out["changed"] = changed = [n["id"] for n in g["nodes"] if n["id"] not in prev]
      # where the eye should go: the node the rule produced, else the deepest node this step rebuilt
      ids = {n["id"] for n in g["nodes"]}
      out["focus"] = after if after in ids else (changed[-1] if changed else None)
      out["rule"], out["before"], out["after"] = where, self.tree_text(before), self.tree_text(after)
    return out

  def program_lines(self, ids: list[int]) -> list[str]:
    pos = {u: i for i, u in enumerate(ids)}
    out = []
    for i, u in enumerate(ids):
      op, dtype, arg, src = self.rows[u]
      srcs = ", ".join(str(pos[s]) if s in pos else f"x{s}" for s in src)
      out.append(f"{i:4d} {op:<14} {dtype:<22} [{srcs}] {arg}".rstrip())
    return out

  def kernel_view(self, i: int) -> dict:
    k = self.trace["kernels"][i]
    rewrites = [j for j, r in enumerate(self.trace["rewrites"]) if r["kernel"] == i]
    return {"index": i, "name": k["name"], "device": k["device"], "renderer": k["renderer"], "opts": k["opts"], "size": k["size"],
            "error": k["error"], "src": k["src"], "program": self.program_lines(k["program"]), "ast": k["ast"], "rewrites": rewrites}

  def summary(self) -> dict:
    t = self.trace
    per_kernel: dict[int, int] = {}
    for r in t["rewrites"]:
      if r["kernel"] is not None: per_kernel[r["kernel"]] = per_kernel.get(r["kernel"], 0) + 1
    return {"kernels": [{"index": i, "name": k["name"], "device": k["device"], "size": k["size"], "rewrites": per_kernel.get(i, 0)}
                        for i, k in enumerate(t["kernels"])],
            "rewrites": [{"index": i, "matcher": r["matcher"], "caller": r["caller"], "stage": r["stage"], "kernel": r["kernel"], "depth": r["depth"],
                          "steps": len(r["steps"])} for i, r in enumerate(t["rewrites"])],
            "profile_events": len(t["profile"]), "uops": len(t["uops"])}
