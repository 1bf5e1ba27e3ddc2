"""GGUF tensors for the LLM runner, kept as stored: the block-quantized formats (Q4_0..Q8_0, Q2_K..Q6_K) as their raw
block bytes in a uint8 buffer, F16/BF16/F32 as is. `QWeight.dequant()` is a lazy expression (llm/quant_blocks.py), so
the scheduler fuses the decode into the matmul that reads it: no float32 copy of a weight ever lives in memory. The
file is memory-mapped and each weight's bytes are copied to the device once, when the model first asks for them."""
from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinycore.device import Buffer
from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.llm.quant_blocks import BLOCK_FORMATS, dequantize
from tinycore.nn.file_errors import CorruptFileError, UnsupportedFileError
from tinycore.nn.gguf import _PLAIN, DEQUANT, GGML_TYPES, gguf_tensors
from tinycore.nn.packed_strings import PackedStrings
from tinycore.tensor import Tensor, _canon_device
from tinycore.uop import Ops, UOp


class QWeight:
  """A weight of `shape` in format `kind` (a ggml type name). Either file-backed (`host`: row-major uint8 chunks of the
  mapped file, stacked along the first dim, copied to the device on first use) or given as device tensors (`parts`:
  {"raw": uint8 blocks} for block formats, {"w": tensor} for plain ones). dequant() -> lazy float32 Tensor of `shape`."""
  def __init__(self, kind: str, shape: tuple, parts: dict[str, Tensor] | None = None, nbytes: int = 0, host: Sequence[np.ndarray] = ()):
    self.kind, self.shape, self.nbytes, self.host = kind, tuple(shape), nbytes, list(host)
    self._parts = parts
    self._device_buf: Buffer | None = None   # the one device buffer _to_device filled (rows() reads it)
  @property
  def parts(self) -> dict[str, Tensor]:
    if self._parts is None: self._parts = {"raw" if self.kind in BLOCK_FORMATS else "w": self._to_device()}
    return self._parts
  def _to_device(self) -> Tensor:
    """One device buffer filled straight from the mapped file, chunk by chunk: each byte is copied once."""
    dt = dtypes.uint8 if self.kind in BLOCK_FORMATS else _PLAIN_BY_NAME[self.kind]
    total = sum(c.nbytes for c in self.host)
    dev = _canon_device(None)
    if not isinstance(dev, str): raise TypeError(f"QWeight: the default device {dev} is several devices; load the weights onto one")
    buf = Buffer(dev, total // dt.itemsize, dt).allocate()
    off = 0
    for c in self.host:
      if c.nbytes: buf.view(c.nbytes // dt.itemsize, dt, off).copyin(memoryview(c.data).cast("B"))
      off += c.nbytes
      _drop_pages(c)
    # the device copy is read from now on (rows() too): the views of the mapping go, and with the last of them the mapping
    self.host, self._device_buf = [], buf
    t = Tensor(UOp(Ops.BUFFER, dt, (), buf))
    if self.kind not in BLOCK_FORMATS: return t.reshape(self.shape)
    rows = prod(self.shape[:-1])   # the blocks as rows of the weight: the decode reshapes them per block
    return t.reshape(rows, total // rows) if rows else t
  def dequant(self) -> Tensor:
    if self.kind in BLOCK_FORMATS: return dequantize(self.parts["raw"], self.kind, self.shape)
    return self.parts["w"].cast(dtypes.float32)
  def rows(self, idx: Sequence[int]) -> Tensor:
    """Rows `idx` of the weight as a float32 Tensor (len(idx), *shape[1:]), gathered from the device copy or the mapped
    file and decoded on the host (nn.gguf's numpy decoders): an embedding lookup reads a few rows, where a one-hot product would read the
    whole table, and a device decode would schedule a kernel for every token."""
    # checked as Python ints: numpy's int64 min/max reductions were ~0.2 MiB of its code pages in the process's RSS
    ids = [int(i) for i in idx]
    if ids and (min(ids) < 0 or max(ids) >= self.shape[0]):
      raise IndexError(f"row ids must be in [0, {self.shape[0]}), got {min(ids)}..{max(ids)}")
    if self._device_buf is not None:   # on the device already (a tied output matrix): copy the rows out of it
      row = self._device_buf.nbytes // max(self.shape[0], 1)
      sel = np.empty((len(ids), row), np.uint8)
      for j, i in enumerate(ids): self._device_buf.view(row, dtypes.uint8, i * row).copyout(memoryview(sel[j]))
    elif len(self.host) != 1: return self.dequant()[Tensor(np.array(ids, np.int64))]   # built on the device (stacked weights): no host copy to read
    else:
      # reading the mapping faults in a window of pages around each row (a transient ~15 MiB for a 32-token chunk of a
      # 49k-row table), dropped again right after
      sel = np.ascontiguousarray(self.host[0].reshape(self.shape[0], -1)[ids])
      _drop_pages(self.host[0])
    shape = (len(ids), *self.shape[1:])
    if self.kind in BLOCK_FORMATS: return Tensor(DEQUANT[_TYPE_ID[self.kind]](sel.reshape(-1, BLOCK_FORMATS[self.kind][1])).reshape(shape))
    if self.kind == "BF16": return Tensor((sel.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape))   # no numpy bfloat16
    return Tensor(sel.view(_PLAIN_BY_NAME[self.kind].np).astype(np.float32).reshape(shape))
  def numpy(self) -> np.ndarray: return self.dequant().numpy()
  def realize(self) -> QWeight:
    Tensor.realize(*self.parts.values())
    return self
  @staticmethod
  def stack(ws: Sequence[QWeight]) -> QWeight:
    """The weights (same kind and inner shape) stacked along their first dim: file-backed ones stay file-backed, so the
    stacked weight is still copied to the device once."""
    shape = (sum(w.shape[0] for w in ws), *ws[0].shape[1:])
    if all(w._parts is None for w in ws): return QWeight(ws[0].kind, shape, nbytes=sum(w.nbytes for w in ws), host=[c for w in ws for c in w.host])
    parts = {k: ws[0].parts[k].cat(*[w.parts[k] for w in ws[1:]], dim=0).realize() for k in ws[0].parts}
    return QWeight(ws[0].kind, shape, parts, sum(w.nbytes for w in ws))

_PLAIN_BY_NAME = {GGML_TYPES[t][0]: dt for t, dt in _PLAIN.items()}
_TYPE_ID = {name: t for t, (name, _, _) in GGML_TYPES.items()}

def _drop_pages(c: np.ndarray) -> None:
  """Tell the kernel this process is done with the mapped file behind `c` (now copied to the device), so its pages stop
  counting in the RSS. The whole mapping, not just c's pages: a fault maps a window of neighbouring pages too (fault-around,
  large page-cache folios), so loading the 2 KiB norms alone left ~46 MiB of a 74 MiB file mapped. Only for a read-only
  mapping, whose pages are clean: a later read (an embedding row) maps them in again from the page cache."""
  base: Any = c.base
  while base is not None and not isinstance(base, (mmap.mmap, memoryview)): base = getattr(base, "base", None)
  mm = base.obj if isinstance(base, memoryview) else base
  if not isinstance(mm, mmap.mmap) or not hasattr(mm, "madvise") or not hasattr(mmap, "MADV_DONTNEED") or mm.closed: return
  with memoryview(mm) as view:
    if not view.readonly: return   # a copy-on-write mapping may hold written pages that dropping would lose
  mm.madvise(mmap.MADV_DONTNEED)

def _is_int(x) -> bool: return isinstance(x, int) and not isinstance(x, bool)

def check_llm_metadata(kv: dict[str, Any], w: dict[str, QWeight], name: str) -> None:
  """Check the metadata and weight shapes an LLM is built from, so a hostile or broken file fails here with the key's
  name instead of as an IndexError in the tokenizer or a ZeroDivisionError or shape error deep in the model."""
  def bad(key: str, why: str): return CorruptFileError(f"{name}: metadata {key} {why}")
  toks = kv.get("tokenizer.ggml.tokens")
  if toks is not None:
    # the element types as one set, built in C: a generator's isinstance per element took ~0.1 s of a 49k vocabulary's load
    # a PackedStrings came from the reader, which checked every item is UTF-8 text
    if not isinstance(toks, PackedStrings) and not (isinstance(toks, list) and set(map(type, toks)) <= {str}):
      raise bad("tokenizer.ggml.tokens", "is not a list of strings")
    for k in ("tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
      numbers = isinstance(v := kv.get(k), array) or (isinstance(v, list) and set(map(type, v)) <= {int, float})
      if k in kv and not (numbers and len(v) == len(toks)):
        raise bad(k, f"must be a list of {len(toks)} numbers, one per token")
    for k in ("bos", "eos", "unknown", "padding", "seperator", "separator"):
      if (key := f"tokenizer.ggml.{k}_token_id") in kv and not (_is_int(i := kv[key]) and 0 <= i < len(toks)):
        raise bad(key, f"is {i!r}, not a token id of the {len(toks)}-token vocabulary")
    if "tokenizer.ggml.merges" in kv and not (isinstance(m := kv["tokenizer.ggml.merges"], list) and set(map(type, m)) <= {str}):
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
  if dim and nh and "attention.key_length" not in sizes and dim % nh:
    raise bad(f"{arch}.attention.head_count", f"{nh} doesn't divide embedding_length {dim}")
  hd = sizes.get("attention.key_length", dim // nh if dim and nh else None)
  if hd and (rd := sizes.get("rope.dimension_count", hd)) and (rd > hd or rd % 2):
    raise bad(f"{arch}.rope.dimension_count", f"{rd} must be even and at most the head size {hd}")
  # the weights the model multiplies must have the shapes the metadata implies
  want: dict[str, tuple] = {}
  if dim and toks is not None: want["token_embd.weight"] = want["output.weight"] = (len(toks), dim)
  if dim: want["output_norm.weight"] = (dim,)
  if dim and nh and hd:
    ff, nk = sizes.get("feed_forward_length"), nkv or nh
    for i in range(sizes.get("block_count", 0)):
      b = f"blk.{i}."
      fused = b + "attn_qkv.weight" in w   # phi-3: q, k and v in one matrix, and gate and up in ffn_up
      want.update({b + "attn_norm.weight": (dim,), b + "ffn_norm.weight": (dim,), b + "attn_q.weight": (nh * hd, dim),
                   b + "attn_k.weight": (nk * hd, dim),
                   b + "attn_v.weight": (nk * hd, dim), b + "attn_qkv.weight": ((nh + 2 * nk) * hd, dim), b + "attn_output.weight": (dim, nh * hd)})
      if ff:
        up_rows = ff if b + "ffn_gate.weight" in w else 2 * ff   # phi-3: gate and up in one matrix
        want.update({b + "ffn_gate.weight": (ff, dim), b + "ffn_up.weight": (up_rows, dim), b + "ffn_down.weight": (dim, ff)})
      for t in ("attn_norm", "ffn_norm", "attn_output") + (("attn_qkv",) if fused else ("attn_q", "attn_k", "attn_v")):
        if b + t + ".weight" not in w:
          raise CorruptFileError(f"{name}: tensor {b + t + '.weight'!r} is missing ({arch}.block_count is {sizes['block_count']})")
  for t, shape in want.items():
    if t in w and tuple(w[t].shape) != shape:
      raise CorruptFileError(f"{name}: tensor {t!r} has shape {tuple(w[t].shape)}, but the metadata implies {shape}")

VOCAB_KEYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")

def load_gguf_raw(fn) -> tuple[dict[str, Any], dict[str, QWeight]]:
  """(metadata, name -> QWeight) of a GGUF file, every weight kept in its stored format and left in the mapped file
  until first used. The LLM's metadata and weight shapes are checked (check_llm_metadata). The vocabulary's pieces,
  scores and types come back packed (nn/packed_strings.py, array.array), which the Tokenizer takes over as they are."""
  kv, infos, _keep = gguf_tensors(fn, packed=VOCAB_KEYS)
  out: dict[str, QWeight] = {}
  for tn, shape, tt, raw in infos:
    kind = GGML_TYPES[tt][0]
    if kind not in BLOCK_FORMATS and tt not in _PLAIN:
      raise UnsupportedFileError(f"tensor {tn!r} has ggml type {kind}, which the LLM runner can't use")
    # rows are whole blocks (gguf_tensors checked it); the array views the mapping and keeps it alive
    out[tn] = QWeight(kind, shape, nbytes=len(raw), host=[np.frombuffer(raw, np.uint8)])
  check_llm_metadata(kv, out, os.fspath(fn) if isinstance(fn, (str, os.PathLike)) else "<bytes>")
  return kv, out
