"""Rebuild a graph bottom-up with some nodes replaced, walking it with an explicit stack (deep graphs don't hit the
recursion limit) and caching nothing on the nodes (UOp.substitute's cached toposort holds the root in a cycle)."""
from __future__ import annotations
from typing import Callable
from tinycore.uop import UOp

def rebuild(root: UOp, leaf: Callable[[UOp], UOp | None]) -> UOp:
  """`root` with every node for which `leaf` answers a UOp replaced by it (its sources not visited); the nodes above
  are rebuilt with the new sources, and the ones nothing changed under stay themselves."""
  memo: dict[UOp, UOp] = {}
  stack: list[tuple[UOp, bool]] = [(root, False)]
  while stack:
    n, ready = stack.pop()
    if n in memo: continue
    if (r := leaf(n)) is not None: memo[n] = r; continue
    if not ready:
      stack.append((n, True))
      stack.extend((s, False) for s in n.src if s not in memo)
      continue
    src = tuple(memo[s] for s in n.src)
    memo[n] = n if src == n.src else n.replace(src=src)
  return memo[root]
