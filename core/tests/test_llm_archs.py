"""Architectures beyond llama, each checked against transformers on a small randomly initialised model built from a config
here (no downloads), saved as a Hugging Face checkpoint directory (sharded safetensors + tokenizer.json) and loaded by
`LLM(dir)`: logits over a prompt agree (cosine > 0.9999) and 32 greedy tokens are the same. The prompt plus the 32
tokens run past the sliding window, so the window is exercised in decode as well as prefill."""
import zlib, json, os
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
pytestmark = pytest.mark.needs_device

COMMON = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, vocab_size=320,
              max_position_embeddings=128, rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=None, pad_token_id=None)
WINDOW = 8
ARCHS = {
  "llama": ("LlamaConfig", "LlamaForCausalLM", dict(rope_theta=10000.0)),
  "llama3.1": ("LlamaConfig", "LlamaForCausalLM", dict(rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                                        "original_max_position_embeddings": 16})),
  "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),                                    # q/k/v biases
  "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=24)),                     # q/k norms, head_dim != hidden/heads
  "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=WINDOW, head_dim=16)),
  "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(head_dim=16, hidden_act="gelu_pytorch_tanh")),   # embedding scale, 1+w norms, gelu
  "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(sliding_window=WINDOW, head_dim=16, query_pre_attn_scalar=24, attn_logit_softcapping=50.0,
                                                       final_logit_softcapping=30.0,
                                                       layer_types=["sliding_attention", "full_attention", "sliding_attention"])),
  "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(sliding_window=WINDOW, head_dim=16, query_pre_attn_scalar=16,
                                                           layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                                                           rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                                            "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0,
                                                                                               "factor": 4.0}})),
  "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(sliding_window=WINDOW)),              # fused qkv and gate_up
}
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

def write_tokenizer(d: str) -> None:
  from tokenizers import Regex, models, pre_tokenizers, trainers
  from tinycore.llm.pretokenize import QWEN2
  tok = tokenizers.Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), behavior="isolated"),
                                               pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
  text = ["the tree is lit and the world is wide, hello world!", "def f(x):\n    return x + 1\n", "1234 5678"] * 20
  tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
  tok.save(os.path.join(d, "tokenizer.json"))
  with open(os.path.join(d, "tokenizer_config.json"), "w") as f: json.dump({"eos_token": "<|endoftext|>", "chat_template": CHATML}, f)

def build(arch: str, d: str, dtype=None):
  """A random model of `arch` saved to d (several shards); the HF model is returned in float32."""
  cfg_name, model_name, extra = ARCHS[arch]
  cfg = getattr(transformers, cfg_name)(**{**COMMON, **extra})
  cfg._attn_implementation = "eager"
  torch.manual_seed(zlib.crc32(arch.encode()) % 1000)   # not hash(): str hashes differ per process
  model = getattr(transformers, model_name)(cfg).eval()
  with torch.no_grad():   # the default init (std 0.02) makes near-uniform logits where greedy picks are coin flips
    for n, p in model.named_parameters():
      if p.ndim == 2: p.normal_(0, 1.0 if "embed" in n else p.shape[1] ** -0.5)
      else: p.copy_((0.1 if arch.startswith("gemma") else 1.0) + 0.1 * torch.randn_like(p)) if "norm" in n else p.normal_(0, 0.1)
  (model.to(dtype) if dtype is not None else model).save_pretrained(d, max_shard_size="100KB")
  write_tokenizer(d)
  if dtype is not None: model = getattr(transformers, model_name).from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
  return model

def hf_greedy(model, prompt: list[int], n: int) -> list[int]:
  ids = list(prompt)
  with torch.no_grad():
    for _ in range(n): ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
  return ids[len(prompt):]

def cosine(a: np.ndarray, b: np.ndarray) -> float: return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))

# the default run checks three architectures that between them cover every feature path (rope scaling styles, soft-caps,
# sliding windows, fused qkv); each compiles its own kernels, ~40 s on 2 cores, so the rest run under -m slow
FAST = ("llama3.1", "gemma2", "phi3")
def _archs(names) -> list: return [a if a in FAST else pytest.param(a, marks=pytest.mark.slow) for a in names]

@pytest.mark.parametrize("arch", _archs(ARCHS))
def test_matches_transformers(arch, tmp_path):
  from tinycore.llm.generate import LLM
  d = str(tmp_path)
  model = build(arch, d)
  assert os.path.exists(os.path.join(d, "model.safetensors.index.json"))   # sharded
  llm = LLM(d, max_context=64, chunk=8)
  prompt = llm.tok.encode("the tree is lit, hello world")
  assert 6 <= len(prompt) <= 16
  with torch.no_grad(): want = model(torch.tensor([prompt])).logits[0].numpy()
  got = llm.forward_all(prompt)
  assert got.shape == want.shape
  assert cosine(got, want) > 0.9999, (arch, cosine(got, want))
  assert len(prompt) + 32 > 2 * WINDOW
  logits, ours = llm.prefill(prompt), []
  for j in range(32):
    ours.append(int(np.argmax(logits)))
    logits = llm.decode(ours[-1], len(prompt) + j)
  assert ours == hf_greedy(model, prompt, 32), arch

def test_bf16_checkpoint_stays_bf16(tmp_path):
  from tinycore.dtype import dtypes
  from tinycore.llm.generate import LLM
  model = build("qwen3", str(tmp_path), dtype=torch.bfloat16)
  llm = LLM(str(tmp_path), max_context=32, chunk=8)
  w = llm.model.w
  assert w["output.weight"].kind == "BF16" and w["output.weight"].parts["w"].dtype == dtypes.bfloat16
  assert llm.weight_bytes < 0.6 * sum(p.numel() * 4 for p in model.parameters())   # half the float32 bytes, not a float32 copy
  prompt = llm.tok.encode("hello world")
  with torch.no_grad(): want = model(torch.tensor([prompt])).logits[0].numpy()
  assert cosine(llm.forward_all(prompt), want) > 0.9999

def test_bad_checkpoints_are_clear_errors(tmp_path):
  from tinycore.llm.generate import LLM
  d = str(tmp_path)
  build("llama", d)
  cfg = json.load(open(os.path.join(d, "config.json")))
  with open(os.path.join(d, "config.json"), "w") as f: json.dump({**cfg, "model_type": "mamba"}, f)
  with pytest.raises(ValueError, match="model_type 'mamba' is not supported"): LLM(d)
  with open(os.path.join(d, "config.json"), "w") as f: json.dump({**cfg, "num_attention_heads": 3}, f)
  with pytest.raises(ValueError, match="num_key_value_heads 2 doesn't divide|head"): LLM(d)
  with open(os.path.join(d, "config.json"), "w") as f: json.dump({**cfg, "intermediate_size": 100}, f)
  with pytest.raises(ValueError, match="ffn_gate.weight' has shape"): LLM(d)
  with open(os.path.join(d, "config.json"), "w") as f: json.dump(cfg, f)
  idx = os.path.join(d, "model.safetensors.index.json")
  m = json.load(open(idx))
  m["weight_map"]["lm_head.weight"] = "../../etc/passwd"
  with open(idx, "w") as f: json.dump(m, f)
  with pytest.raises(ValueError, match="shard name"): LLM(d)

def test_runner_takes_a_checkpoint_directory(tmp_path, capsys):
  from tinycore.llm.__main__ import main
  model = build("qwen3", str(tmp_path))
  assert main(["-m", str(tmp_path), "--raw", "--prompt", "hello world", "--max-tokens", "6", "--max-context", "32", "--chunk", "8"]) == 0
  out = capsys.readouterr()
  assert "loaded" in out.err and "qwen3" in out.err
  from tinycore.llm.generate import LLM
  tok = LLM(str(tmp_path), max_context=32, chunk=8).tok
  want = hf_greedy(model, tok.encode("hello world"), 6)
  assert out.out.rstrip("\n") == tok.decode(want)   # the printed reply is transformers' greedy reply

GGUF_ARCH = {"llama": "llama", "llama3.1": "llama", "mistral": "llama", "gemma": "gemma", "qwen2": "qwen2", "qwen3": "qwen3", "gemma2": "gemma2",
             "gemma3": "gemma3", "phi3": "phi3"}

def to_gguf(model, arch: str, d: str, path: str) -> None:
  """The model as llama.cpp's converter writes it (F32): GGUF names, gemma norms as 1 + w, llama's q/k rows permuted
  to rotate adjacent pairs, phi-3's fused matrices kept fused, the tokenizer as gpt2 + pre 'qwen2'."""
  from tinycore.llm.gguf_write import gguf_write
  from tinycore.llm.hf import gguf_name, tokenizer_kv
  a, c = GGUF_ARCH[arch], model.config
  kv = {k: v for k, v in tokenizer_kv(d, c.vocab_size).items() if not k.startswith("tokenizer.pre_regexes") and k != "tokenizer.ignore_merges"}
  kv.update({"general.architecture": a, "tokenizer.ggml.pre": "qwen2"})
  hd = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
  rp = c.rope_parameters.get("full_attention", c.rope_parameters)
  meta = {"embedding_length": c.hidden_size, "block_count": c.num_hidden_layers, "attention.head_count": c.num_attention_heads,
          "attention.head_count_kv": c.num_key_value_heads, "feed_forward_length": c.intermediate_size, "context_length": c.max_position_embeddings,
          "rope.freq_base": float(rp["rope_theta"]), "attention.layer_norm_rms_epsilon": float(c.rms_norm_eps), "attention.key_length": hd,
          "attention.value_length": hd, "rope.dimension_count": hd}
  if getattr(c, "sliding_window", None): meta["attention.sliding_window"] = c.sliding_window
  for k in ("attn_logit_softcapping", "final_logit_softcapping"):
    if getattr(c, k, None): meta[k] = float(getattr(c, k))
  if rp.get("rope_type") == "linear": meta.update({"rope.scaling.type": "linear", "rope.scaling.factor": float(rp["factor"])})
  extra = {}
  if rp.get("rope_type") == "llama3":   # llama.cpp's converter stores llama 3.1's scaling as per-frequency factors
    from tinycore.llm.hf import llama3_rope_factors
    extra["rope_freqs.weight"] = (llama3_rope_factors(rp, float(rp["rope_theta"]), hd), "F32")
  kv.update({f"{a}.{k}": v for k, v in meta.items()})
  tensors = {}
  for name, t in model.state_dict().items():
    g, x = gguf_name(name, a), t.detach().float().numpy()
    if g is None or (name == "lm_head.weight" and c.tie_word_embeddings): continue
    if a.startswith("gemma") and x.ndim == 1 and "norm" in g: x = x + 1
    if a == "llama" and (g.endswith("attn_q.weight") or g.endswith("attn_k.weight")):
      n = x.shape[0] // hd
      x = x.reshape(n, 2, hd // 2, -1).swapaxes(1, 2).reshape(x.shape)
    tensors[g] = (x, "F32")
  gguf_write(path, kv, {**tensors, **extra})

@pytest.mark.parametrize("arch", [pytest.param(a, marks=pytest.mark.slow) if a != "gemma3" else a for a in ARCHS if a != "qwen2"])
def test_gguf_of_the_same_model_matches_transformers(arch, tmp_path):
  """The same architectures read from GGUF metadata (Config.from_gguf) instead of config.json."""
  from tinycore.llm.generate import LLM
  ARCHS_GGUF = ARCHS[arch][2]
  if arch == "gemma2": ARCHS_GGUF = dict(ARCHS_GGUF, query_pre_attn_scalar=16)   # GGUF can't say 24: llama.cpp scales by head_dim
  if arch == "gemma3": ARCHS_GGUF = dict(ARCHS_GGUF, num_hidden_layers=6, layer_types=None)   # GGUF has no layer list: gemma 3's own 5:1 pattern
  saved = ARCHS[arch]
  ARCHS[arch] = (saved[0], saved[1], ARCHS_GGUF)
  try: model = build(arch, str(tmp_path))
  finally: ARCHS[arch] = saved
  to_gguf(model, arch, str(tmp_path), str(tmp_path / "m.gguf"))
  llm = LLM(str(tmp_path / "m.gguf"), max_context=64, chunk=8)
  assert llm.cfg.arch == GGUF_ARCH[arch]
  prompt = llm.tok.encode("the tree is lit, hello world")
  with torch.no_grad(): want = model(torch.tensor([prompt])).logits[0].numpy()
  assert cosine(llm.forward_all(prompt), want) > 0.9999, arch
  logits, ours = llm.prefill(prompt), []
  for j in range(32):
    ours.append(int(np.argmax(logits)))
    logits = llm.decode(ours[-1], len(prompt) + j)
  assert ours == hf_greedy(model, prompt, 32), arch
