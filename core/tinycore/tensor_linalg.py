"""Linear algebra built from Tensor ops: Householder QR and a one-sided Jacobi SVD, both batched over leading dims."""
from __future__ import annotations
import math
from tinycore.dtype import dtypes

def _linalg_input(t, name: str):
  """(tensor in its compute dtype, output dtype): ints and bools become the default float, as in tinygrad."""
  if t.ndim < 2: raise ValueError(f"{name} needs a matrix or a batch of matrices (2 or more dims), got shape {t.shape}")
  if not all(isinstance(s, int) for s in t.shape): raise ValueError(f"{name} needs a concrete shape, got {t.shape}")
  out = t.dtype if dtypes.is_float(t.dtype) else dtypes.default_float
  # half-precision inputs are factored in float32: reflections and rotations in fp16 lose orthogonality fast
  return t.cast(out if out.itemsize >= 4 else dtypes.float32), out

def _round_robin(n: int) -> list[list[int]]:
  """n-1 orderings of 0..n-1 (n even) whose adjacent pairs (0,1), (2,3), ... meet every pair of indices exactly once."""
  rest, out = list(range(1, n)), []
  for _ in range(n - 1):
    ring = [0] + rest
    out.append([v for i in range(n // 2) for v in (ring[i], ring[n - 1 - i])])
    rest = rest[-1:] + rest[:-1]
  return out

class LinalgMixin:
  __slots__ = ()

  def qr(self):
    """Householder QR of the last two dims: (..., m, n) -> Q (..., m, m) orthogonal, R (..., m, n) upper triangular."""
    from tinycore.tensor import Tensor
    a, out = _linalg_input(self, "qr")
    *b, m, n = a.shape
    R, Q = a, Tensor.eye(m, dtype=a.dtype, device=a.device).reshape(*[1] * len(b), m, m).expand(*b, m, m)
    for k in range(min(m, n)):
      x = R[..., k:, k]
      nrm = x.square().sum(-1, keepdim=True).sqrt()
      # reflect x onto -sign(x0)*|x| e1: v0 = x0 + sign(x0)|x| never cancels
      v = (x[..., :1] + (x[..., :1] >= 0).where(nrm, -nrm)).cat(x[..., 1:], dim=-1)
      vv = v.square().sum(-1, keepdim=True)
      w = (v * (vv == 0).where(0.0, 2.0 / (vv == 0).where(1.0, vv))).pad(((0, 0),) * len(b) + ((k, 0),))   # 2v/v.v, 0 for a zero column
      v = v.pad(((0, 0),) * len(b) + ((k, 0),))
      R = (R - w.unsqueeze(-1) * (v.unsqueeze(-2) @ R)).contiguous()
      Q = (Q - (Q @ v.unsqueeze(-1)) * w.unsqueeze(-2)).contiguous()
    return Q.cast(out), R.triu().cast(out)

  def svd(self, full_matrices: bool = True):
    """SVD of the last two dims: (..., m, n) -> U, S, Vh with A = U @ diag(S) @ Vh and S descending (tinygrad's third
    result is Vh, not V). U is (..., m, m) and Vh (..., n, n) with full_matrices, else (..., m, k) and (..., k, n), k = min(m, n)."""
    from tinycore.tensor import Tensor
    a, out = _linalg_input(self, "svd")
    *b, m, n = a.shape
    if m < n:   # A^T = U S Vh  =>  A = Vh^T S U^T
      U, S, Vh = a.transpose(-1, -2).svd(full_matrices)
      return Vh.transpose(-1, -2).cast(out), S.cast(out), U.transpose(-1, -2).cast(out)
    # one-sided Jacobi (Hestenes): rotate column pairs of A until all are orthogonal; V collects the rotations.
    # Disjoint pairs rotate together; a round-robin column permutation brings every pair together once per sweep.
    ne, nb = n + n % 2, len(b)
    U = a.pad(((0, 0),) * nb + ((0, 0), (0, ne - n)))   # an odd n gets a zero column: it never rotates (its gamma is 0)
    V = Tensor.eye(ne, dtype=a.dtype, device=a.device).reshape(*[1] * nb, ne, ne).expand(*b, ne, ne)
    orders = _round_robin(ne)
    perms = []
    for i in range(ne - 1):   # column moves from ordering i to ordering i+1 (the last one returns to the start)
      cur, nxt = orders[i], orders[(i + 1) % (ne - 1)]
      pos = {c: j for j, c in enumerate(cur)}
      perms.append(Tensor([[1.0 if pos[nxt[j]] == r else 0.0 for j in range(ne)] for r in range(ne)], dtype=a.dtype, device=a.device))
    start = Tensor([[1.0 if orders[0][j] == r else 0.0 for j in range(ne)] for r in range(ne)], dtype=a.dtype, device=a.device)
    U, V = U @ start, V @ start
    for _ in range(max(10, 2 * math.ceil(math.log2(ne)) + 4) if ne > 2 else 2):
      for p in perms:
        x, y = U.reshape(*b, m, ne // 2, 2)[..., 0], U.reshape(*b, m, ne // 2, 2)[..., 1]
        al, be, ga = x.square().sum(-2), y.square().sum(-2), (x * y).sum(-2)
        z = (be - al) / (2 * (ga == 0).where(1.0, ga))
        t = (ga == 0).where(0.0, (z >= 0).where(1.0, -1.0) / (z.abs() + (1 + z * z).sqrt()))
        c = (1 + t * t).rsqrt(); s = c * t
        def rot(M):
          p0, p1 = M.reshape(*M.shape[:-1], ne // 2, 2)[..., 0], M.reshape(*M.shape[:-1], ne // 2, 2)[..., 1]
          c_, s_ = c.unsqueeze(-2), s.unsqueeze(-2)
          return (c_ * p0 - s_ * p1).stack(s_ * p0 + c_ * p1, dim=-1).reshape(M.shape)
        U, V = (rot(U) @ p).contiguous(), (rot(V) @ p).contiguous()
      U, V = U.realize(), V.realize()   # one sweep's graph at a time
    # undo the start ordering, drop the pad column, sort by column norm
    U, V = (U @ start.T)[..., :n], (V @ start.T)[..., :n, :n]
    S = U.square().sum(-2).sqrt()
    idx = S.argsort(-1, descending=True)
    P = (idx.unsqueeze(-2) == Tensor.arange(n, device=a.device).reshape(n, 1)).cast(a.dtype)   # P[i, j] = idx[j] == i
    S, U, V = (S.unsqueeze(-2) @ P).squeeze(-2), U @ P, V @ P
    # normalized columns, re-orthogonalized and completed to m columns by a QR: also gives orthonormal columns for S = 0
    Q, R = (U / (S == 0).where(1.0, S).unsqueeze(-2)).qr()
    diag = (R[..., :n, :] * Tensor.eye(n, dtype=a.dtype, device=a.device)).sum(-1)
    U = Q[..., :n] * (diag >= 0).where(1.0, -1.0).unsqueeze(-2)   # undo the reflections' signs: U's columns stay A's
    if full_matrices: U = U.cat(Q[..., n:], dim=-1)
    return U.cast(out), S.cast(out), V.transpose(-1, -2).cast(out)
