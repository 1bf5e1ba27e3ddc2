"""NonMaxSuppression: greedy per (batch, class) box selection. Its output size depends on the data, so it runs on the
host over the realized boxes and scores (like NonZero) and returns a static int64 array of [batch, class, box] rows."""
from __future__ import annotations
import numpy as np
from tinycore.onnx.registry import op

def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
  """(N, 4) as [x_min, y_min, x_max, y_max]: from [y1, x1, y2, x2] in either corner order, or [x_c, y_c, w, h]."""
  b = boxes.astype(np.float64)
  if center_point_box:
    return np.stack([b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2, b[:, 0] + b[:, 2] / 2, b[:, 1] + b[:, 3] / 2], 1)
  return np.stack([np.minimum(b[:, 1], b[:, 3]), np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 1], b[:, 3]), np.maximum(b[:, 0], b[:, 2])], 1)

def _iou_over(c: np.ndarray, i: int, others: np.ndarray, threshold: float) -> np.ndarray:
  """Which boxes in `others` overlap box i by an IoU above threshold (an empty overlap or a degenerate box never does)."""
  w = np.minimum(c[i, 2], c[others, 2]) - np.maximum(c[i, 0], c[others, 0])
  h = np.minimum(c[i, 3], c[others, 3]) - np.maximum(c[i, 1], c[others, 1])
  inter = np.where((w > 0) & (h > 0), w * h, 0.0)
  area = (c[:, 2] - c[:, 0]) * (c[:, 3] - c[:, 1])
  union = area[i] + area[others] - inter
  ok = (inter > 0) & (area[i] > 0) & (area[others] > 0) & (union > 0)
  return ok & (inter / np.where(union > 0, union, 1.0) > threshold)

@op("NonMaxSuppression", since=10)
def non_max_suppression(ctx, ins, attrs):
  boxes, scores = ctx.array(ins[0]), ctx.array(ins[1])
  opt = lambda i: ins[i] if len(ins) > i and ins[i] is not None and ctx.array(ins[i]).size else None
  max_out = int(ctx.scalar(ins[2])) if opt(2) is not None else 0
  iou_t = float(ctx.scalar(ins[3])) if opt(3) is not None else 0.0
  score_t = float(ctx.scalar(ins[4])) if opt(4) is not None else None
  if boxes.ndim != 3 or boxes.shape[2] != 4: raise ValueError(f"NonMaxSuppression boxes must be (batch, boxes, 4), got {boxes.shape}")
  if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
    raise ValueError(f"NonMaxSuppression scores {scores.shape} don't match boxes {boxes.shape} (want (batch, classes, boxes))")
  rows = []
  for b in range(boxes.shape[0]):
    c = _corners(boxes[b], attrs.get("center_point_box", 0))
    for k in range(scores.shape[1]):
      s = scores[b, k].astype(np.float64)
      cand = np.arange(len(s)) if score_t is None else np.nonzero(s > score_t)[0]
      cand = cand[np.lexsort((cand, -s[cand]))]   # best score first, the lower index first among equal scores
      kept: list[int] = []
      for i in cand:
        if len(kept) >= max_out: break
        if kept and _iou_over(c, int(i), np.array(kept), iou_t).any(): continue
        kept.append(int(i))
      rows += [(b, k, i) for i in kept]
  return np.array(rows, dtype=np.int64).reshape(-1, 3)
