"""Random numbers: a counter-based RNG (threefry2x32) built only from uint32 elementwise ops, so every device draws the same stream.

Each call takes a fresh key (seed, call counter), passed in a two-word buffer, so the random bits are a pure function of
(seed, call number, element index), fuse into whatever consumes them, and repeated calls hit the same compiled kernel.
The counter lives here, in Python; a TinyJit that captured draws refills their key buffers from it before every
replay (`refill_keys`), so a replayed step draws exactly the numbers the same step would draw without the JIT."""
from __future__ import annotations
import math, operator, time
from tinycore.dtype import dtypes, to_dtype
from tinycore.helpers import prod, getenv
from tinycore.tensor_base import TensorBase, tensor_type
from tinycore.tensor_shapes import shape_arg

_M32 = 0xFFFFFFFF
_rng: dict = {"seed": None, "counter": 0}   # seed None: taken from SEED (else the clock) at the first draw
key_observers: list = []   # TinyJit capture: called with the Buffer of every key a draw creates, in draw order

def _next_key() -> list[int]:
  """(seed, counter) for the next draw; advancing the counter is what makes two draws differ."""
  if _rng["seed"] is None: _rng["seed"] = getenv("SEED", int(time.time())) & _M32
  _rng["counter"] += 1
  return [_rng["seed"], _rng["counter"] & _M32]

def refill_keys(bufs: list) -> None:
  """Give each key buffer of a captured step the key its draw would take now, in capture order (TinyJit replay)."""
  import numpy as np
  for b in bufs: b.copyin(memoryview(np.array(_next_key(), dtype=np.uint32)).cast("B"))

def _rotl(x, r: int): return (x << r) | (x >> (32 - r))

def threefry2x32(x0, x1, k0, k1):
  """Threefry-2x32 with 20 rounds (Salmon et al. 2011) on uint32 tensors x0, x1 with key words k0, k1 (python ints or
  uint32 tensors that broadcast); returns two uint32 tensors."""
  ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
  rot = ((13, 15, 26, 6), (17, 29, 16, 24))
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for i in range(5):
    for r in rot[i % 2]:
      x0 = x0 + x1
      x1 = _rotl(x1, r) ^ x0
    x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + (i + 1)
  return x0, x1

class RandomMixin(TensorBase):
  __slots__ = ()

  @staticmethod
  def manual_seed(seed: int = 0):
    """Reset the generator: the same seed gives the same numbers, on every device."""
    try: seed = operator.index(seed)   # ints and numpy ints; a float seed would silently truncate
    except TypeError: raise TypeError(f"manual_seed needs an int seed, got {type(seed).__name__}") from None
    _rng["seed"], _rng["counter"] = seed & _M32, 0

  @staticmethod
  def _threefry_bits(n: int, device=None):
    """n uint32 random words for the next call of the stream."""
    Tensor = tensor_type()
    from tinycore.uop import Ops
    half = (n + 1) // 2
    ctr = Tensor._index_range(half, device).cast(dtypes.uint32)
    # the key lives in a tiny buffer, not in the graph as constants: every call reuses the same compiled kernel
    key = Tensor(_next_key(), dtype=dtypes.uint32, device=device)
    if key_observers:
      for buf in [u.arg for u in key.uop.toposort() if u.op is Ops.BUFFER]:
        for obs in key_observers: obs(buf)
    a, b = threefry2x32(ctr, ctr.zeros_like(), key[0], key[1])
    return a.cat(b).shrink(((0, n),))

  def threefry(self, seed):
    """Threefry-2x32 of each uint64 element (low word first) keyed by a uint64 `seed` (int or one-element tensor), as tinygrad's."""
    if self.dtype != dtypes.uint64: raise TypeError(f"threefry works on uint64 tensors, got {self.dtype}")
    if isinstance(seed, int): k0, k1 = seed & _M32, (seed >> 32) & _M32
    else:
      seed = seed.cast(dtypes.uint64).reshape(())
      k0, k1 = (seed & _M32).cast(dtypes.uint32), (seed >> 32).cast(dtypes.uint32)
    lo, hi = threefry2x32((self & _M32).cast(dtypes.uint32), (self >> 32).cast(dtypes.uint32), k0, k1)
    return (hi.cast(dtypes.uint64) << 32) | lo.cast(dtypes.uint64)

  @staticmethod
  def rand(*shape, device=None, dtype=None, contiguous=False, **kw):
    """Uniform in [0, 1): 23 random mantissa bits under exponent 0 give a float in [1, 2), minus 1."""
    Tensor = tensor_type()
    shape, dt = shape_arg(shape), to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt): raise TypeError(f"rand needs a float dtype, got {dt}")
    n = prod(shape)
    if n == 0: return Tensor.zeros(*shape, device=device, dtype=dt, **kw)
    bits = Tensor._threefry_bits(n, device)
    f = ((bits >> 9) | 0x3F800000).bitcast(dtypes.float32) - 1.0
    if dt != dtypes.float32: f = f.cast(dt)
    if dt.itemsize < 4: f = (f >= 1.0).where(0.0, f)   # rounding to a narrow float can hit 1.0
    out = Tensor(f.reshape(shape).uop, requires_grad=kw.get("requires_grad"))
    return out.contiguous() if contiguous else out
  def rand_like(self, **kw):
    return type(self).rand(*self.shape, **{"device": self.device, "dtype": self.dtype if dtypes.is_float(self.dtype) else None, **kw})

  @staticmethod
  def randn(*shape, dtype=None, requires_grad=None, **kw):
    """Standard normal by Box-Muller from two uniform draws."""
    Tensor = tensor_type()
    shape = shape_arg(shape)
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    u = Tensor.rand(2, *shape, dtype=dtypes.float32, **kw)
    u1, u2 = u[0], u[1]
    z = ((1.0 - u1).log() * -2.0).sqrt() * (u2 * (2 * math.pi)).cos()
    return Tensor(z.cast(dt).uop, requires_grad=requires_grad)
  def randn_like(self, **kw):
    return type(self).randn(*self.shape, **{"device": self.device, "dtype": self.dtype if dtypes.is_float(self.dtype) else None, **kw})

  @staticmethod
  def randint(*shape, low=0, high=10, dtype=dtypes.int32, **kw):
    Tensor = tensor_type()
    if not isinstance(low, int) or not isinstance(high, int): raise TypeError(f"randint bounds must be ints, got {low!r} and {high!r}")
    if low >= high: raise ValueError(f"randint needs low < high, got low={low} high={high}")
    dt = to_dtype(dtype)
    if not dtypes.is_int(dt): raise TypeError(f"randint needs an integer dtype, got {dt}")
    u = Tensor.rand(*shape_arg(shape), dtype=dtypes.float64 if high - low > 1 << 23 else dtypes.float32, **kw)
    return (u * (high - low)).floor().cast(dt).minimum(high - low - 1) + low

  @staticmethod
  def normal(*shape, mean=0.0, std=1.0, requires_grad=None, **kw):
    Tensor = tensor_type()
    return Tensor(((std * Tensor.randn(*shape, **kw)) + mean).uop, requires_grad=requires_grad)
  @staticmethod
  def uniform(*shape, low=0.0, high=1.0, dtype=None, requires_grad=None, **kw):
    Tensor = tensor_type()
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return Tensor(((high - low) * Tensor.rand(*shape, dtype=dt, **kw) + low).cast(dt).uop, requires_grad=requires_grad)
  @staticmethod
  def scaled_uniform(*shape, **kw):
    Tensor = tensor_type()
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kw).mul(prod(shape_arg(shape)) ** -0.5)
  @staticmethod
  def glorot_uniform(*shape, **kw):
    """Xavier uniform: bound sqrt(6 / (fan_in + fan_out)) with fan_out = shape[0], fan_in = prod(shape[1:])."""
    Tensor = tensor_type()
    s = shape_arg(shape)
    return Tensor.uniform(*s, low=-1.0, high=1.0, **kw).mul((6 / (s[0] + prod(s[1:]))) ** 0.5)
  @staticmethod
  def kaiming_uniform(*shape, a: float = 0.01, **kw):
    Tensor = tensor_type()
    s = shape_arg(shape)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(s[1:]))
    return Tensor.uniform(*s, low=-bound, high=bound, **kw)
  @staticmethod
  def kaiming_normal(*shape, a: float = 0.01, **kw):
    Tensor = tensor_type()
    s = shape_arg(shape)
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(prod(s[1:]))
    return Tensor.normal(*s, mean=0.0, std=std, **kw)

  @staticmethod
  def randperm(n: int, device=None, dtype=dtypes.int32, **kw):
    Tensor = tensor_type()
    if n < 0: raise ValueError(f"randperm needs n >= 0, got {n}")
    return Tensor.rand(n, device=device).argsort().cast(to_dtype(dtype))

  def multinomial(self, num_samples: int = 1, replacement: bool = False):
    """Draw class indices from (unnormalized) probabilities in the last dim: inverse CDF with replacement, Gumbel top-k without."""
    Tensor = tensor_type()
    if self.ndim not in (1, 2): raise ValueError(f"multinomial needs 1-d or 2-d probabilities, got shape {self.shape}")
    if num_samples < 1: raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if not replacement and num_samples > self.shape[-1]:
      raise ValueError(f"can't draw {num_samples} samples without replacement from {self.shape[-1]} classes")
    x = self.unsqueeze(0) if self.ndim == 1 else self
    p = x._float()
    _check_probabilities(p, num_samples, replacement)
    if replacement or num_samples == 1:
      cdf = p.cumsum(1)
      cdf = cdf / cdf[:, -1:]
      u = Tensor.rand(x.shape[0], num_samples, 1, device=self.device)
      out = (cdf.unsqueeze(1) <= u).sum(2).minimum(x.shape[-1] - 1).cast(dtypes.int32)
    else:
      g = -(-(Tensor.rand(*x.shape, device=self.device).clamp(1e-12, 1.0)).log()).log()   # Gumbel noise
      out = ((p.log() + g)).topk(num_samples, dim=-1)[1].cast(dtypes.int32)
    return out.squeeze(0) if self.ndim == 1 else out

  def dropout(self, p: float = 0.5):
    """Zero each element with probability p and scale the rest by 1/(1-p), only while Tensor.training."""
    Tensor = tensor_type()
    if not 0 <= p <= 1: raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not Tensor.training or p == 0: return self
    if p == 1: return self * 0
    keep = Tensor.rand(*self.shape, device=self.device) >= p
    return keep.where(self, 0) * (1 / (1 - p))

def _check_probabilities(p, num_samples: int, replacement: bool) -> None:
  """Reject what torch rejects, before sampling: negative, NaN or infinite weights, a row summing to zero, or (without
  replacement) fewer nonzero weights than samples. The inverse CDF would otherwise return plausible indices from
  garbage. One small reduction is realized for this (it costs a sync, as in torch)."""
  bad = ((p < 0) | (p != p) | (p.abs() == math.inf)).any()
  empty = (p.sum(1) <= 0).any()
  short = (p > 0).sum(1).min() < num_samples if not replacement else empty
  bad_v, empty_v, short_v = (bool(v) for v in bad.cast(dtypes.int32).stack(empty.cast(dtypes.int32), short.cast(dtypes.int32)).numpy())
  if bad_v: raise ValueError("multinomial: probabilities contain a negative, NaN or infinite value")
  if empty_v: raise ValueError("multinomial: a row of probabilities sums to 0 (or less): nothing to sample")
  if short_v: raise ValueError(f"multinomial: can't draw {num_samples} samples without replacement: a row has fewer nonzero probabilities")
