"""Tensor cores: half matmul -> WMMA (mma.sync m16n8k16). Not there yet."""
from __future__ import annotations
from tinycore.uop import UOp

def tensor_core(k: UOp, renderer) -> UOp | None: return None
