"""A Hugging Face checkpoint directory as an LLM: config.json (the architecture), tokenizer.json (+ tokenizer_config.json
for the chat template) and model.safetensors or shards named by model.safetensors.index.json. Tensors are renamed to
the GGUF names the model code uses and copied one at a time from the memory-mapped files to device buffers, in the
dtype they are stored in (bf16/fp16 stay as such; the matmuls widen them as they read). Everything in the directory is
data: sizes and names are checked before use, and shard names can't leave the directory."""
from __future__ import annotations
import json, math, os, re
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.llm.model import Config
from tinycore.llm.pretokenize import GPT2 as PRE_GPT2
from tinycore.llm.weights import QWeight, check_llm_metadata
from tinycore.nn.file_errors import CorruptFileError

MAX_VOCAB = 1 << 20  # token ids: the largest real vocabularies are ~260k
MAX_JSON = 64 << 20   # config/tokenizer files are kilobytes to a few MB; a bigger one is not a tokenizer

# HF model_type -> the architecture name (GGUF's) the model code knows
ARCHS = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma": "gemma", "gemma2": "gemma2",
         "gemma3_text": "gemma3", "gemma3": "gemma3", "phi3": "phi3"}
LAYER = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "self_attn.qkv_proj": "attn_qkv", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
         "mlp.gate_up_proj": "ffn_up"}   # phi-3's fused gate/up: split by the model
# gemma 2/3 norm before and after each sublayer: HF's post_attention_layernorm is then a post-norm, not the MLP's pre-norm
GEMMA2_LAYER = {"post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
                "post_feedforward_layernorm": "post_ffw_norm"}
TOP = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}

def read_json(path: str, what: str) -> Any:
  try:
    if os.path.getsize(path) > MAX_JSON: raise CorruptFileError(f"{path}: {what} is over {MAX_JSON >> 20} MiB")
    with open(path, "rb") as f: return json.loads(f.read())
  except FileNotFoundError: raise CorruptFileError(f"{os.path.dirname(path)}: no {os.path.basename(path)} ({what})") from None
  except (ValueError, RecursionError) as e: raise CorruptFileError(f"{path}: {what} is not valid JSON: {e}") from None

def gguf_name(hf: str, arch: str) -> str | None:
  """The GGUF tensor name for an HF one (None: a tensor the model doesn't use, such as rotary caches)."""
  base, _, kind = hf.rpartition(".")
  if base in TOP: return f"{TOP[base]}.{kind}"
  m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", base)
  if not m: return None
  part = m.group(2)
  name = ((GEMMA2_LAYER.get(part) if arch in ("gemma2", "gemma3") else None) or LAYER.get(part)
          or ("ffn_norm" if part == "post_attention_layernorm" else None))
  return f"blk.{int(m.group(1))}.{name}.{kind}" if name else None

def _shards(d: str) -> list[str]:
  index = os.path.join(d, "model.safetensors.index.json")
  if os.path.exists(index):
    wm = read_json(index, "the shard index").get("weight_map")
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
      raise CorruptFileError(f"{index}: weight_map is not a name -> file table")
    files = sorted(set(wm.values()))
    for f in files:   # a shard is a file in this directory: no paths, no '..'
      if os.path.basename(f) != f or f in ("", ".", "..") or not f.endswith(".safetensors"):
        raise CorruptFileError(f"{index}: shard name {f!r} is not a .safetensors file in the directory")
    return [os.path.join(d, f) for f in files]
  single = os.path.join(d, "model.safetensors")
  if not os.path.exists(single): raise CorruptFileError(f"{d}: no model.safetensors or model.safetensors.index.json")
  return [single]

def load_weights(d: str, arch: str) -> dict[str, QWeight]:
  from tinycore.nn.state import SAFE_DTYPES, safe_load_metadata, tensor_from_bytes
  out: dict[str, QWeight] = {}
  kinds = {"F32": "F32", "F16": "F16", "BF16": "BF16"}
  for path in _shards(d):
    header, start, mv = safe_load_metadata(path)
    for k, info in header.items():
      if k == "__metadata__" or (name := gguf_name(k, arch)) is None: continue
      if info["dtype"] not in kinds: raise CorruptFileError(f"{path}: tensor {k!r} is {info['dtype']}; weights must be F32, F16 or BF16")
      if name in out: raise CorruptFileError(f"{path}: tensor {k!r} appears in more than one shard")
      b, e = info["data_offsets"]
      t = tensor_from_bytes(mv[start + b:start + e], SAFE_DTYPES[info["dtype"]], tuple(info["shape"]))   # one copy: mapping -> buffer
      out[name] = QWeight(kinds[info["dtype"]], tuple(info["shape"]), {"w": t}, e - b)
  return out

def _gemma_norms(w: dict[str, QWeight]) -> None:
  """HF's gemma RMSNorm scales by (1 + weight); the model code (like llama.cpp's GGUF) multiplies by the stored weight."""
  from tinycore.dtype import dtypes
  for n, q in list(w.items()):
    if len(q.shape) == 1 and "norm" in n:
      w[n] = QWeight("F32", q.shape, {"w": (q.parts["w"].cast(dtypes.float32) + 1).realize()}, q.nbytes)

def llama3_rope_factors(p: dict, theta: float, rope_dim: int) -> np.ndarray:
  """llama 3.1+'s rope scaling as per-frequency divisors (what llama.cpp's GGUF stores as rope_freqs.weight): long
  wavelengths are slowed by `factor`, short ones kept, the band between blended."""
  factor, lo, hi, old = (float(p[k]) for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"))
  if not (factor > 0 and 0 < lo < hi and old > 0):
    raise ValueError(f"config.json: llama3 rope parameters {p} are not factor > 0, 0 < low_freq_factor < high_freq_factor")
  inv = 1.0 / theta ** (np.arange(0, rope_dim, 2, dtype=np.float64) / rope_dim)
  wavelen = 2 * math.pi / inv
  smooth = np.clip((old / wavelen - lo) / (hi - lo), 0.0, 1.0)   # 0: wavelength beyond old/lo, 1: below old/hi
  new = (1 - smooth) * inv / factor + smooth * inv
  return (inv / new).astype(np.float32)

def _rope(c: dict, arch: str) -> tuple[float, float | None, float, float]:
  """(theta, local theta, linear scale, partial rotary factor) from either config layout (transformers 5's
  rope_parameters, per layer type for gemma 3, or the older rope_theta/rope_scaling/rope_local_base_freq keys)."""
  rp = c.get("rope_parameters") or {}
  glob = rp.get("full_attention", rp) if isinstance(rp, dict) else {}
  local = rp.get("sliding_attention") if isinstance(rp, dict) else None
  theta = float(glob.get("rope_theta", c.get("rope_theta", 10000.0)))
  theta_local = float(local["rope_theta"]) if isinstance(local, dict) and "rope_theta" in local else c.get("rope_local_base_freq")
  scaling = glob if glob.get("rope_type") not in (None, "default") else (c.get("rope_scaling") or {})
  kind = scaling.get("rope_type", scaling.get("type", "default"))
  if kind not in ("default", "linear", "llama3"): raise ValueError(f"config.json: rope scaling {kind!r} is not supported (default, linear or llama3)")
  scale = float(scaling.get("factor", 1.0)) if kind == "linear" else 1.0
  partial = float(glob.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0)))
  if arch == "gemma3" and theta_local is None: theta_local = 10000.0
  return theta, (float(theta_local) if theta_local is not None else None), scale, partial

def hf_config(c: dict, w: dict[str, QWeight]) -> Config:
  if "text_config" in c and c.get("model_type") == "gemma3": c = {**c["text_config"], "model_type": "gemma3_text"}
  mt = c.get("model_type")
  if mt not in ARCHS: raise ValueError(f"config.json: model_type {mt!r} is not supported (supported: {', '.join(sorted(ARCHS))})")
  arch = ARCHS[mt]
  def num(k: str, default: Any = None, lo: float = 1) -> Any:
    v = c.get(k, default)
    if v is None: raise ValueError(f"config.json has no {k}")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v < 1 << 31) or (isinstance(default, int) and not isinstance(v, int)):
      raise ValueError(f"config.json: {k} is {v!r}, not a number >= {lo}")
    return v
  dim, nh, n_layers = num("hidden_size"), num("num_attention_heads"), num("num_hidden_layers")
  nkv = num("num_key_value_heads", nh)
  hd = c.get("head_dim") or dim // nh
  if not isinstance(hd, int) or hd < 1: raise ValueError(f"config.json: head_dim {hd!r} is not a positive integer")
  if nh % nkv: raise ValueError(f"config.json: num_key_value_heads {nkv} doesn't divide num_attention_heads {nh}")
  theta, theta_local, scale, partial = _rope(c, arch)
  rope_dim = int(hd * partial)
  if rope_dim % 2 or rope_dim < 2: raise ValueError(f"config.json: partial_rotary_factor {partial} leaves {rope_dim} rotary dims of head_dim {hd}")
  window = c.get("sliding_window") or 0
  if arch == "qwen2" or arch == "qwen3": window = window if c.get("use_sliding_window") else 0
  if not (isinstance(window, int) and window >= 0): raise ValueError(f"config.json: sliding_window {window!r} is not a non-negative integer")
  types = c.get("layer_types")
  if types is not None and not (isinstance(types, list) and len(types) == n_layers
                                and all(t in ("sliding_attention", "full_attention") for t in types)):
    raise ValueError(f"config.json: layer_types must list sliding_attention/full_attention for each of the {n_layers} layers")
  if types is None and arch in ("gemma2", "gemma3"):
    pattern = 2 if arch == "gemma2" else int(c.get("sliding_window_pattern", 6))
    types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)]
  act = c.get("hidden_activation", c.get("hidden_act", "silu"))
  if act not in ("silu", "gelu_pytorch_tanh", "gelu"): raise ValueError(f"config.json: activation {act!r} is not supported (silu, gelu_pytorch_tanh)")
  qpa = c.get("query_pre_attn_scalar")
  return Config(arch, dim, n_layers, nh, nkv, num("intermediate_size"), w["token_embd.weight"].shape[0], hd, rope_dim, theta,
                float(num("rms_norm_eps", 1e-6, lo=0)), int(num("max_position_embeddings", 2048)), scale, rope_neox=True,
                sliding_window=window, swa_layers=tuple(t == "sliding_attention" for t in types) if types else (),
                theta_local=theta_local, attn_scale=float(qpa) ** -0.5 if arch in ("gemma2", "gemma3") and qpa else None,
                attn_softcap=float(c.get("attn_logit_softcapping") or 0.0), final_softcap=float(c.get("final_logit_softcapping") or 0.0),
                embed_scale=math.sqrt(dim) if arch in ("gemma", "gemma2", "gemma3") else 1.0, act="silu" if act == "silu" else "gelu")

def _token_text(t: Any) -> str:
  return t if isinstance(t, str) else t.get("content", "") if isinstance(t, dict) else ""

def tokenizer_kv(d: str, vocab_rows: int) -> dict[str, Any]:
  """tokenizer.json (+ tokenizer_config.json) as the GGUF tokenizer metadata the Tokenizer reads: byte-level BPE keeps
  the file's own pre-tokenizer regexes; a BPE with byte fallback over '▁' pieces is read as SentencePiece."""
  tj = read_json(os.path.join(d, "tokenizer.json"), "the tokenizer")
  tc = read_json(os.path.join(d, "tokenizer_config.json"), "the tokenizer config") if os.path.exists(os.path.join(d, "tokenizer_config.json")) else {}
  model = tj.get("model") or {}
  if model.get("type") != "BPE": raise ValueError(f"tokenizer.json: model type {model.get('type')!r} is not supported (BPE)")
  vocab, merges = model.get("vocab"), model.get("merges") or []
  if not isinstance(vocab, dict) or not all(isinstance(i, int) and 0 <= i < MAX_VOCAB for i in vocab.values()):
    raise ValueError(f"tokenizer.json: model.vocab is not a token -> id table (ids below {MAX_VOCAB})")
  merges = [" ".join(m) if isinstance(m, list) else m for m in merges]
  if not all(isinstance(m, str) and len(m.split(" ")) == 2 for m in merges): raise ValueError("tokenizer.json: model.merges are not pairs")
  added = tj.get("added_tokens") or []
  if not isinstance(added, list): raise ValueError("tokenizer.json: added_tokens is not a list")
  added = [a for a in added
           if isinstance(a, dict) and isinstance(a.get("id"), int) and isinstance(a.get("content"), str) and 0 <= a["id"] < MAX_VOCAB]
  n = max([vocab_rows, *(i + 1 for i in vocab.values()), *(a["id"] + 1 for a in added)])
  tokens, types = [f"<unused_{i}>" for i in range(n)], [5] * n   # ids the vocabulary leaves free (padded embedding rows)
  for t, i in vocab.items(): tokens[i], types[i] = t, 1
  for a in added: tokens[a["id"]], types[a["id"]] = a["content"], 3 if a.get("special") else 4
  def pieces(node: Any) -> list[dict]:   # a pre-tokenizer/normalizer and, for a Sequence, its members
    if not isinstance(node, dict): return []
    return [node] + [x for sub in node.get("pretokenizers", node.get("normalizers", [])) or [] for x in pieces(sub)]
  pre, norm = pieces(tj.get("pre_tokenizer")), pieces(tj.get("normalizer"))
  kv: dict[str, Any] = {"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": merges}
  if model.get("byte_fallback"):   # SentencePiece converted to BPE: a merge's rank orders it, as a score would
    scores = [0.0] * n
    for r, m in enumerate(merges):
      if (i := vocab.get(m.replace(" ", ""))) is not None and scores[i] == 0.0: scores[i] = -float(r + 1)
    for i, t in enumerate(tokens):
      if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", t): types[i] = 6
    prefix = (any(p.get("type") == "Prepend" for p in norm)
              or any(p.get("type") == "Metaspace" and p.get("prepend_scheme", "always") != "never" for p in pre))
    kv.update({"tokenizer.ggml.model": "llama", "tokenizer.ggml.scores": scores, "tokenizer.ggml.add_space_prefix": prefix})
  else:
    if not any(p.get("type") == "ByteLevel" for p in pre + pieces(tj.get("decoder"))):
      raise ValueError("tokenizer.json: a BPE without byte fallback must be byte-level")
    regexes = []
    for p in pre:
      if p.get("type") != "Split": continue
      if not (isinstance(p.get("pattern"), dict) and isinstance(p["pattern"].get("Regex"), str)
              and p.get("behavior") == "Isolated" and not p.get("invert")):
        raise ValueError(f"tokenizer.json: a Split pre-tokenizer {json.dumps(p)[:120]} is not supported (a Regex pattern, Isolated, not inverted)")
      regexes.append(p["pattern"]["Regex"])
    if any(p.get("type") == "ByteLevel" and p.get("use_regex", True) for p in pre): regexes.append(PRE_GPT2)
    if any(p.get("type") not in ("Split", "ByteLevel", "Sequence") for p in pre):
      raise ValueError(f"tokenizer.json: pre-tokenizers {[p.get('type') for p in pre]} are not supported (Split, ByteLevel)")
    kv.update({"tokenizer.ggml.model": "gpt2", "tokenizer.pre_regexes": regexes or [PRE_GPT2],
               "tokenizer.ignore_merges": bool(model.get("ignore_merges"))})
  ids = {t: i for i, t in enumerate(tokens)}
  for k in ("bos", "eos"):
    if (t := _token_text(tc.get(f"{k}_token"))) in ids: kv[f"tokenizer.ggml.{k}_token_id"] = ids[t]
  # BOS is added by tokenizer_config's add_bos_token, or (llama 3) by a post-processor template that starts with it
  post = pieces_of_post(tj.get("post_processor"))
  bos_text = _token_text(tc.get("bos_token"))
  starts_with_bos = bool(bos_text) and any(isinstance(p.get("single"), list) and p["single"] and isinstance(p["single"][0], dict) and
                                           (p["single"][0].get("SpecialToken") or {}).get("id") == bos_text for p in post)
  kv["tokenizer.ggml.add_bos_token"] = bool(tc.get("add_bos_token", starts_with_bos)) and "tokenizer.ggml.bos_token_id" in kv
  if isinstance(tc.get("chat_template"), str): kv["tokenizer.chat_template"] = tc["chat_template"]
  elif os.path.exists(tpath := os.path.join(d, "chat_template.jinja")):
    with open(tpath, encoding="utf-8") as f: kv["tokenizer.chat_template"] = f.read(MAX_JSON)
  return kv

def pieces_of_post(node: Any) -> list[dict]:
  """A post-processor and, for a Sequence, its members."""
  if not isinstance(node, dict): return []
  return [node] + [x for sub in node.get("processors", []) or [] for x in pieces_of_post(sub)]

def load_hf_dir(d: str) -> tuple[dict[str, Any], dict[str, QWeight], Config]:
  """(metadata in GGUF terms, weights by GGUF name, model config) of an HF checkpoint directory."""
  c = read_json(os.path.join(d, "config.json"), "the model config")
  if not isinstance(c, dict): raise CorruptFileError(f"{d}/config.json is not a JSON object")
  mt = (c.get("text_config") or {}).get("model_type", "gemma3_text") if c.get("model_type") == "gemma3" else c.get("model_type")
  arch = ARCHS.get(str(mt), "llama")
  w = load_weights(d, arch)
  if "token_embd.weight" not in w: raise CorruptFileError(f"{d}: the checkpoint has no model.embed_tokens.weight")
  if arch in ("gemma", "gemma2", "gemma3"): _gemma_norms(w)
  cfg = hf_config(c, w)
  rp = c.get("rope_parameters") or c.get("rope_scaling") or {}
  if isinstance(rp, dict) and rp.get("rope_type", rp.get("type")) == "llama3":
    f = llama3_rope_factors(rp, cfg.theta, cfg.rope_dim)
    w["rope_freqs.weight"] = QWeight("F32", f.shape, {"w": Tensor(f)}, f.nbytes)
  kv = tokenizer_kv(d, cfg.vocab)
  kv.update({"general.architecture": cfg.arch, f"{cfg.arch}.embedding_length": cfg.dim, f"{cfg.arch}.attention.head_count": cfg.n_heads,
             f"{cfg.arch}.attention.head_count_kv": cfg.n_kv_heads, f"{cfg.arch}.block_count": cfg.n_layers,
             f"{cfg.arch}.attention.key_length": cfg.head_dim, f"{cfg.arch}.feed_forward_length": cfg.hidden})
  check_llm_metadata({k: v for k, v in kv.items() if k != "tokenizer.ggml.tokens"}, w, d)   # every weight's shape against config.json
  return kv, w, cfg
