"""The benchmark workloads, written once per API family: the tinygrad-style Tensor API (tinycore and tinygrad share
the code), numpy and torch. Imports nothing but numpy at top level: this file also runs under tinygrad's own venv."""
from __future__ import annotations
import math
from dataclasses import dataclass, field
from typing import Callable
import numpy as np

@dataclass
class Workload:
  name: str
  desc: Callable[[bool], str]                   # quick -> human description with sizes
  inputs: Callable[[np.random.Generator, bool], list]   # numpy float32 inputs
  ref: Callable[[list], np.ndarray]             # float64 numpy reference (correctness)
  flops: Callable[[bool], float] = lambda q: 0.0
  nbytes: Callable[[bool], float] = lambda q: 0.0
  tensor: Callable | None = None                # (T, *Tensors) -> Tensor           T: the tinycore/tinygrad module
  np_fn: Callable | None = None                 # (*arrays) -> array
  torch_fn: Callable | None = None              # (torch, *tensors) -> tensor
  needs: tuple = ()                             # Tensor methods the tensor version needs (skipped, with the reason, without them)
  stateful: bool = False                        # a train step: built by *_step factories below instead
  jit: bool = True                              # tinycore/tinygrad: time TinyJit replays (False: eager realize per call)
  rtol: float = 1e-3
  extra: dict = field(default_factory=dict)

def _f32(rng, *shape, scale=1.0): return (rng.standard_normal(shape) * scale).astype(np.float32)

# ---- matmul
def _mm(n):
  return Workload(f"matmul_{n}", lambda q, n=n: f"matmul {n if not q else 64}^3 fp32",
                  lambda rng, q, n=n: [_f32(rng, n if not q else 64, n if not q else 64), _f32(rng, n if not q else 64, n if not q else 64)],
                  lambda xs: xs[0].astype(np.float64) @ xs[1].astype(np.float64),
                  flops=lambda q, n=n: 2 * (n if not q else 64) ** 3,
                  tensor=lambda T, a, b: a @ b, np_fn=lambda a, b: a @ b, torch_fn=lambda torch, a, b: a @ b)

# ---- fused elementwise + reduce: the fusion test (streams 3 arrays once)
_EW_N = lambda q: 4096 if q else 1 << 24
ew = Workload("fused_ew", lambda q: f"(a*b+c).relu().sum() over {_EW_N(q)} fp32",
              lambda rng, q: [_f32(rng, _EW_N(q)) for _ in range(3)],
              lambda xs: np.maximum(xs[0].astype(np.float64) * xs[1] + xs[2], 0).sum(),
              flops=lambda q: 4 * _EW_N(q), nbytes=lambda q: 3 * 4 * _EW_N(q),
              tensor=lambda T, a, b, c: (a * b + c).relu().sum(),
              np_fn=lambda a, b, c: np.maximum(a * b + c, 0).sum(),
              torch_fn=lambda torch, a, b, c: (a * b + c).relu().sum())

# ---- softmax over rows
_SM = lambda q: 64 if q else 4096
def _np_softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)
softmax = Workload("softmax", lambda q: f"softmax {_SM(q)}x{_SM(q)} fp32 (last axis)",
                   lambda rng, q: [_f32(rng, _SM(q), _SM(q))], lambda xs: _np_softmax(xs[0].astype(np.float64)),
                   flops=lambda q: 5 * _SM(q) ** 2, nbytes=lambda q: 2 * 4 * _SM(q) ** 2,
                   tensor=lambda T, x: x.softmax(-1), np_fn=_np_softmax, torch_fn=lambda torch, x: x.softmax(-1))

# ---- layernorm (no affine params from a library: the same arithmetic everywhere but torch's fused op)
_LN = lambda q: (64, 64) if q else (4096, 4096)
def _np_ln(x, g, b):
  m = x.mean(-1, keepdims=True); xc = x - m
  return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * g + b
def _t_ln(T, x, g, b):
  xc = x - x.mean(-1, keepdim=True)
  return xc * ((xc * xc).mean(-1, keepdim=True) + 1e-5).rsqrt() * g + b
layernorm = Workload("layernorm", lambda q: f"layernorm {_LN(q)[0]}x{_LN(q)[1]} fp32 (+gain, bias)",
                     lambda rng, q: [_f32(rng, *_LN(q)), _f32(rng, _LN(q)[1]), _f32(rng, _LN(q)[1])],
                     lambda xs: _np_ln(*[x.astype(np.float64) for x in xs]),
                     flops=lambda q: 8 * math.prod(_LN(q)), nbytes=lambda q: 2 * 4 * math.prod(_LN(q)),
                     tensor=_t_ln, np_fn=_np_ln,
                     torch_fn=lambda torch, x, g, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, 1e-5))

# ---- attention block: softmax(q k^T / sqrt(d)) v
_AT = lambda q: (1, 2, 16, 8) if q else (4, 8, 512, 64)   # batch, heads, seq, head dim
def _np_attn(q, k, v): return _np_softmax(q @ k.swapaxes(-1, -2) * (1 / math.sqrt(q.shape[-1]))) @ v
attention = Workload("attention", lambda q: "attention B,H,S,D=%d,%d,%d,%d fp32" % _AT(q),
                     lambda rng, q: [_f32(rng, *_AT(q)) for _ in range(3)],
                     lambda xs: _np_attn(*[x.astype(np.float64) for x in xs]),
                     flops=lambda q: 4 * math.prod(_AT(q)) * _AT(q)[2],
                     # the library call on both sides (torch's is its fused kernel; tinycore's fuses where the device can)
                     tensor=lambda T, q, k, v: q.scaled_dot_product_attention(k, v), needs=("scaled_dot_product_attention",),
                     np_fn=_np_attn, torch_fn=lambda torch, q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v))

# ---- LLM-style decode step at batch 1: a matrix-vector product, memory bound
_GV = lambda q: 64 if q else 4096
gemv = Workload("gemv_decode", lambda q: f"decode matvec 1x{_GV(q)} @ {_GV(q)}x{_GV(q)} fp32",
                lambda rng, q: [_f32(rng, 1, _GV(q)), _f32(rng, _GV(q), _GV(q), scale=0.02)],
                lambda xs: xs[0].astype(np.float64) @ xs[1].astype(np.float64),
                flops=lambda q: 2 * _GV(q) ** 2, nbytes=lambda q: 4 * _GV(q) ** 2,
                tensor=lambda T, x, w: x @ w, np_fn=lambda x, w: x @ w, torch_fn=lambda torch, x, w: x @ w)

# ---- conv2d NCHW, 3x3, pad 1
_CV = lambda q: (2, 4, 8, 8, 4) if q else (16, 64, 56, 56, 64)   # N, Cin, H, W, Cout
def _np_conv(x, w):
  from numpy.lib.stride_tricks import sliding_window_view
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  win = sliding_window_view(xp, (3, 3), axis=(2, 3))           # N, C, H, W, 3, 3
  return np.einsum("nchwij,ocij->nohw", win, w, optimize=True)   # im2col-style, BLAS underneath
conv2d = Workload("conv2d", lambda q: "conv2d %dx%dx%dx%d, %d 3x3 pad 1 fp32" % _CV(q),
                  lambda rng, q: [_f32(rng, *_CV(q)[:4]), _f32(rng, _CV(q)[4], _CV(q)[1], 3, 3, scale=0.1)],
                  lambda xs: _np_conv(*[x.astype(np.float64) for x in xs]),
                  flops=lambda q: 2 * math.prod(_CV(q)) * 9,
                  tensor=lambda T, x, w: x.conv2d(w, padding=1), np_fn=_np_conv,
                  torch_fn=lambda torch, x, w: torch.nn.functional.conv2d(x, w, padding=1), needs=("conv2d",))

# ---- JIT replay / dispatch overhead: tiny tensors, three ops
small = Workload("small_ops", lambda q: "overhead: ((a+1)*2).sum() on 16 floats, per call",
                 lambda rng, q: [_f32(rng, 16)], lambda xs: ((xs[0].astype(np.float64) + 1) * 2).sum(),
                 tensor=lambda T, a: ((a + 1) * 2).sum(), np_fn=lambda a: ((a + 1) * 2).sum(),
                 torch_fn=lambda torch, a: ((a + 1) * 2).sum())

# ---- the same without TinyJit: eager per-call overhead (graph building, the schedule cache, launch)
small_eager = Workload("small_ops_eager", lambda q: "overhead: ((a+1)*2).sum() on 16 floats, eager (no TinyJit)",
                       small.inputs, small.ref, tensor=small.tensor, np_fn=small.np_fn, torch_fn=small.torch_fn, jit=False)

# ---- MLP 784-512-512-10 train step: SGD on softmax cross-entropy, gradients by each framework's autograd
_MLP = lambda q: (8, (784, 64, 64, 10)) if q else (256, (784, 512, 512, 10))
def _mlp_params(rng, q):
  _, d = _MLP(q)
  ps = []
  for i in range(3): ps += [_f32(rng, d[i], d[i + 1], scale=math.sqrt(2 / d[i])), np.zeros(d[i + 1], np.float32)]
  return ps
def _mlp_inputs(rng, q):
  bs, d = _MLP(q)
  y = rng.integers(0, 10, bs)
  return [_f32(rng, bs, d[0]), np.eye(10, dtype=np.float32)[y]] + _mlp_params(rng, q)
def _np_mlp_loss(xs):
  x, oh, w1, b1, w2, b2, w3, b3 = [a.astype(np.float64) for a in xs]
  h = np.maximum(np.maximum(x @ w1 + b1, 0) @ w2 + b2, 0) @ w3 + b3
  ls = h - h.max(1, keepdims=True); ls = ls - np.log(np.exp(ls).sum(1, keepdims=True))
  return -(ls * oh).sum(1).mean()
LR = 0.01
def mlp_tensor_step(T, params):
  def step(x, oh):
    w1, b1, w2, b2, w3, b3 = params
    h = (x @ w1 + b1).relu()
    h = (h @ w2 + b2).relu()
    loss = -((h @ w3 + b3).log_softmax(-1) * oh).sum(1).mean()
    # gradient() of just the params: tinygrad 0.14 has no requires_grad and its backward() also differentiates x
    for p, g in zip(params, loss.gradient(*params)): p.assign(p - g * LR)
    T.Tensor.realize(loss, *params)
    return loss
  return step
def mlp_np_step(params):
  def step(x, oh):
    w1, b1, w2, b2, w3, b3 = params
    z1 = x @ w1 + b1; h1 = np.maximum(z1, 0)
    z2 = h1 @ w2 + b2; h2 = np.maximum(z2, 0)
    z3 = h2 @ w3 + b3
    e = np.exp(z3 - z3.max(1, keepdims=True)); p = e / e.sum(1, keepdims=True)
    loss = -(np.log(p) * oh).sum(1).mean()
    g3 = (p - oh) / x.shape[0]
    g2 = (g3 @ w3.T) * (z2 > 0); g1 = (g2 @ w2.T) * (z1 > 0)
    for prm, g in ((w3, h2.T @ g3), (b3, g3.sum(0)), (w2, h1.T @ g2), (b2, g2.sum(0)), (w1, x.T @ g1), (b1, g1.sum(0))): prm -= LR * g
    return loss
  return step
def mlp_torch_step(torch, params):
  F = torch.nn.functional
  def step(x, oh):
    for p in params: p.grad = None
    w1, b1, w2, b2, w3, b3 = params
    h = F.relu(F.relu(x @ w1 + b1) @ w2 + b2)
    loss = -(F.log_softmax(h @ w3 + b3, -1) * oh).sum(1).mean()
    loss.backward()
    with torch.no_grad():
      for p in params: p -= LR * p.grad
    return loss
  return step
mlp = Workload("mlp_train", lambda q: "MLP %s train step (SGD), batch %d" % ("-".join(map(str, _MLP(q)[1])), _MLP(q)[0]),
               _mlp_inputs, _np_mlp_loss, flops=lambda q: 6 * _MLP(q)[0] * sum(a * b for a, b in zip(_MLP(q)[1], _MLP(q)[1][1:])),
               needs=("gradient", "log_softmax", "assign"), stateful=True, rtol=1e-3)

WORKLOADS: list[Workload] = [_mm(1024), _mm(2048), ew, softmax, conv2d, mlp, layernorm, attention, gemv, small, small_eager]
BY_NAME = {w.name: w for w in WORKLOADS}
