"""Linear algebra built from Tensor ops: matrix products (numpy's matmul rules, panel-major right operands where the device
asks), Newton-Schulz orthogonalization, Householder QR and a one-sided Jacobi SVD, both batched over leading dims."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING
from tinycore.dtype import dtypes, least_upper_dtype, sum_acc_dtype, to_dtype
from tinycore.helpers import prod
from tinycore.uop import Ops, GroupOp
from tinycore.tensor_errors import ShapeError
from tinycore.tensor_base import TensorBase, tensor_type
from tinycore.tensor_shapes import broadcast_shape
if TYPE_CHECKING: from tinycore.tensor import Tensor

def _transposed(t) -> bool:
  """Is this a view whose last axis isn't the contiguous one of what it reads (a PERMUTE moved it)?"""
  u = t.uop
  while u.op in GroupOp.Movement and u.op is not Ops.PERMUTE: u = u.src[0]
  return u.op is Ops.PERMUTE and u.arg[-1] != len(u.arg) - 1

def _packable(x, w) -> bool:
  """A plain float32 matrix times a matrix on one device with concrete sizes: the products a device may lay out in panels."""
  return x.ndim == 2 and w.ndim == 2 and x.dtype == w.dtype == dtypes.float32 and isinstance(x.device, str) and \
    x.device == w.device and all(isinstance(v, int) for v in (*x.shape, *w.shape))

def _backward_as_matmuls(out, x, w) -> None:
  """Differentiate out = x @ w as two matmuls, g @ w.T and x.T @ g, where the device packs an operand of either: they
  then take its panel copies like any forward matmul. Autograd through the broadcast product reduces over the other
  axis with both operands strided (a CPU's weight gradient at 120 instead of 165 GFLOP/s on one core)."""
  if not _packable(x, w): return
  (M, K), N = x.shape, w.shape[1]
  from tinycore.device import Device
  r = Device[x.device].renderer
  if not (r.matmul_panels(M, N, K, True) or r.matmul_row_panels(K, M, N) or r.matmul_panels(K, M, N, False)): return
  from tinycore.gradient import custom_gradient
  tensor = type(out)
  xu, wu = x.uop, w.uop   # the forward's values, whatever the Tensors hold by the time backward runs
  def backward(ctx, wanted: tuple[bool, bool]):
    g = tensor(ctx)
    gx = g.dot(tensor(wu).transpose()).uop if wanted[0] else None
    gw = tensor(xu).transpose().dot(g).uop if wanted[1] else None
    return gx, gw
  custom_gradient(out.uop, (xu, wu), backward)

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

class LinalgMixin(TensorBase):
  __slots__ = ()

  def qr(self):
    """Householder QR of the last two dims: (..., m, n) -> Q (..., m, m) orthogonal, R (..., m, n) upper triangular."""
    Tensor = tensor_type()
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
    Tensor = tensor_type()
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

  # ---- matrix products
  def dot(self, w: Tensor, dtype=None) -> Tensor:
    """Matrix product with numpy's rules: 1-d operands gain and then lose a dim, batch dims broadcast."""
    Tensor = tensor_type()
    if not isinstance(w, Tensor): raise TypeError(f"matmul needs a Tensor, got {type(w).__name__}")
    if self.ndim == 0 or w.ndim == 0: raise ShapeError(f"matmul needs at least 1-d tensors, got shapes {self.shape} and {w.shape}")
    k, kw = self.shape[-1], (w.shape[-2] if w.ndim > 1 else w.shape[0])
    if k != kw: raise ShapeError(f"matmul shape mismatch: {self.shape} @ {w.shape} ({k} != {kw})")
    out_dt = least_upper_dtype(self.dtype, w.dtype) if dtype is None else to_dtype(dtype)
    if self.ndim == 1: return self.unsqueeze(0).dot(w, dtype).squeeze(-2 if w.ndim > 1 else -1)
    # half/bf16/fp8 products accumulate in float32 (as torch and tinygrad do; a 64-term fp16 dot in half was off by 0.05)
    # and the result rounds once; the tensor-core matcher takes that CAST(MUL) form
    acc = dtype if dtype is not None else sum_acc_dtype(least_upper_dtype(self.dtype, w.dtype))
    if dtype is None and dtypes.is_float(acc) and acc.itemsize < 4: acc = dtypes.float32
    if w.ndim == 1: return (self * w).sum(-1, dtype=acc).cast(out_dt)
    try: broadcast_shape(self.shape[:-2], w.shape[:-2])
    except ValueError: raise ShapeError(f"matmul batch dims don't broadcast: {self.shape} @ {w.shape}") from None
    x = self._row_panels(w).unsqueeze(-2)                   # (..., n, 1, k)
    wp = w._panels(self)
    wt = wp.transpose(-1, -2).unsqueeze(-3)                # (..., 1, m, k)
    out = (x * wt).sum(-1, dtype=acc)
    # panels padded past the last column: the product runs over whole panels, then keeps the real columns (a shrink
    # pushed into the reduce would bring back the ragged tile the padding is there to avoid)
    if wp.shape[-1] != w.shape[-1]: out = out.contiguous()[..., :w.shape[-1]]
    out = out.cast(out_dt)
    if dtype is None: _backward_as_matmuls(out, self, w)
    return out
  def _row_panels(self, w: Tensor) -> Tensor:
    """This left operand (M, K) of self @ w, read through a copy in row panels [M/p][K][p] where it is a transposed view
    and the device asks for one (Renderer.matmul_row_panels): the same values, a better layout."""
    if not _packable(self, w) or not _transposed(self): return self
    (M, K), N = self.shape, w.shape[1]
    from tinycore.device import Device
    p = Device[self.device].renderer.matmul_row_panels(M, K, N)
    if not p or M % p: return self
    return self.reshape(M // p, p, K).permute(0, 2, 1).contiguous().permute(0, 2, 1).reshape(M, K)
  def _panels(self, x: Tensor) -> Tensor:
    """This right operand (K, N) of x @ self, read through a panel-major copy where the device asks for one
    (Renderer.matmul_panels) and the matmul is big enough to pay for the copy: the same values, a better layout, its
    last panel padded with zero columns where N isn't a multiple of the panel width (the result is then wider)."""
    if self.ndim < 2 or self.dtype != dtypes.float32 or x.dtype != dtypes.float32 or not isinstance(self.device, str): return self
    # a batch of right operands (attention's k^T): each is packed, against the rows of its own left operand
    (K, N), M = self.shape[-2:], (prod(x.shape[:-1]) if self.ndim == 2 else x.shape[-2])
    batch = self.shape[:-2]
    if not all(isinstance(v, int) for v in (K, N, M, *batch)): return self
    transposed = _transposed(self)
    from tinycore.device import Device
    if not batch and not transposed and x.ndim == 2 and not _transposed(x) and Device[self.device].renderer.matmul_narrow_transpose(M, K, N):
      return self.transpose().contiguous().transpose()
    # the device's own policy (Renderer.matmul_panels): whether the copy pays depends on its caches and vector width
    r = Device[self.device].renderer
    w, p = self, r.matmul_panels(M, K, N, transposed)
    if not p or N % p:
      # N isn't whole panels: without a copy the tile narrows to the vector width that divides N (1000: 8 floats, half
      # the FMA width) or gathers a transposed operand. Where the device asks (Renderer.matmul_padded_panels) the copy
      # pads the last panel with zero columns; dot computes them and drops them
      if not (p := r.matmul_padded_panels(M * prod(batch), K, N, transposed)): return self
      w = self.pad(((0, 0),) * (self.ndim - 1) + ((0, -N % p),))
      N += -N % p
    nb = len(batch)
    panels = (*range(nb), nb + 1, nb, nb + 2)   # (..., K, N/p, p) <-> (..., N/p, K, p)
    return w.reshape(*batch, K, N // p, p).permute(*panels).contiguous().permute(*panels).reshape(*batch, K, N)
  def matmul(self, x: Tensor, reverse=False, dtype=None) -> Tensor:
    Tensor = tensor_type()
    if not isinstance(x, Tensor): x = Tensor(x, device=self.device)
    return x.dot(self, dtype=dtype) if reverse else self.dot(x, dtype=dtype)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    x = self.mul(weight) if weight.ndim == 1 else self.dot(weight)
    return x.add(bias) if bias is not None else x
  def newton_schulz(self, steps: int, params: tuple, eps: float = 1e-7) -> Tensor:
    """Orthogonalize the trailing matrices with an odd polynomial X <- sum_i params[i] * (X X^T)^i X, after scaling X
    to unit Frobenius norm (Muon's iteration uses params (3.4445, -4.7750, 2.0315)). Wide or tall: iterates on the
    short side."""
    x = self._float()
    tall = x.shape[-2] > x.shape[-1]
    if tall: x = x.transpose(-1, -2)
    x = x / ((x * x).sum((-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      a, term, out = x @ x.transpose(-1, -2), x, x * params[0]
      for c in params[1:]:
        term = a @ term
        out = out + term * c
      x = out
    return x.transpose(-1, -2) if tall else x
