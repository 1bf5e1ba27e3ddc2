"""One decode step's attention through a device's hand-written kernel, where it has one.

A renderer may offer `attention_decode()`: a program that, for one layer and one new token, rotates the token's key,
writes key and value into the KV cache at the bound position and computes every query head's attention over cache
rows 0..pos (llm/model.py's plain llama attention: no sliding window, soft-capping or q/k norms). The generated kernels
take six launches for that; a decode step runs it once per layer. The position stays a Variable: the program runs as
an ExecItem whose scalar arguments name it, so TinyJit captures the launch once and each replay passes its position.

Where the device has no such program, or the layer is of another kind, the caller builds the generated kernels."""
from __future__ import annotations
import struct
from tinycore.device import Buffer, Device
from tinycore.dtype import dtypes
from tinycore.tensor import Tensor
from tinycore.uop import Ops, UOp
from tinycore.llm.quant_linear import _buffer, _Spec

MAX_HEAD = 1024   # attention_decode.c keeps a rotated query head on the stack

class _Runner:
  """An ExecItem runner for one attention launch; its scalar arguments may name the position Variable."""
  direct = True   # TinyJit's fast replay may call it without an ExecItem (engine/jit.py)
  def __init__(self, prg, p: _Spec, vals: tuple): self.prg, self.p, self.vals = prg, p, vals
  def graph_launch(self):   # for a device graph (engine/jit_graph.py): the Variable is filled in per replay
    return self.prg, self.vals, self.p.global_size, self.p.local_size, self.p.ops + self.p.mem
  def __call__(self, bufs: list[Buffer], var_vals, wait=False):
    vals = tuple(v if isinstance(v, int) else var_vals[v] for v in self.vals)
    return self.prg(*[b._buf for b in bufs], global_size=self.p.global_size, local_size=(1, 1, 1), vals=vals, wait=wait,
                    work=self.p.ops + self.p.mem)

def _cache_buffer(kv: Tensor) -> Buffer | None:
  """The KV cache's whole realized float32 buffer, or None when it isn't one (a lazy or sharded cache)."""
  u = kv.uop.src[0] if kv.uop.op is Ops.RESHAPE else kv.uop
  if u.op is not Ops.BUFFER or not u.arg.is_allocated() or kv.dtype != dtypes.float32 or u.arg.size != kv.numel(): return None
  return u.arg

def decode_attention(qkv: Tensor, kv: Tensor, cos: Tensor, sin: Tensor, pos: UOp, *, n_heads: int, n_kv_heads: int,
                     head_dim: int, rope_dim: int, neox: bool, scale: float) -> Tensor | None:
  """qkv (1, 1, (n_heads + 2 n_kv_heads) * head_dim) of the token at the bound position `pos`; kv the layer's cache
  (2, 1, n_kv_heads, M, head_dim); cos/sin (1, rope_dim/2). Writes the cache row and returns the attention output
  (1, 1, n_heads * head_dim), run now by the device's kernel; None, with nothing run or written, where there is none."""
  if not isinstance(dev := qkv.device, str) or kv.device != dev or pos.op is not Ops.BIND: return None
  if (fn := getattr(Device[dev].renderer, "attention_decode", None)) is None or (prg := fn()) is None: return None
  if qkv.dtype != dtypes.float32 or head_dim > MAX_HEAD or n_heads % n_kv_heads or rope_dim % 2 or rope_dim > head_dim: return None
  M = kv.shape[3] if len(kv.shape) == 5 else None
  if tuple(kv.shape) != (2, 1, n_kv_heads, M, head_dim) or (cache := _cache_buffer(kv)) is None: return None
  if tuple(qkv.shape) != (1, 1, (n_heads + 2 * n_kv_heads) * head_dim):
    raise ValueError(f"decode_attention: qkv of shape {qkv.shape}, expected (1, 1, {(n_heads + 2 * n_kv_heads) * head_dim})")
  for name, t in (("cos", cos), ("sin", sin)):
    if t.numel() != rope_dim // 2 or t.dtype != dtypes.float32:
      raise ValueError(f"decode_attention: {name} of shape {t.shape} {t.dtype}, expected {rope_dim // 2} float32 angles")
  var, val = pos.unbind()
  if not (isinstance(M, int) and var.arg[1] >= 0 and var.arg[2] < M):   # every position the Variable may take is a cache row
    raise ValueError(f"decode_attention: position Variable {var.arg[0]!r} ranges over [{var.arg[1]}, {var.arg[2]}], outside the {M}-row cache")
  bufs = [_buffer(qkv), cache, _buffer(cos), _buffer(sin)]
  out = Buffer(dev, n_heads * head_dim, dtypes.float32).allocate()
  from tinycore.engine.run import ExecItem, run_items
  scale_bits = struct.unpack("<I", struct.pack("<f", scale))[0]
  mem = 4 * (2 * n_kv_heads * M * head_dim + (2 * n_heads + 2 * n_kv_heads) * head_dim)   # at most: the whole cache read
  spec = _Spec("attn_decode", n_kv_heads, ops=4 * n_heads * M * head_dim, mem=mem)
  runner = _Runner(prg, spec, (n_heads, n_kv_heads, head_dim, rope_dim, M, int(neox), scale_bits, var))
  run_items([ExecItem(runner, [out, *bufs], {var: val})], {})
  return Tensor(UOp(Ops.BUFFER, dtypes.float32, (), out)).reshape(1, 1, n_heads * head_dim)
