"""GGUF tensors for the LLM runner, kept as stored where the graph can decode them: Q8_0 as int8 values + f16 block
scales, Q4_0 as packed nibbles + scales, F16/BF16 as is. `QWeight.dequant()` is a lazy expression, so the scheduler
fuses the decode into the matmul that reads it (no float32 copy of the weights ever lives in memory). Other block
types (Q4_1, Q4_K, Q6_K) are decoded to float32 at load with nn.gguf's dequantizers."""
from __future__ import annotations
import os
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.gguf import gguf_tensors, GGML_TYPES, _PLAIN, DEQUANT
from tinycore.nn.file_errors import CorruptFileError

class QWeight:
  """A 2-d weight (out, in) in a block format; dequant() -> float32 lazy Tensor of shape (out, in)."""
  def __init__(self, kind: str, shape: tuple, parts: dict[str, Tensor], nbytes: int):
    self.kind, self.shape, self.parts, self.nbytes = kind, shape, parts, nbytes
  def dequant(self) -> Tensor:
    p, (o, i) = self.parts, (self.shape if len(self.shape) == 2 else (0, 0))
    if self.kind == "Q8_0": return (p["q"].cast(dtypes.float32) * p["d"].cast(dtypes.float32)).reshape(o, i)
    if self.kind == "Q4_0":
      q = p["q"]   # (o, i/32, 16) bytes: low nibbles are elements 0..15 of a block, high nibbles 16..31
      nib = (q & 0xF).cat(q >> 4, dim=-1).cast(dtypes.float32) - 8
      return (nib * p["d"].cast(dtypes.float32)).reshape(o, i)
    return p["w"].cast(dtypes.float32)
  def numpy(self) -> np.ndarray: return self.dequant().numpy()
  def realize(self) -> QWeight:
    Tensor.realize(*self.parts.values())
    return self

def _blocks(raw, bb: int) -> np.ndarray: return np.frombuffer(raw, np.uint8).reshape(-1, bb)

def _is_int(x) -> bool: return isinstance(x, int) and not isinstance(x, bool)

def check_llm_metadata(kv: dict[str, Any], w: dict[str, QWeight], name: str) -> None:
  """Check the metadata and weight shapes an LLM is built from, so a hostile or broken file fails here with the key's
  name instead of as an IndexError in the tokenizer or a ZeroDivisionError or shape error deep in the model."""
  def bad(key: str, why: str): return CorruptFileError(f"{name}: metadata {key} {why}")
  toks = kv.get("tokenizer.ggml.tokens")
  if toks is not None:
    if not isinstance(toks, list) or not all(isinstance(t, str) for t in toks): raise bad("tokenizer.ggml.tokens", "is not a list of strings")
    for k in ("tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
      if k in kv and not (isinstance(v := kv[k], list) and len(v) == len(toks) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
        raise bad(k, f"must be a list of {len(toks)} numbers, one per token")
    for k in ("bos", "eos", "unknown", "padding", "seperator", "separator"):
      if (key := f"tokenizer.ggml.{k}_token_id") in kv and not (_is_int(i := kv[key]) and 0 <= i < len(toks)):
        raise bad(key, f"is {i!r}, not a token id of the {len(toks)}-token vocabulary")
    if "tokenizer.ggml.merges" in kv and not (isinstance(m := kv["tokenizer.ggml.merges"], list) and all(isinstance(x, str) for x in m)):
      raise bad("tokenizer.ggml.merges", "is not a list of strings")
  if "tokenizer.chat_template" in kv and not isinstance(kv["tokenizer.chat_template"], str): raise bad("tokenizer.chat_template", "is not a string")
  arch = kv.get("general.architecture", "llama")
  if not isinstance(arch, str): raise bad("general.architecture", f"is {arch!r}, not a name")
  sizes = {}
  for k in ("embedding_length", "attention.head_count", "attention.head_count_kv", "block_count", "feed_forward_length", "context_length",
            "attention.key_length", "rope.dimension_count"):
    if (key := f"{arch}.{k}") in kv:
      if not (_is_int(v := kv[key]) and 0 < v <= 1 << 24) and not (k == "block_count" and v == 0): raise bad(key, f"is {v!r}, not a positive integer")
      sizes[k] = v
  for k in ("rope.freq_base", "attention.layer_norm_rms_epsilon", "rope.scaling.factor"):
    if (key := f"{arch}.{k}") in kv and not (isinstance(v := kv[key], (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")):
      raise bad(key, f"is {v!r}, not a positive number")
  dim, nh, nkv = sizes.get("embedding_length"), sizes.get("attention.head_count"), sizes.get("attention.head_count_kv")
  if nh and nkv and nh % nkv: raise bad(f"{arch}.attention.head_count_kv", f"{nkv} doesn't divide the {nh} query heads")
  if dim and nh and "attention.key_length" not in sizes and dim % nh: raise bad(f"{arch}.attention.head_count", f"{nh} doesn't divide embedding_length {dim}")
  hd = sizes.get("attention.key_length", dim // nh if dim and nh else None)
  if hd and (rd := sizes.get("rope.dimension_count", hd)) and (rd > hd or rd % 2): raise bad(f"{arch}.rope.dimension_count", f"{rd} must be even and at most the head size {hd}")
  # the weights the model multiplies must have the shapes the metadata implies
  want: dict[str, tuple] = {}
  if dim and toks is not None: want["token_embd.weight"] = want["output.weight"] = (len(toks), dim)
  if dim: want["output_norm.weight"] = (dim,)
  if dim and nh and hd:
    ff, nk = sizes.get("feed_forward_length"), nkv or nh
    for i in range(sizes.get("block_count", 0)):
      b = f"blk.{i}."
      fused = b + "attn_qkv.weight" in w   # phi-3: q, k and v in one matrix, and gate and up in ffn_up
      want.update({b + "attn_norm.weight": (dim,), b + "ffn_norm.weight": (dim,), b + "attn_q.weight": (nh * hd, dim), b + "attn_k.weight": (nk * hd, dim),
                   b + "attn_v.weight": (nk * hd, dim), b + "attn_qkv.weight": ((nh + 2 * nk) * hd, dim), b + "attn_output.weight": (dim, nh * hd)})
      if ff: want.update({b + "ffn_gate.weight": (ff, dim), b + "ffn_up.weight": (ff if b + "ffn_gate.weight" in w else 2 * ff, dim), b + "ffn_down.weight": (dim, ff)})
      for t in ("attn_norm", "ffn_norm", "attn_output") + (("attn_qkv",) if fused else ("attn_q", "attn_k", "attn_v")):
        if b + t + ".weight" not in w: raise CorruptFileError(f"{name}: tensor {b + t + '.weight'!r} is missing ({arch}.block_count is {sizes['block_count']})")
  for t, shape in want.items():
    if t in w and tuple(w[t].shape) != shape: raise CorruptFileError(f"{name}: tensor {t!r} has shape {tuple(w[t].shape)}, but the metadata implies {shape}")

def load_gguf_raw(fn) -> tuple[dict[str, Any], dict[str, QWeight]]:
  """(metadata, name -> QWeight) of a GGUF file; 1-d tensors (norms, biases) come back as float32 QWeights of kind F32.
  The LLM's metadata and weight shapes are checked (check_llm_metadata)."""
  from tinycore.nn.state import tensor_from_bytes
  kv, infos, _keep = gguf_tensors(fn)
  out: dict[str, QWeight] = {}
  for tn, shape, tt, raw in infos:
    kind, bs, bb = GGML_TYPES[tt]
    nbytes = len(raw)
    if kind in ("Q8_0", "Q4_0") and len(shape) == 2:   # rows are whole blocks (gguf_tensors checked it)
      blk = _blocks(raw, bb)
      g = (shape[0], shape[1] // 32)
      d = Tensor(np.ascontiguousarray(blk[:, :2]).view(np.float16).reshape(*g, 1))
      q = Tensor(np.ascontiguousarray(blk[:, 2:]).view(np.int8).reshape(*g, 32)) if kind == "Q8_0" else Tensor(np.ascontiguousarray(blk[:, 2:]).reshape(*g, 16))
      out[tn] = QWeight(kind, shape, {"q": q, "d": d}, nbytes)
    elif tt in _PLAIN: out[tn] = QWeight(kind, shape, {"w": tensor_from_bytes(raw, _PLAIN[tt], shape)}, nbytes)
    else:  # Q4_1/Q4_K/Q6_K (and 1-d quantized tensors): decode once here
      w = DEQUANT[tt](_blocks(raw, bb)).astype(np.float32).reshape(shape)
      out[tn] = QWeight("F32", shape, {"w": Tensor(w)}, w.nbytes)
  check_llm_metadata(kv, out, os.fspath(fn) if isinstance(fn, (str, os.PathLike)) else "<bytes>")
  return kv, out
