"""The llama family forward pass (llama 2/3, mistral, qwen2/3 as GGUF names them): RMSNorm, RoPE, grouped-query
attention over an in-place KV cache, SwiGLU. Batch 1. The position is an int or a bound Variable: the cache write goes
to the rows at that offset, the rotary angles use it as a value, and single-token decode reads only the first pos+1
cache rows (a symbolic shape), so one captured set of kernels serves every position."""
from __future__ import annotations
import math
from dataclasses import dataclass
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.uop import UOp
from tinycore.llm.weights import QWeight

NEOX_ROPE = {"qwen2", "qwen3", "qwen2moe", "qwen3moe", "phi3", "gptneox", "stablelm", "olmo2"}   # rotate halves, not pairs

@dataclass
class Config:
  arch: str; dim: int; n_layers: int; n_heads: int; n_kv_heads: int; hidden: int; vocab: int; head_dim: int
  rope_dim: int; theta: float; eps: float; ctx: int; rope_scale: float = 1.0
  @staticmethod
  def from_gguf(kv: dict[str, Any], w: dict[str, QWeight]) -> Config:
    a = kv.get("general.architecture", "llama")
    g = lambda k, d=None: kv.get(f"{a}.{k}", d)
    dim, nh = g("embedding_length"), g("attention.head_count")
    if dim is None or nh is None: raise ValueError(f"GGUF metadata lacks {a}.embedding_length / {a}.attention.head_count: not a llama-family model?")
    hd = g("attention.key_length", dim // nh)
    vocab = len(kv["tokenizer.ggml.tokens"]) if "tokenizer.ggml.tokens" in kv else w["token_embd.weight"].shape[0]
    scale = float(g("rope.scaling.factor", 1.0)) if g("rope.scaling.type", "none") == "linear" else 1.0
    return Config(a, dim, g("block_count"), nh, g("attention.head_count_kv", nh), g("feed_forward_length"), vocab, hd,
                  g("rope.dimension_count", hd), float(g("rope.freq_base", 10000.0)), float(g("attention.layer_norm_rms_epsilon", 1e-5)),
                  g("context_length", 2048), scale)

def _fuse_qkv(w: dict[str, QWeight], b: str):
  """Stack a layer's q, k and v weights (same block format) into one `attn_qkv` weight along the output axis, replacing
  them in `w`: one matvec per decode step instead of three small ones (each of which pays a kernel launch)."""
  names = [b + n + ".weight" for n in ("attn_q", "attn_k", "attn_v")]
  if not all(n in w for n in names) or len({(w[n].kind, len(w[n].shape), w[n].shape[1:]) for n in names}) != 1: return
  biases = [b + n + ".bias" for n in ("attn_q", "attn_k", "attn_v")]
  if any(len(w[n].shape) != 2 for n in names) or sum(n in w for n in biases) not in (0, 3): return
  w[b + "attn_qkv.weight"] = QWeight.stack([w.pop(n) for n in names])   # file-backed: still one copy to the device
  if biases[0] in w:
    bs = [w.pop(n) for n in biases]
    w[b + "attn_qkv.bias"] = QWeight("F32", (sum(x.shape[0] for x in bs),), {"w": bs[0].dequant().cat(*[x.dequant() for x in bs[1:]]).realize()}, sum(x.nbytes for x in bs))

def rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + eps).rsqrt() * w

class Transformer:
  def __init__(self, cfg: Config, weights: dict[str, QWeight], max_context: int = 512):
    self.cfg, self.w = cfg, weights
    self.max_context = min(max_context, cfg.ctx)
    for k in ("token_embd.weight", "output_norm.weight"):
      if k not in weights: raise ValueError(f"GGUF file has no tensor {k!r}")
    self.out_name = "output.weight" if "output.weight" in weights else "token_embd.weight"   # tied embeddings
    for i in range(cfg.n_layers): _fuse_qkv(weights, f"blk.{i}.")
    self.norms = {k: v.dequant().realize() for k, v in weights.items() if len(v.shape) == 1}  # norms/biases: small, float32
    # the embedding table is read row by row from the file (QWeight.rows); on the device only when it is also the output
    for k, v in weights.items():
      if k != "token_embd.weight" or k == self.out_name: v.realize()
    inv = 1.0 / (cfg.theta ** (np.arange(0, cfg.rope_dim, 2, dtype=np.float64) / cfg.rope_dim))
    if "rope_freqs.weight" in weights: inv = inv / weights["rope_freqs.weight"].numpy().astype(np.float64)   # llama 3.1 scaling
    self.inv_freq = Tensor((inv / cfg.rope_scale).astype(np.float32)).realize()
    shp = (1, cfg.n_kv_heads, self.max_context, cfg.head_dim)
    self.cache = [(Tensor.zeros(*shp).contiguous().realize(), Tensor.zeros(*shp).contiguous().realize()) for _ in range(cfg.n_layers)]

  def embed(self, tokens) -> Tensor: return self.w["token_embd.weight"].rows(tokens).reshape(1, len(tokens), -1)

  def lin(self, x: Tensor, name: str) -> Tensor:
    y = x.matmul(self.w[name + ".weight"].dequant().T)
    return y + self.norms[name + ".bias"] if name + ".bias" in self.norms else y

  def rope(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # x: (1, T, heads, hd); cos/sin: (T, rope_dim/2). llama GGUFs pair adjacent dims, NEOX-style ones pair i with i + rd/2
    rd, hd = self.cfg.rope_dim, self.cfg.head_dim
    xr, rest = (x, None) if rd == hd else (x[..., :rd], x[..., rd:])
    c, s = cos.reshape(1, cos.shape[0], 1, rd // 2), sin.reshape(1, sin.shape[0], 1, rd // 2)
    if self.cfg.arch in NEOX_ROPE:
      a, b = xr[..., :rd // 2], xr[..., rd // 2:]
      out = (a * c - b * s).cat(a * s + b * c, dim=-1)
    else:
      p = xr.reshape(*xr.shape[:-1], rd // 2, 2)
      a, b = p[..., 0], p[..., 1]
      out = (a * c - b * s).unsqueeze(-1).cat((a * s + b * c).unsqueeze(-1), dim=-1).reshape(xr.shape)
    return out if rest is None else out.cat(rest, dim=-1)

  def __call__(self, x: Tensor, pos: int | UOp) -> Tensor:
    """x: (1, T, dim) embeddings of the tokens at positions pos..pos+T-1 -> logits (1, T, vocab). Writes the cache."""
    cfg, T, M = self.cfg, x.shape[1], self.max_context
    # the position as a value: a symbolic-length sum counts to pos inside the kernel, so no Python int is baked in
    pv = Tensor.ones(M)[:pos].sum() if isinstance(pos, UOp) else Tensor(float(pos))
    posn = pv + Tensor.arange(T).cast(dtypes.float32)                    # (T,)
    ang = posn.reshape(T, 1) * self.inv_freq.reshape(1, -1)
    cos, sin = ang.cos().contiguous(), ang.sin().contiguous()   # computed once, not inside every layer's kernels
    slots = Tensor.arange(M).cast(dtypes.float32)
    # a realize computes a contiguous() node only for its own targets: the per-layer cache writes below would otherwise
    # recompute these (and every earlier layer's residual) each time, O(layers^2) kernels per step
    Tensor.realize(cos, sin)
    symbolic_read = T == 1 and isinstance(pos, UOp)
    mask = None if symbolic_read else slots.reshape(1, M) <= posn.reshape(T, 1)   # causal over the whole cache
    rep = cfg.n_heads // cfg.n_kv_heads   # query head j reads kv head j // rep
    for i, (ck, cv) in enumerate(self.cache):
      b = f"blk.{i}."
      x = x.realize()   # this layer's input as a buffer: both cache writes and the attention read it
      # normed once into a buffer: the matvecs reading it go row by row and would redo the norm for every row
      h = rms_norm(x, self.norms[b + "attn_norm.weight"], cfg.eps).contiguous()
      if b + "attn_qkv.weight" in self.w:
        # one matvec for the three projections, computed once: the cache writes and the attention both read it
        qkv = self.lin(h, b + "attn_qkv").contiguous().realize()
        nq, nk = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        q, k, v = qkv[..., :nq], qkv[..., nq:nq + nk], qkv[..., nq + nk:]
      else: q, k, v = (self.lin(h, b + n) for n in ("attn_q", "attn_k", "attn_v"))
      q, k, v = q.reshape(1, T, cfg.n_heads, cfg.head_dim), k.reshape(1, T, cfg.n_kv_heads, cfg.head_dim), v.reshape(1, T, cfg.n_kv_heads, cfg.head_dim)
      if b + "attn_q_norm.weight" in self.norms:   # qwen3: per-head norms before rope
        q, k = rms_norm(q, self.norms[b + "attn_q_norm.weight"], cfg.eps), rms_norm(k, self.norms[b + "attn_k_norm.weight"], cfg.eps)
      q, k = self.rope(q, cos, sin).transpose(1, 2), self.rope(k, cos, sin).transpose(1, 2)   # (1, heads, T, hd)
      v = v.transpose(1, 2)
      # only rows pos..pos+T-1 are written (a view at a symbolic offset): the rest of the cache is neither read nor copied
      Tensor.realize(*(c[:, :, pos:pos + T].assign(new) for c, new in ((ck, k), (cv, v))))   # one schedule for both
      # attention by broadcasting in 6-d (kv head, group, query, key, feature): the cache is reshaped while its shape is
      # concrete and only then cut to pos+1 rows, since a symbolic dim can't pass through a reshape
      K, V = (c.reshape(1, cfg.n_kv_heads, 1, 1, M, cfg.head_dim) for c in (ck, cv))
      if symbolic_read: K, V = K[:, :, :, :, :pos + 1], V[:, :, :, :, :pos + 1]
      s = (q.reshape(1, cfg.n_kv_heads, rep, T, 1, cfg.head_dim) * K).sum(-1, keepdim=True) * (1 / math.sqrt(cfg.head_dim))
      if mask is not None: s = mask.reshape(1, 1, 1, T, M, 1).where(s, -math.inf)
      att = (s.softmax(-2) * V).sum(-2).reshape(1, cfg.n_heads, T, cfg.head_dim).transpose(1, 2).reshape(1, T, cfg.n_heads * cfg.head_dim)
      x = (x + self.lin(att, b + "attn_output")).contiguous()
      h = rms_norm(x, self.norms[b + "ffn_norm.weight"], cfg.eps).contiguous()
      x = (x + self.lin(self.lin(h, b + "ffn_gate").silu() * self.lin(h, b + "ffn_up"), b + "ffn_down")).contiguous()   # one residual buffer per step
    return self.lin(rms_norm(x, self.norms["output_norm.weight"], cfg.eps), self.out_name[:-len(".weight")])
