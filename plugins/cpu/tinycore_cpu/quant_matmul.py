"""The CPU's hand-written quantized matmul kernels (quant_matmul.c): ggml block weights times activations quantized to
int8 per 32 elements, an integer dot product per block (VNNI / AVX2 where the CPU has them). The generated kernels
decode every weight to float32 before the multiply; these do 3-5x less work per weight byte, which is what decode on a
CPU is bound by. With several tokens (prefill) and VNNI, a panel of 32 weight rows is decoded once into the layout
vpdpbusd reads and reused by every token: 2x torch's float32 matmul per core at 512 tokens (bench/quant_matmul.py).

The renderer declares them (CRenderer.quant_matmul names `quant_matmul` below), so core asks for them by capability,
never by device name. The C file is compiled once per machine through the renderer's compiler and its disk cache."""
from __future__ import annotations
import ctypes, functools, os, tempfile
from tinycore_cpu.runtime import CPUProgram, DYNAMIC_WORK, c_source

# ggml type name -> (elements per block, bytes per block): the formats quant_matmul.c has a dot product for
FORMATS: dict[str, tuple[int, int]] = {"Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
                                        "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}

class _Program(CPUProgram):
  """One exported function of the shared library: CPUProgram's launch (row range split between threads) without a
  dlopen per function."""
  def __init__(self, name: str, lib: ctypes.CDLL):
    self.name, self.lib = name, lib
    self.fxn = getattr(lib, name)
    self.fxn.restype = None
  @staticmethod
  def work_for_split(work: int, vals: tuple) -> int:
    """The work figure the thread split should see. Every piece quantizes all T tokens' activations before its rows:
    with several tokens, one share of the rows per thread (the runtime cuts big kernels 4x finer, which quantized them
    4x over, ~a third of a 128-token prefill). The CPU graph asks this too (llm/quant_linear.py's graph_launch)."""
    return min(work, DYNAMIC_WORK - 1) if len(vals) > 1 and vals[1] > 1 else work
  def __call__(self, *bufs, vals: tuple = (), work: int = 0, **kw):
    return super().__call__(*bufs, vals=vals, work=self.work_for_split(work, vals), **kw)

def _dlopen(lib: bytes) -> ctypes.CDLL:
  with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f: f.write(lib); path = f.name
  try: return ctypes.CDLL(path)
  finally: os.unlink(path)

@functools.cache
def _library(compiler) -> ctypes.CDLL:
  src = c_source("quant_matmul.c")
  return compiler.load_cached(src, _dlopen)

def quant_matmul(compiler, kind: str, norm: bool = False, swiglu: bool = False, res: bool = False) -> _Program | None:
  """The kernel for weights of ggml type `kind` with the given prologue/epilogue, or None when there is none for that
  format. Called as prg(out, x, w[, w_up][, g][, res], global_size=(N, 1, 1), vals=(K, T, N, eps_bits), work=bytes)."""
  if kind not in FORMATS or (norm and res and swiglu): return None
  name = f"qmm_{kind.lower()}{'_norm' if norm else ''}{'_swiglu' if swiglu else ''}{'_res' if res else ''}"
  return _Program(name, _library(compiler))
