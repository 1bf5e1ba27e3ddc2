"""The ai.onnx.ml domain's common ops (what skl2onnx emits for trees, linear models and scalers): TreeEnsembleClassifier/
Regressor, LinearClassifier/Regressor, Scaler, Normalizer. Class labels must be integers (string labels are refused).

Trees run as matrix products, all on the device and jittable: every branch condition of every tree is evaluated at once
(N, branches); a leaf is reached when all the conditions on its path hold, counted by two products with its path matrix;
leaf weights are then summed by a third."""
from __future__ import annotations
import numpy as np
from tinycore.dtype import dtypes
from tinycore.onnx.registry import op, UnsupportedOpError

ML = "ai.onnx.ml."

def _float_input(ctx, x):
  t = ctx.tensor(x)
  return t.cast(dtypes.float32) if t.dtype != dtypes.float64 else t

def _post_transform(scores, kind: str):
  if kind == "NONE": return scores
  if kind == "SOFTMAX": return scores.softmax(-1)
  if kind == "LOGISTIC": return scores.sigmoid()
  if kind == "SOFTMAX_ZERO":   # softmax over the non-zero scores; a zero score stays 0
    nz = scores != 0
    e = nz.where((scores - nz.where(scores, float("-inf")).max(-1, keepdim=True)).exp(), 0.0)
    return e / e.sum(-1, keepdim=True)
  raise UnsupportedOpError(f"post_transform {kind!r}")

def _labels(attrs, what: str) -> np.ndarray:
  if "classlabels_strings" in attrs: raise UnsupportedOpError(f"{what} with string class labels (tinycore has no string tensors)")
  return np.asarray(attrs.get("classlabels_ints", attrs.get("classlabels_int64s", [])), dtype=np.int64)

def _classify(ctx, raw, labels: np.ndarray, kind: str, binary_positive: bool | None):
  """(label, scores) from raw per-class scores; `binary_positive` set when one score column decides two labels."""
  if binary_positive is not None:   # one column s: the scores are [1 - s, s] (weights all positive) or [-s, s]
    s = raw
    pair = (1 - s).cat(s, dim=-1) if binary_positive else (-s).cat(s, dim=-1)
    scores = _post_transform(pair, kind) if kind != "NONE" else pair
    pick = (s.reshape(-1) > (0.5 if binary_positive else 0.0)).cast(dtypes.int32)
  else:
    scores = _post_transform(raw, kind)
    pick = raw.argmax(-1).cast(dtypes.int32)
  label = ctx.tensor(labels)[pick] if len(labels) else pick.cast(dtypes.int64)
  return label, scores

# ---- trees
_MODES = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"}

def _compile_trees(attrs, prefix: str):
  """Branch table (feature, value, mode, NaN goes true), path matrices (branches x leaves) and per-leaf weights."""
  tree, node = attrs["nodes_treeids"], attrs["nodes_nodeids"]
  modes = attrs["nodes_modes"]
  key = {(t, n): i for i, (t, n) in enumerate(zip(tree, node))}
  true_c, false_c = attrs.get("nodes_truenodeids", []), attrs.get("nodes_falsenodeids", [])
  missing = attrs.get("nodes_missing_value_tracks_true", [0] * len(tree))
  branches = [i for i, m in enumerate(modes) if m != "LEAF"]
  bad = sorted({m for m in modes if m != "LEAF" and m not in _MODES})
  if bad: raise UnsupportedOpError(f"tree node modes {bad}")
  bidx = {i: k for k, i in enumerate(branches)}
  leaves = [i for i, m in enumerate(modes) if m == "LEAF"]
  lidx = {i: k for k, i in enumerate(leaves)}
  p_true, p_false = np.zeros((len(branches), len(leaves)), np.float32), np.zeros((len(branches), len(leaves)), np.float32)
  children = {key[(tree[i], true_c[i])] for i in branches} | {key[(tree[i], false_c[i])] for i in branches}
  for root in (i for i in range(len(tree)) if i not in children):
    stack: list[tuple[int, list]] = [(root, [])]
    while stack:
      i, path = stack.pop()
      if len(path) > len(tree): raise ValueError("tree ensemble has a cycle")
      if modes[i] == "LEAF":
        for b, want in path: (p_true if want else p_false)[bidx[b], lidx[i]] = 1
        continue
      stack.append((key[(tree[i], true_c[i])], path + [(i, True)]))
      stack.append((key[(tree[i], false_c[i])], path + [(i, False)]))
  need = (p_true + p_false).sum(0)
  ids, weights = attrs[f"{prefix}_ids"], attrs[f"{prefix}_weights"]
  out_n = max(ids) + 1 if ids else 1
  w = np.zeros((len(leaves), out_n), np.float32)
  for t, n, c, v in zip(attrs[f"{prefix}_treeids"], attrs[f"{prefix}_nodeids"], ids, weights): w[lidx[key[(t, n)]], c] += v
  table = (np.array([attrs["nodes_featureids"][i] for i in branches], np.int64), np.array([attrs["nodes_values"][i] for i in branches], np.float32),
           [modes[i] for i in branches], np.array([bool(missing[i]) for i in branches]))
  return table, p_true, p_false, need, w, len(set(tree)), np.asarray(weights)

def _tree_scores(ctx, x, attrs, prefix: str):
  (feat, value, modes, nan_true), p_true, p_false, need, w, n_trees, weights = _compile_trees(attrs, prefix)
  xs = x[:, ctx.tensor(feat.astype(np.int32))]   # (N, branches): each branch's feature
  v = ctx.tensor(value).cast(x.dtype)
  cond = None
  for mode in sorted(set(modes)):
    sel = np.array([m == mode for m in modes])
    c = {"BRANCH_LEQ": xs <= v, "BRANCH_LT": xs < v, "BRANCH_GTE": xs >= v, "BRANCH_GT": xs > v, "BRANCH_EQ": xs == v, "BRANCH_NEQ": xs != v}[mode]
    cond = c if cond is None else ctx.tensor(sel).where(c, cond)
  cond = xs.isnan().where(ctx.tensor(nan_true), cond).cast(dtypes.float32)
  hits = cond @ ctx.tensor(p_true) + (1 - cond) @ ctx.tensor(p_false)
  reached = (hits == ctx.tensor(need)).cast(dtypes.float32)
  agg = attrs.get("aggregate_function", "SUM")
  if agg not in ("SUM", "AVERAGE"): raise UnsupportedOpError(f"tree ensemble aggregate_function {agg!r}")
  out = reached @ ctx.tensor(w)
  if agg == "AVERAGE": out = out / n_trees
  base = attrs.get("base_values")
  if base: out = out + ctx.tensor(np.asarray(base, np.float32))
  return out, weights

@op(ML + "TreeEnsembleRegressor")
def tree_regressor(ctx, ins, attrs):
  x = _float_input(ctx, ins[0])
  out, _ = _tree_scores(ctx, x, attrs, "target")
  n = attrs.get("n_targets", out.shape[-1])
  if out.shape[-1] < n: out = out.pad(((0, 0), (0, n - out.shape[-1])))
  return _post_transform(out, attrs.get("post_transform", "NONE")).cast(dtypes.float32)

@op(ML + "TreeEnsembleClassifier")
def tree_classifier(ctx, ins, attrs):
  x = _float_input(ctx, ins[0])
  labels = _labels(attrs, "TreeEnsembleClassifier")
  raw, weights = _tree_scores(ctx, x, attrs, "class")
  binary = None
  if len(labels) == 2 and len(set(attrs["class_ids"])) == 1:
    binary = bool((weights >= 0).all())
    raw = raw[:, -1:] if raw.shape[-1] > 1 else raw
  elif raw.shape[-1] < len(labels): raw = raw.pad(((0, 0), (0, len(labels) - raw.shape[-1])))
  label, scores = _classify(ctx, raw, labels, attrs.get("post_transform", "NONE"), binary)
  return label, scores.cast(dtypes.float32)

# ---- linear models and preprocessing
@op(ML + "LinearRegressor")
def linear_regressor(ctx, ins, attrs):
  x = _float_input(ctx, ins[0])
  n = attrs.get("targets", 1)
  coef = np.asarray(attrs["coefficients"], np.float32).reshape(n, -1)
  y = x @ ctx.tensor(coef.T.copy())
  if attrs.get("intercepts"): y = y + ctx.tensor(np.asarray(attrs["intercepts"], np.float32))
  if attrs.get("post_transform", "NONE") != "NONE": raise UnsupportedOpError(f"LinearRegressor post_transform {attrs['post_transform']!r}")
  return y.cast(dtypes.float32)

@op(ML + "LinearClassifier")
def linear_classifier(ctx, ins, attrs):
  x = _float_input(ctx, ins[0])
  labels = _labels(attrs, "LinearClassifier")
  coef = np.asarray(attrs["coefficients"], np.float32).reshape(-1, x.shape[-1])
  raw = x @ ctx.tensor(coef.T.copy())
  if attrs.get("intercepts"): raw = raw + ctx.tensor(np.asarray(attrs["intercepts"], np.float32))
  binary = False if coef.shape[0] == 1 and len(labels) == 2 else None   # one row of weights for two labels: [-s, s]
  label, scores = _classify(ctx, raw, labels, attrs.get("post_transform", "NONE"), binary)
  return label, scores.cast(dtypes.float32)

@op(ML + "Scaler")
def scaler(ctx, ins, attrs):
  x = _float_input(ctx, ins[0])
  offset, scale = np.asarray(attrs.get("offset", [0.0]), np.float32), np.asarray(attrs.get("scale", [1.0]), np.float32)
  return ((x - ctx.tensor(offset)) * ctx.tensor(scale)).cast(dtypes.float32)

@op(ML + "Normalizer")
def normalizer(ctx, ins, attrs):
  x = _float_input(ctx, ins[0])
  kind = attrs.get("norm", "MAX")
  if kind == "MAX": d = x.max(-1, keepdim=True)
  elif kind == "L1": d = x.abs().sum(-1, keepdim=True)
  elif kind == "L2": d = (x * x).sum(-1, keepdim=True).sqrt()
  else: raise UnsupportedOpError(f"Normalizer norm {kind!r}")
  return (d == 0).where(x, x / d).cast(dtypes.float32)
