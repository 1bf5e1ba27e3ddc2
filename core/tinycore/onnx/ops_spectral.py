"""DFT and STFT as matrix products with cos/sin tables built on the host (the transform length is static), so they run
on any device as two matmuls per component. Signals carry a last dim of 1 (real) or 2 (real, imaginary)."""
from __future__ import annotations
import numpy as np
from tinycore.onnx.registry import op

def _tables(n: int, k: int, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
  """cos and (signed) sin of 2*pi*m*j/n for input m < n and output j < k; the inverse also scales by 1/n."""
  ang = 2 * np.pi * np.outer(np.arange(n), np.arange(k)) / n
  scale = 1.0 / n if inverse else 1.0
  return (np.cos(ang) * scale).astype(np.float32), (np.sin(ang) * (1 if inverse else -1) * scale).astype(np.float32)

def _dft_last(ctx, re, im, n: int, inverse: bool, onesided: bool):
  """The DFT of the last axis of re (+ i im), already of length n."""
  k = n // 2 + 1 if onesided else n
  c, s = _tables(n, k, inverse)
  ct, st = ctx.tensor(c).cast(re.dtype), ctx.tensor(s).cast(re.dtype)
  out_re, out_im = re @ ct, re @ st
  if im is not None: out_re, out_im = out_re - im @ st, out_im + im @ ct
  return out_re, out_im

def _irfft_last(ctx, re, im, n: int):
  """The real inverse DFT of a half spectrum (n//2 + 1 entries on the last axis): each entry but DC (and Nyquist for an
  even n) stands for itself and its conjugate mirror, so it counts twice."""
  k = n // 2 + 1
  weight = np.full(k, 2.0); weight[0] = 1.0
  if n % 2 == 0: weight[-1] = 1.0
  ang = 2 * np.pi * np.outer(np.arange(k), np.arange(n)) / n
  c = ctx.tensor((np.cos(ang) * weight[:, None] / n).astype(np.float32)).cast(re.dtype)
  out = re @ c
  if im is not None: out = out - im @ ctx.tensor((np.sin(ang) * weight[:, None] / n).astype(np.float32)).cast(re.dtype)
  return out

def _fit(x, axis: int, n: int):
  """x cut or zero-padded to n along axis."""
  have = x.shape[axis]
  if have > n: return x.shrink(tuple((0, n) if a == axis else (0, s) for a, s in enumerate(x.shape)))
  if have < n: return x.pad(tuple((0, n - have) if a == axis else (0, 0) for a in range(x.ndim)))
  return x

@op("DFT", since=17)
def dft(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  if x.shape[-1] not in (1, 2): raise ValueError(f"DFT input's last dim must be 1 (real) or 2 (complex), got shape {x.shape}")
  if ctx.opset >= 20: axis = int(ctx.scalar(ins[2])) if len(ins) > 2 and ins[2] is not None else -2
  else: axis = attrs.get("axis", 1)
  axis %= x.ndim
  if axis == x.ndim - 1: raise ValueError("DFT axis can't be the last (real/imaginary) dim")
  inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
  given = len(ins) > 1 and ins[1] is not None and np.asarray(ctx.array(ins[1])).size
  re = x[..., 0]
  im = x[..., 1] if x.shape[-1] == 2 else None
  perm = [a for a in range(re.ndim) if a != axis] + [axis]
  back = [int(a) for a in np.argsort(perm)]
  if inverse and onesided:   # a half spectrum back to a real signal
    n = int(ctx.scalar(ins[1])) if given else 2 * (x.shape[axis] - 1)
    if n < 1: raise ValueError(f"DFT length must be positive, got {n}")
    k = n // 2 + 1
    re = _fit(re, axis, k).permute(perm)
    im = _fit(im, axis, k).permute(perm) if im is not None else None
    return _irfft_last(ctx, re, im, n).permute(back).unsqueeze(-1)
  n = int(ctx.scalar(ins[1])) if given else x.shape[axis]
  if n < 1: raise ValueError(f"DFT length must be positive, got {n}")
  re = _fit(re, axis, n).permute(perm)
  im = _fit(im, axis, n).permute(perm) if im is not None else None
  out_re, out_im = _dft_last(ctx, re, im, n, inverse, onesided)
  return out_re.permute(back).unsqueeze(-1).cat(out_im.permute(back).unsqueeze(-1), dim=-1)

@op("STFT", since=17)
def stft(ctx, ins, attrs):
  x = ctx.tensor(ins[0])   # (batch, length, 1 or 2)
  step = int(ctx.scalar(ins[1]))
  window = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
  length = int(ctx.scalar(ins[3])) if len(ins) > 3 and ins[3] is not None else (window.shape[0] if window is not None else None)
  if length is None: raise ValueError("STFT needs a window or a frame_length")
  if step < 1 or length < 1 or length > x.shape[1]:
    raise ValueError(f"STFT frame_step {step} / frame_length {length} don't fit a signal of {x.shape[1]}")
  onesided = bool(attrs.get("onesided", 1))
  frames = 1 + (x.shape[1] - length) // step
  pieces = [x.shrink(((0, x.shape[0]), (f * step, f * step + length), (0, x.shape[2]))).unsqueeze(1) for f in range(frames)]
  fr = pieces[0].cat(*pieces[1:], dim=1) if frames > 1 else pieces[0]   # (batch, frames, length, c)
  re = fr[..., 0]
  im = fr[..., 1] if x.shape[2] == 2 else None
  if window is not None:
    w = window.cast(re.dtype)
    re, im = re * w, (im * w if im is not None else None)
  out_re, out_im = _dft_last(ctx, re, im, length, False, onesided)
  return out_re.unsqueeze(-1).cat(out_im.unsqueeze(-1), dim=-1)
