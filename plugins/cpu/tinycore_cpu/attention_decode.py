"""The CPU's hand-written decode attention (attention_decode.c): one LLM decode step's cache write and attention for a
layer in one kernel, where the generated kernels take six. The renderer declares it (CRenderer.attention_decode), so
core asks for it by capability; the C file is compiled once per machine through the renderer's compiler and its cache."""
from __future__ import annotations
import functools
from tinycore_cpu.quant_matmul import _dlopen, _Program
from tinycore_cpu.runtime import c_source

@functools.cache
def attention_decode(compiler) -> _Program:
  """prg(out, qkv, cache, cos, sin, global_size=(kv heads, 1, 1), vals=(nh, nkv, hd, rd, M, neox, scale_bits, pos))."""
  src = c_source("attention_decode.c")
  return _Program("attn_decode", compiler.load_cached(src, _dlopen))
