"""Linear layers over block-quantized weights through a device's hand-written kernel, where it has one.

A renderer may offer `quant_matmul(kind, norm, swiglu, res)`: a program computing W . x for ggml block weights with
the activations quantized to int8 per 32 elements (what llama.cpp does; the CPU plugin's VNNI / AVX2 kernels). It
folds the RMSNorm before the matmul, SwiGLU (silu(gate . x) * (up . x)) and the residual add after it into the same
call, so a decode layer is four kernel launches for its matmuls and nothing else around them. The program runs as an
ordinary ExecItem through engine.run, so TinyJit captures and replays it with the generated kernels.

Where the device has no such program (another renderer, another format, a weight not in a block format) the caller
falls back to the generated kernels over QWeight.dequant(), which keep float32 activations. Numerics: int8 activations
carry a relative error of about 1/254 per element, as in llama.cpp; `LLM(..., int8_activations=False)` (or
LLM_INT8=0) keeps the float path everywhere."""
from __future__ import annotations
import struct
from tinycore.device import Buffer, Device
from tinycore.dtype import dtypes
from tinycore.tensor import Tensor
from tinycore.uop import Ops, UOp
from tinycore.llm.weights import QWeight

def _buffer(t: Tensor) -> Buffer:
  """t's contiguous float32 storage: t itself when it already is a whole realized buffer, else a copy into one."""
  def whole(u: UOp) -> Buffer | None:
    b = u.src[0] if u.op is Ops.RESHAPE else u
    return b.arg if b.op is Ops.BUFFER and b.arg.is_allocated() and b.arg.size == t.numel() else None
  if (b := whole(t.uop)) is None:
    t.uop = t.contiguous().realize().uop   # the caller's tensor becomes the buffer too: a later read reuses it
    if (b := whole(t.uop)) is None: raise RuntimeError(f"quant_linear: input of shape {t.shape} did not realize into one buffer")
  return b

class _Spec:
  """What ExecItem and DEBUG need to know of a launch (the generated kernels' ProgramSpec has the same fields)."""
  def __init__(self, name: str, n: int, ops: int, mem: int):
    self.name, self.global_size, self.local_size, self.ops, self.mem = name, (n, 1, 1), (1, 1, 1), ops, mem
    self.vars: list = []

class _Runner:
  """An ExecItem runner for one quant_matmul launch; shapes are fixed at build time and checked there."""
  direct = True   # TinyJit's fast replay may call it without an ExecItem (engine/jit.py)
  def __init__(self, prg, p: _Spec, vals: tuple[int, ...]): self.prg, self.p, self.vals = prg, p, vals
  def graph_launch(self):   # for a device graph (engine/jit_graph.py): (program, scalar args, global, local, work)
    # the work as the program's own launch would report it to the thread split (the CPU's caps it for several tokens)
    work = self.p.ops + self.p.mem
    if (f := getattr(self.prg, "work_for_split", None)) is not None: work = f(work, self.vals)
    return self.prg, self.vals, self.p.global_size, self.p.local_size, work
  def __call__(self, bufs: list[Buffer], var_vals, wait=False):
    return self.prg(*[b._buf for b in bufs], global_size=self.p.global_size, local_size=(1, 1, 1), vals=self.vals, wait=wait,
                    work=self.p.ops + self.p.mem)

def device_kernel(device: str, kind: str, norm: bool, swiglu: bool, res: bool):
  """The device renderer's quant_matmul program for this variant, or None."""
  fn = getattr(Device[device].renderer, "quant_matmul", None)
  return fn(kind, norm, swiglu, res) if fn is not None else None

def quant_linear(x: Tensor, w: QWeight, *, up: QWeight | None = None, norm: Tensor | None = None, eps: float = 0.0,
                 res: Tensor | None = None) -> Tensor | None:
  """x (..., K) float32 -> (..., N): [residual +] W . [rmsnorm(x) * norm] (or silu(W . x') * (up . x') with `up`),
  run now by the device's kernel. None, with nothing run, when the device has no kernel for this case."""
  if w.kind != (up.kind if up is not None else w.kind) or len(w.shape) != 2 or x.dtype != dtypes.float32: return None
  N, K = w.shape
  if up is not None and tuple(up.shape) != (N, K): return None
  if x.shape[-1] != K: raise ValueError(f"quant_linear: input of shape {x.shape} doesn't match weight of shape {w.shape} (inner size {K})")
  if not isinstance(dev := x.device, str): return None   # sharded over several devices: the generated kernels handle that
  if (prg := device_kernel(dev, w.kind, norm is not None, up is not None, res is not None)) is None: return None
  lead = x.shape[:-1]
  T = 1
  for d in lead: T *= d
  if not isinstance(T, int): return None
  raw = [w.parts["raw"]] + ([up.parts["raw"]] if up is not None else [])
  bufs = [_buffer(x)] + [_buffer(r) for r in raw]
  for r in bufs[1:]:   # the kernel walks N rows of whole blocks: the bytes must be exactly that
    if r.nbytes != w.nbytes or r.dtype != dtypes.uint8:
      raise ValueError(f"quant_linear: {w.kind} weight of shape {w.shape} has {r.nbytes} bytes, expected {w.nbytes}")
  if norm is not None:
    if tuple(norm.shape) != (K,): raise ValueError(f"quant_linear: norm weight of shape {norm.shape}, expected ({K},)")
    bufs.append(_buffer(norm.cast(dtypes.float32) if norm.dtype != dtypes.float32 else norm))
  if res is not None:
    if res.dtype != dtypes.float32: raise TypeError(f"quant_linear: residual must be float32, got {res.dtype}")
    if tuple(res.shape) != (*lead, N): raise ValueError(f"quant_linear: residual of shape {res.shape}, expected {(*lead, N)}")
    bufs.append(_buffer(res))
  out = Buffer(dev, T * N, dtypes.float32).allocate()
  from tinycore.engine.run import ExecItem, run_items
  eps_bits = struct.unpack("<I", struct.pack("<f", eps))[0]
  weight_bytes = w.nbytes * len(raw)
  spec = _Spec(prg.name, N, ops=2 * T * N * K * len(raw), mem=weight_bytes + 4 * T * (K + N * (2 if res is not None else 1)))
  run_items([ExecItem(_Runner(prg, spec, (K, T, N, eps_bits)), [out, *bufs], {})], {})
  return Tensor(UOp(Ops.BUFFER, dtypes.float32, (), out)).reshape(*lead, N)
