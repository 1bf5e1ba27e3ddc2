"""Resize (and the old Upsample): each resized axis becomes a small interpolation matrix built on the host from the
ONNX coordinate rules (nearest with its rounding modes, linear, cubic; every coordinate_transformation_mode), applied
with one matmul per axis. Neighbours past the edge repeat the edge value, as the ONNX reference does."""
from __future__ import annotations
import math
import numpy as np
from tinycore.dtype import dtypes
from tinycore.onnx.registry import op, UnsupportedOpError

def _source_coord(x: np.ndarray, mode: str, scale: float, n_in: int, n_out: float, roi: tuple[float, float]) -> np.ndarray:
  if mode == "half_pixel": return (x + 0.5) / scale - 0.5
  if mode == "half_pixel_symmetric":
    adj = n_out / (scale * n_in)
    return n_in / 2 * (1 - adj) + (x + 0.5) / scale - 0.5
  if mode == "pytorch_half_pixel": return (x + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(x)
  # n_out is in*scale, unrounded, when scales were given (the ONNX reference divides by that length)
  if mode == "align_corners": return x * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(x)
  if mode == "asymmetric": return x / scale
  if mode == "tf_crop_and_resize":
    s, e = roi
    if n_out > 1: return s * (n_in - 1) + x * (e - s) * (n_in - 1) / (n_out - 1)
    return np.full_like(x, 0.5 * (s + e) * (n_in - 1))
  raise UnsupportedOpError(f"Resize coordinate_transformation_mode {mode!r}")

def _round(c: np.ndarray, nearest_mode: str) -> np.ndarray:
  if nearest_mode == "round_prefer_floor": return np.ceil(c - 0.5)
  if nearest_mode == "round_prefer_ceil": return np.floor(c + 0.5)
  if nearest_mode == "floor": return np.floor(c)
  if nearest_mode == "ceil": return np.ceil(c)
  raise UnsupportedOpError(f"Resize nearest_mode {nearest_mode!r}")

def _cubic(t: np.ndarray, a: float) -> np.ndarray:
  # Keys' cubic convolution kernel at distances t (|t| < 2)
  t = np.abs(t)
  return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1, np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))

def interpolation_matrix(n_in: int, n_out: int, scale: float, attrs: dict, roi: tuple[float, float],
                         n_out_exact: float | None = None) -> tuple[np.ndarray, np.ndarray]:
  """(out, in) weights and a per-output mask of positions outside the input (tf_crop_and_resize's extrapolation)."""
  x = np.arange(n_out, dtype=np.float64)
  coord_mode = attrs.get("coordinate_transformation_mode", "half_pixel")
  exact = n_out_exact if n_out_exact is not None and coord_mode == "align_corners" else n_out
  c = _source_coord(x, coord_mode, scale, n_in, exact, roi)
  outside = ((c < 0) | (c > n_in - 1)) if coord_mode == "tf_crop_and_resize" else np.zeros(n_out, bool)
  w = np.zeros((n_out, n_in), np.float64)
  mode, rows = attrs.get("mode", "nearest"), np.arange(n_out)
  if mode == "nearest":
    w[rows, np.clip(_round(c, attrs.get("nearest_mode", "round_prefer_floor")), 0, n_in - 1).astype(np.int64)] = 1.0
  elif mode in ("linear", "cubic"):
    base = np.floor(c)
    taps = [0, 1] if mode == "linear" else [-1, 0, 1, 2]
    frac = c - base
    for t in taps:
      k = (1 - np.abs(frac - t)) if mode == "linear" else _cubic(frac - t, attrs.get("cubic_coeff_a", -0.75))
      idx = base + t
      if attrs.get("exclude_outside", 0): k = np.where((idx < 0) | (idx > n_in - 1), 0.0, k)
      np.add.at(w, (rows, np.clip(idx, 0, n_in - 1).astype(np.int64)), k)
    if attrs.get("exclude_outside", 0): w = w / np.maximum(w.sum(1, keepdims=True), 1e-12)
  else: raise UnsupportedOpError(f"Resize mode {mode!r}")
  w[outside] = 0.0
  return w, outside

def _resize(ctx, x, scales, sizes, roi, attrs):
  if attrs.get("antialias", 0): raise UnsupportedOpError("Resize with antialias=1")
  nd = x.ndim
  axes = [a % nd for a in attrs.get("axes", list(range(nd)))]
  in_sh = [x.shape[a] for a in axes]
  if sizes is not None:
    out_sh = list(sizes)
    sc = [o / i for o, i in zip(out_sh, in_sh)]
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
      s = min(sc) if policy == "not_larger" else max(sc)
      sc = [s] * len(sc)
      out_sh = [int(math.floor(i * s + 0.5)) for i in in_sh]
  else:
    sc = list(scales)
    out_sh = [int(math.floor(i * s)) for i, s in zip(in_sh, sc)]
  roi_pairs = [(0.0, 1.0)] * len(axes)
  if roi is not None and len(roi) == 2 * len(axes): roi_pairs = [(roi[j], roi[j + len(axes)]) for j in range(len(axes))]
  elif roi is not None and len(roi) == 2 * nd: roi_pairs = [(roi[a], roi[a + nd]) for a in axes]
  out_dt = x.dtype
  y = x.cast(dtypes.float32) if out_dt != dtypes.float64 else x
  extrap = attrs.get("extrapolation_value", 0.0)
  for a, n_in, n_out, s, r in zip(axes, in_sh, out_sh, sc, roi_pairs):
    if n_in == n_out and s == 1.0 and attrs.get("coordinate_transformation_mode") != "tf_crop_and_resize": continue
    w, outside = interpolation_matrix(n_in, n_out, s, attrs, r, None if sizes is not None else n_in * s)
    wt = ctx.tensor(np.require(w.T.astype(np.float32 if y.dtype == dtypes.float32 else np.float64), requirements="C"))
    y = (y.transpose(a, -1) @ wt).transpose(a, -1)
    if outside.any():
      m = ctx.tensor(outside).reshape(*[n_out if d == a else 1 for d in range(nd)])
      y = m.where(extrap, y)
  if dtypes.is_int(out_dt) and not dtypes.is_float(out_dt): y = y.round()
  return y.cast(out_dt)

@op("Resize", since=10)
def resize(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  if ctx.opset < 11: return _resize(ctx, x, ctx.floats(ins[1]), None, None, {**attrs, "coordinate_transformation_mode": "asymmetric",
                                                                         "nearest_mode": "floor"})
  roi = ctx.floats(ins[1]) if len(ins) > 1 and ins[1] is not None and ctx.array(ins[1]).size else None
  scales = ctx.floats(ins[2]) if len(ins) > 2 and ins[2] is not None and ctx.array(ins[2]).size else None
  sizes = ctx.ints(ins[3]) if len(ins) > 3 and ins[3] is not None else None
  return _resize(ctx, x, scales, sizes, roi, attrs)

@op("Upsample")
def upsample(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  scales = attrs["scales"] if "scales" in attrs else ctx.floats(ins[1])
  return _resize(ctx, x, scales, None, None, {"mode": attrs.get("mode", "nearest"), "coordinate_transformation_mode": "asymmetric",
                                              "nearest_mode": "floor"})
