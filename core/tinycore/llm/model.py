"""The llama family forward pass (llama 2/3, mistral, qwen2/3, gemma/gemma 2/3, phi-3 as GGUF names them): RMSNorm, RoPE,
grouped-query attention over an in-place KV cache, a gated MLP; per architecture q/k norms (qwen3, gemma 3), sliding
window attention (mistral, phi-3, gemma 2/3 on some layers), embedding scaling, post-norms and soft-capping (gemma 2).
Batch 1. The position is an int or a bound Variable: the cache write goes
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
from tinycore.llm.quant_linear import quant_linear
from tinycore.llm.attention import decode_attention
from tinycore.llm.progress import LoadProgress

# rotate halves, not pairs
NEOX_ROPE = {"qwen2", "qwen3", "qwen2moe", "qwen3moe", "phi3", "gptneox", "stablelm", "olmo2", "gemma", "gemma2", "gemma3"}

GEMMA = {"gemma", "gemma2", "gemma3"}
# decode recomputes q's rotation per cached key up to this context (~3 us per layer at 70 keys, 9 heads of 64)
ROPE_Q_FUSED_MAX_CONTEXT = 256
# gemma 2 alternates sliding and global layers; gemma 3 has five sliding layers for each global one
SWA_PATTERN = {"gemma2": 2, "gemma3": 6}

@dataclass
class Config:
  arch: str; dim: int; n_layers: int; n_heads: int; n_kv_heads: int; hidden: int; vocab: int; head_dim: int
  rope_dim: int; theta: float; eps: float; ctx: int; rope_scale: float = 1.0
  rope_neox: bool = False                  # rotate halves (HF's rotate_half) instead of adjacent pairs
  sliding_window: int = 0                  # 0: every layer attends to the whole context
  swa_layers: tuple[bool, ...] = ()        # which layers use the sliding window (empty: all, when there is one)
  theta_local: float | None = None         # gemma 3: the sliding layers' rope base
  attn_scale: float | None = None          # None: 1/sqrt(head_dim)
  attn_softcap: float = 0.0                # gemma 2: scores -> cap * tanh(scores / cap); 0: off
  final_softcap: float = 0.0
  embed_scale: float = 1.0                 # gemma: embeddings times sqrt(dim)
  act: str = "silu"                        # the MLP gate's activation: silu or gelu (tanh approximation)
  def sliding(self, layer: int) -> bool:
    return self.sliding_window > 0 and (not self.swa_layers or self.swa_layers[layer])
  @staticmethod
  def from_gguf(kv: dict[str, Any], w: dict[str, QWeight]) -> Config:
    a = kv.get("general.architecture", "llama")
    g = lambda k, d=None: kv.get(f"{a}.{k}", d)
    dim, nh = g("embedding_length"), g("attention.head_count")
    if dim is None or nh is None: raise ValueError(f"GGUF metadata lacks {a}.embedding_length / {a}.attention.head_count: not a llama-family model?")
    hd = g("attention.key_length", dim // nh)
    vocab = len(kv["tokenizer.ggml.tokens"]) if "tokenizer.ggml.tokens" in kv else w["token_embd.weight"].shape[0]
    scale = float(g("rope.scaling.factor", 1.0)) if g("rope.scaling.type", "none") == "linear" else 1.0
    n_layers, window = g("block_count"), int(g("attention.sliding_window", 0) or 0)
    pattern = SWA_PATTERN.get(a)
    # llama.cpp's GGUF gemma norms already hold 1 + w, so only the embedding scale and the activation differ here
    return Config(a, dim, n_layers, nh, g("attention.head_count_kv", nh), g("feed_forward_length"), vocab, hd,
                  g("rope.dimension_count", hd), float(g("rope.freq_base", 10000.0)), float(g("attention.layer_norm_rms_epsilon", 1e-5)),
                  g("context_length", 2048), scale, rope_neox=a in NEOX_ROPE, sliding_window=window,
                  swa_layers=tuple((i + 1) % pattern != 0 for i in range(n_layers or 0)) if pattern else (),
                  theta_local=10000.0 if a == "gemma3" else None, attn_softcap=float(g("attn_logit_softcapping", 0.0) or 0.0),
                  final_softcap=float(g("final_logit_softcapping", 0.0) or 0.0), embed_scale=math.sqrt(dim) if a in GEMMA else 1.0,
                  act="gelu" if a in GEMMA else "silu",
                  # GGUF has no query_pre_attn_scalar: like llama.cpp, the 27B gemmas (46 / 62 layers) scale by dim/heads, the rest by head_dim
                  attn_scale=(dim / nh) ** -0.5 if (a, n_layers) in (("gemma2", 46), ("gemma3", 62)) else None)

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
    fused = bs[0].dequant().cat(*[x.dequant() for x in bs[1:]]).realize()
    w[b + "attn_qkv.bias"] = QWeight("F32", (sum(x.shape[0] for x in bs),), {"w": fused}, sum(x.nbytes for x in bs))

def _split_gate_up(w: dict[str, QWeight], b: str, hidden: int):
  """phi-3 keeps a layer's MLP gate and up projections in one `ffn_up` matrix of 2*hidden rows, gate rows first: split
  it in two (every block format stores its parts row by row, so a row range of each part is a row range of the matrix)."""
  up = b + "ffn_up.weight"
  if b + "ffn_gate.weight" in w or up not in w or len(w[up].shape) != 2 or w[up].shape[0] != 2 * hidden: return
  q = w.pop(up)
  for name, rows in ((b + "ffn_gate.weight", slice(0, hidden)), (up, slice(hidden, 2 * hidden))):
    if q._parts is None and len(q.host) == 1:   # still in the mapped file: split the rows there (still one copy to the device)
      w[name] = QWeight(q.kind, (hidden, q.shape[1]), nbytes=q.nbytes // 2, host=[q.host[0].reshape(q.shape[0], -1)[rows].reshape(-1)])
    else: w[name] = QWeight(q.kind, (hidden, q.shape[1]), {k: v[rows].contiguous().realize() for k, v in q.parts.items()}, q.nbytes // 2)

def rms_norm(x: Tensor, w: Tensor, eps: float) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + eps).rsqrt() * w

class Transformer:
  def __init__(self, cfg: Config, weights: dict[str, QWeight], max_context: int = 512, int8_activations: bool = True):
    self.cfg, self.w = cfg, weights
    self.int8_activations = int8_activations   # block-quantized matmuls through the device's int8 kernels (llm/quant_linear.py)
    self.max_context = min(max_context, cfg.ctx)
    for k in ("token_embd.weight", "output_norm.weight"):
      if k not in weights: raise ValueError(f"GGUF file has no tensor {k!r}")
    self.out_name = "output.weight" if "output.weight" in weights else "token_embd.weight"   # tied embeddings
    for i in range(cfg.n_layers):
      _split_gate_up(weights, f"blk.{i}.", cfg.hidden)
      _fuse_qkv(weights, f"blk.{i}.")
    # the embedding table is read row by row from the file (QWeight.rows); on the device only when it is also the output
    load = [k for k in weights if len(weights[k].shape) != 1 and (k != "token_embd.weight" or k == self.out_name)]
    small = [k for k in weights if len(weights[k].shape) == 1]
    with LoadProgress(len(load) + len(small), sum(weights[k].nbytes for k in load + small)) as bar:
      self.norms = {}
      for k in small:   # norms/biases: small, float32
        self.norms[k] = weights[k].dequant().realize()
        bar.advance(weights[k].nbytes)
      for k in load:
        weights[k].realize()
        bar.advance(weights[k].nbytes)
    def inv_freq(theta: float, scale: float) -> Tensor:
      # Python floats (float64, the same libm pow numpy calls): numpy's float64 power/divide loops are ~0.1 MiB of its
      # code pages that nothing else in an LLM run touches
      inv = np.array([1.0 / theta ** (i / cfg.rope_dim) for i in range(0, cfg.rope_dim, 2)], np.float64)
      if "rope_freqs.weight" in weights: inv = inv / weights["rope_freqs.weight"].numpy().astype(np.float64)   # llama 3.1 scaling
      return Tensor(np.array([x / scale for x in inv.tolist()], np.float32)).realize()
    self.inv_freq = inv_freq(cfg.theta, cfg.rope_scale)
    # gemma 3's sliding layers rotate with their own base and without the global layers' scaling
    self.inv_freq_local = inv_freq(cfg.theta_local, 1.0) if cfg.theta_local is not None else None
    # a layer's keys and values in one buffer (2, 1, kv heads, context, head dim): one kernel writes both each step
    shp = (2, 1, cfg.n_kv_heads, self.max_context, cfg.head_dim)
    self.cache = [Tensor.zeros(*shp).contiguous().realize() for _ in range(cfg.n_layers)]

  def embed(self, tokens) -> Tensor:
    rows = self.w["token_embd.weight"].rows(tokens).reshape(1, len(tokens), -1)
    return rows * self.cfg.embed_scale if self.cfg.embed_scale != 1.0 else rows

  def qlin(self, x: Tensor, name: str, norm: str | None = None, res: Tensor | None = None, up: str | None = None) -> Tensor | None:
    """[res +] W . [rmsnorm(x) * norms[norm]] (with `up`: silu(W . x') * (Up . x')) by the device's int8 kernel, run now;
    None when it has none for this weight (the caller builds the float graph instead)."""
    bias = self.norms.get(name + ".bias")
    if not self.int8_activations or (bias is not None and (res is not None or up is not None)): return None
    y = quant_linear(x, self.w[name + ".weight"], up=self.w[up + ".weight"] if up else None, norm=self.norms[norm] if norm else None,
                     eps=self.cfg.eps, res=res)
    return y + bias if y is not None and bias is not None else y

  def lin(self, x: Tensor, name: str) -> Tensor:
    y = x.matmul(self.w[name + ".weight"].dequant().T)
    return y + self.norms[name + ".bias"] if name + ".bias" in self.norms else y

  def rope(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # x: (1, T, heads, hd); cos/sin: (T, rope_dim/2). llama GGUFs pair adjacent dims, NEOX-style ones pair i with i + rd/2
    rd, hd = self.cfg.rope_dim, self.cfg.head_dim
    xr, rest = (x, None) if rd == hd else (x[..., :rd], x[..., rd:])
    c, s = cos.reshape(1, cos.shape[0], 1, rd // 2), sin.reshape(1, sin.shape[0], 1, rd // 2)
    if self.cfg.rope_neox:
      a, b = xr[..., :rd // 2], xr[..., rd // 2:]
      out = (a * c - b * s).cat(a * s + b * c, dim=-1)
    else:
      p = xr.reshape(*xr.shape[:-1], rd // 2, 2)
      a, b = p[..., 0], p[..., 1]
      out = (a * c - b * s).unsqueeze(-1).cat((a * s + b * c).unsqueeze(-1), dim=-1).reshape(xr.shape)
    return out if rest is None else out.cat(rest, dim=-1)

  def __call__(self, x: Tensor, pos: int | UOp, head: bool = True) -> Tensor:
    """x: (1, T, dim) embeddings of the tokens at positions pos..pos+T-1 -> logits (1, T, vocab), or with head=False the
    last layer's output (1, T, dim), for `head` to finish the rows that need logits. Writes the cache."""
    cfg, T, M = self.cfg, x.shape[1], self.max_context
    # the position as a value: a symbolic-length sum counts to pos inside the kernel, so no Python int is baked in
    pv = Tensor.ones(M)[:pos].sum() if isinstance(pos, UOp) else Tensor(float(pos))
    posn = pv + Tensor.arange(T).cast(dtypes.float32)                    # (T,)
    def angles(inv: Tensor) -> tuple[Tensor, Tensor]:
      ang = posn.reshape(T, 1) * inv.reshape(1, -1)
      return ang.cos().contiguous(), ang.sin().contiguous()   # computed once, not inside every layer's kernels
    rot = {False: angles(self.inv_freq)}
    if self.inv_freq_local is not None: rot[True] = angles(self.inv_freq_local)
    slots = Tensor.arange(M).cast(dtypes.float32)
    # a realize computes a contiguous() node only for its own targets: the per-layer cache writes below would otherwise
    # recompute these (and every earlier layer's residual) each time, O(layers^2) kernels per step
    Tensor.realize(*(t for cs in rot.values() for t in cs))
    causal = slots.reshape(1, M) <= posn.reshape(T, 1)   # over the whole cache
    # a sliding layer also hides keys `sliding_window` or more positions back (HF: kv > q - window)
    window = (causal & (slots.reshape(1, M) > posn.reshape(T, 1) - cfg.sliding_window)).contiguous().realize() if cfg.sliding_window else None
    rep = cfg.n_heads // cfg.n_kv_heads   # query head j reads kv head j // rep
    scale = cfg.attn_scale if cfg.attn_scale is not None else 1 / math.sqrt(cfg.head_dim)
    for i, kv in enumerate(self.cache):
      sliding = cfg.sliding(i)
      # with a bound position, attention reads only the first pos+T cache rows, a symbolic length (a prefill chunk at the
      # start of a 512-token context no longer scores all 512 slots); single-token decode needs no mask then. A sliding
      # layer reads them all, masked
      symbolic_read = isinstance(pos, UOp) and not sliding
      mask = window if sliding else None if symbolic_read and T == 1 else causal
      cos, sin = rot[sliding and self.inv_freq_local is not None]
      b = f"blk.{i}."
      x = x.realize()   # this layer's input as a buffer: both cache writes and the attention read it
      qkv = self.qlin(x, b + "attn_qkv", norm=b + "attn_norm.weight") if b + "attn_qkv.weight" in self.w else None
      if qkv is None:
        # normed once into a buffer: the matvecs reading it go row by row and would redo the norm for every row
        h = rms_norm(x, self.norms[b + "attn_norm.weight"], cfg.eps).contiguous()
        # one matvec for the three projections, computed once: the cache writes and the attention both read it
        if b + "attn_qkv.weight" in self.w: qkv = self.lin(h, b + "attn_qkv").contiguous().realize()
        else: q, k, v = (self.lin(h, b + n) for n in ("attn_q", "attn_k", "attn_v"))
      # one decode token of a plain layer: the device's own kernel writes the cache row and attends (llm/attention.py)
      att = None
      if qkv is not None and T == 1 and isinstance(pos, UOp) and not sliding and not cfg.attn_softcap and b + "attn_q_norm.weight" not in self.norms:
        att = decode_attention(qkv, kv, cos, sin, pos, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
                               rope_dim=cfg.rope_dim, neox=cfg.rope_neox, scale=scale)
      if att is None:
        if qkv is not None:
          nq, nk = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
          q, k, v = qkv[..., :nq], qkv[..., nq:nq + nk], qkv[..., nq + nk:]
        q = q.reshape(1, T, cfg.n_heads, cfg.head_dim)
        k, v = k.reshape(1, T, cfg.n_kv_heads, cfg.head_dim), v.reshape(1, T, cfg.n_kv_heads, cfg.head_dim)
        if b + "attn_q_norm.weight" in self.norms:   # qwen3: per-head norms before rope
          q, k = rms_norm(q, self.norms[b + "attn_q_norm.weight"], cfg.eps), rms_norm(k, self.norms[b + "attn_k_norm.weight"], cfg.eps)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin).transpose(1, 2)
        # fused into the score kernel, q's rotation is redone for every key, in scalar code: a prefill chunk's scores ran
        # 2.7x slower so. One token against a short cache redoes less than a kernel launch costs, so decode keeps it fused
        if T != 1 or M > ROPE_Q_FUSED_MAX_CONTEXT: q = q.contiguous()
        q = q.transpose(1, 2)   # (1, heads, T, hd)
        v = v.transpose(1, 2)
        # only rows pos..pos+T-1 are written (a view at a symbolic offset): the rest of the cache is neither read nor copied
        kv[:, :, :, pos:pos + T].assign(k.unsqueeze(0).cat(v.unsqueeze(0), dim=0)).realize()
        # attention by broadcasting in 6-d (kv head, group, query, key, feature): the cache is reshaped while its shape is
        # concrete and only then cut to pos+1 rows, since a symbolic dim can't pass through a reshape
        K, V = (kv[j].reshape(1, cfg.n_kv_heads, 1, 1, M, cfg.head_dim) for j in (0, 1))
        if symbolic_read: K, V = K[:, :, :, :, :pos + T], V[:, :, :, :, :pos + T]
        s = (q.reshape(1, cfg.n_kv_heads, rep, T, 1, cfg.head_dim) * K).sum(-1, keepdim=True) * scale
        if cfg.attn_softcap: s = (s * (1 / cfg.attn_softcap)).tanh() * cfg.attn_softcap
        if mask is not None:   # reshaped while concrete, then cut like the cache
          m6 = mask.reshape(1, 1, 1, T, M, 1)
          s = (m6[:, :, :, :, :pos + T] if symbolic_read else m6).where(s, -math.inf)
        # the probabilities into a buffer: fused into the weighted sum, each key's exp was redone for every 16 output lanes
        # (decode's output kernel 24 -> 9 us per layer, plus 4 for this one; a replayed launch costs ~2 us)
        att = (s.softmax(-2).contiguous() * V).sum(-2).reshape(1, cfg.n_heads, T, cfg.head_dim).transpose(1, 2)
        att = att.reshape(1, T, cfg.n_heads * cfg.head_dim)
      post_attn, post_ffw = b + "post_attention_norm.weight" in self.norms, b + "post_ffw_norm.weight" in self.norms
      if post_attn or (y := self.qlin(att, b + "attn_output", res=x)) is None:
        y = (x + self.post_norm(self.lin(att, b + "attn_output"), b + "post_attention_norm.weight")).contiguous()
      x = y
      act = None if cfg.act != "silu" else self.qlin(x, b + "ffn_gate", norm=b + "ffn_norm.weight", up=b + "ffn_up")
      if act is None:
        h = rms_norm(x, self.norms[b + "ffn_norm.weight"], cfg.eps).contiguous()
        gate = self.lin(h, b + "ffn_gate")
        act = (gate.gelu() if cfg.act == "gelu" else gate.silu()) * self.lin(h, b + "ffn_up")
      if post_ffw or (y := self.qlin(act, b + "ffn_down", res=x)) is None:
        y = (x + self.post_norm(self.lin(act, b + "ffn_down"), b + "post_ffw_norm.weight")).contiguous()   # one residual buffer per step
      x = y
    return self.head(x) if head else x

  def head(self, x: Tensor) -> Tensor:
    """The final norm and the output matmul: hidden states (..., dim) -> logits (..., vocab)."""
    cfg, name = self.cfg, self.out_name[:-len(".weight")]
    if (out := self.qlin(x, name, norm="output_norm.weight")) is None: out = self.lin(rms_norm(x, self.norms["output_norm.weight"], cfg.eps), name)
    return (out * (1 / cfg.final_softcap)).tanh() * cfg.final_softcap if cfg.final_softcap else out

  def post_norm(self, y: Tensor, name: str) -> Tensor:
    """gemma 2/3 norm each sublayer's output before adding it to the residual."""
    return rms_norm(y, self.norms[name], self.cfg.eps) if name in self.norms else y
