"""Kernel optimizations applied to the lowered graph (hand heuristics; BEAM search explores the same actions)."""
from __future__ import annotations
from tinycore.uop import UOp
from tinycore.renderer import Renderer

def optimize(k: UOp, renderer: Renderer) -> UOp:
  return k
