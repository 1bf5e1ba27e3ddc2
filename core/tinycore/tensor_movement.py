"""Movement built from the six primitive movement ops: repeat, roll, split, unfold, diag, triangles, sliding windows (_pool), einsum."""
from __future__ import annotations
import math, itertools
from tinycore.dtype import dtypes, to_dtype, least_upper_dtype
from tinycore.helpers import prod, make_tuple, flatten
from tinycore.tensor_errors import ArgumentError, ShapeError

class MovementMixin:
  __slots__ = ()

  @staticmethod
  def linspace(start, stop, steps: int, dtype=None, **kw):
    from tinycore.tensor import Tensor
    if not isinstance(steps, int) or steps < 0: raise ValueError(f"linspace steps must be a non-negative int, got {steps!r}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if dt == dtypes.bool: raise ArgumentError("linspace can't make bool values (torch and tinygrad refuse it too)")
    if steps == 0: return Tensor.empty(0, dtype=dt, **kw)
    if steps == 1: return Tensor.full((1,), start, dtype=dt, **kw)
    idx = Tensor._index_range(steps, kw.get("device")).cast(dtypes.float64 if dt == dtypes.float64 else dtypes.float32)
    out = idx * ((stop - start) / (steps - 1)) + start
    return Tensor(out.cast(dt).uop, requires_grad=kw.get("requires_grad"))

  def repeat(self, repeats, *args):
    """Tile the whole tensor: shape (s0, s1) with repeats (a, b) -> (a*s0, b*s1); extra leading repeats add dims."""
    reps = tuple(repeats) if isinstance(repeats, (tuple, list)) else (repeats,) + args
    if len(reps) < self.ndim: raise ValueError(f"repeat needs at least {self.ndim} repeats for shape {self.shape}, got {reps}")
    if any(not isinstance(r, int) or r < 0 for r in reps): raise ValueError(f"repeats must be non-negative ints, got {reps}")
    base = (1,) * (len(reps) - self.ndim) + tuple(self.shape)
    x = self.reshape(flatten([(1, s) for s in base])).expand(flatten([(r, s) for r, s in zip(reps, base)]))
    return x.reshape(tuple(r * s for r, s in zip(reps, base)))
  def repeat_interleave(self, repeats: int, dim: int | None = None):
    if not isinstance(repeats, int) or repeats < 0: raise ValueError(f"repeat_interleave needs a non-negative int repeats, got {repeats!r}")
    x = self.flatten() if dim is None else self
    d = 0 if dim is None else x._resolve_dim(dim)
    x = x.unsqueeze(d + 1)
    return x.expand(*x.shape[:d + 1], repeats, *x.shape[d + 2:]).flatten(d, d + 1)

  def roll(self, shifts, dims=None):
    if dims is None:
      if len(make_tuple(shifts, 1)) != 1: raise ArgumentError(f"roll without dims takes one shift (it rolls the flattened tensor), got {shifts}")
      return self.flatten().roll(make_tuple(shifts, 1)[0], 0).reshape(self.shape)
    shifts, dims = make_tuple(shifts, 1), make_tuple(dims, 1)
    if len(shifts) != len(dims): raise ArgumentError(f"roll needs as many shifts as dims, got {shifts} and {dims}")
    x = self
    for s, d in zip(shifts, dims):
      d = x._resolve_dim(d)
      n = x.shape[d]
      if n == 0 or (s := s % n) == 0: continue
      x = x._slice_dim(d, n - s, n).cat(x._slice_dim(d, 0, n - s), dim=d)
    return x

  def split(self, sizes, dim: int = 0):
    d = self._resolve_dim(dim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise ValueError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    elif sum(sizes) != n: raise ValueError(f"split sizes {list(sizes)} don't sum to {n}, the size of dim {d} of {self.shape}")
    offs = list(itertools.accumulate(sizes, initial=0))
    return tuple(self._slice_dim(d, offs[i], offs[i + 1]) for i in range(len(sizes)))
  def chunk(self, chunks: int, dim: int = 0):
    if not isinstance(chunks, int) or chunks <= 0: raise ValueError(f"chunk needs a positive number of chunks, got {chunks!r}")
    n = self.shape[self._resolve_dim(dim)]
    return self.split(max(1, math.ceil(n / chunks)), dim) if n else (self,) * 1
  def unbind(self, dim: int = 0):
    d = self._resolve_dim(dim)
    return tuple(self._slice_dim(d, i, i + 1).squeeze(d) for i in range(self.shape[d]))

  def meshgrid(self, *args, indexing: str = "ij"):
    """`a.meshgrid(b, c)` or `Tensor.meshgrid(a, b, c)`: one grid per input, each of shape (len(a), len(b), ...) for
    "ij" (the first two swapped for "xy"); a 0-d input counts as one element, like torch."""
    tensors = tuple(self) if isinstance(self, (list, tuple)) else (self, *args)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)): tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"): raise ArgumentError(f"meshgrid indexing must be 'ij' or 'xy', not {indexing!r}")
    for t in tensors:
      if t.ndim > 1: raise ShapeError(f"meshgrid takes 0-d or 1-d tensors, got shape {t.shape}")
    ts = [t.reshape(1) if t.ndim == 0 else t for t in tensors]
    if indexing == "xy" and len(ts) >= 2: ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    out = [t.reshape(tuple(-1 if i == j else 1 for j in range(len(ts)))).expand(shape) for i, t in enumerate(ts)]
    if indexing == "xy" and len(ts) >= 2: out[0], out[1] = out[1], out[0]   # ij of (y, x), outputs swapped back
    return tuple(out)

  def _tri_mask(self, diagonal: int, upper: bool):
    from tinycore.tensor import Tensor
    if self.ndim < 2: raise ValueError(f"triu/tril need at least 2 dims, got shape {self.shape}")
    r, c = self.shape[-2:]
    ri = Tensor._index_range(r, self.device).reshape(r, 1)
    ci = Tensor._index_range(c, self.device).reshape(1, c)
    return (ci - ri >= diagonal) if upper else (ci - ri <= diagonal)
  def triu(self, diagonal: int = 0): return self._tri_mask(diagonal, True).where(self, 0).cast(self.dtype)
  def tril(self, diagonal: int = 0): return self._tri_mask(diagonal, False).where(self, 0).cast(self.dtype)

  def diag(self):
    """1-d -> square matrix with it on the diagonal; 2-d -> its main diagonal."""
    from tinycore.tensor import Tensor
    if self.ndim == 1:
      n = self.shape[0]
      return Tensor.eye(n, dtype=dtypes.bool, device=self.device).where(self.reshape(1, n), 0).cast(self.dtype)
    if self.ndim == 2:
      m = min(self.shape)
      if m == 0: return self.reshape(-1)[:0]
      # the diagonal of a square block is every (n+1)-th element of its flattening
      sq = self.shrink(((0, m), (0, m))).flatten().pad(((0, m),))
      return sq.reshape(m, m + 1)[:, 0]
    raise ValueError(f"diag needs a 1-d or 2-d tensor, got shape {self.shape}")

  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """The diagonal of the (dim1, dim2) planes (above it for offset > 0), as a new last dim: torch.diagonal."""
    d1, d2 = self._resolve_dim(dim1), self._resolve_dim(dim2)
    if d1 == d2: raise ArgumentError(f"diagonal dims must differ, got dim1={dim1} and dim2={dim2} (shape {self.shape})")
    rest = [i for i in range(self.ndim) if i not in (d1, d2)]
    x = self.permute(rest + [d1, d2])
    r, c = x.shape[-2:]
    x = x[..., :, offset:] if offset >= 0 else x[..., -offset:, :]
    r, c = x.shape[-2:]
    n, pre = min(r, c), x.shape[:-2]
    if n == 0: return x.reshape(*pre, -1)[..., :0] if prod(pre) else x.reshape(*pre, 0)
    # element (i, i) of an (n, c) block is entry i*(c+1) of its flattening: pad to n*(c+1) and keep column 0 of (n, c+1)
    flat = x[..., :n, :].reshape(*pre, n * c).pad(tuple((0, 0) for _ in pre) + ((0, n),))
    return flat.reshape(*pre, n, c + 1)[..., 0]

  # ---- sliding windows
  def _pool(self, k_: tuple, stride=1, dilation=1):
    """Sliding windows over the last len(k_) dims: (*pre, *i_) -> (*pre, *o_, *k_) with o = (i - d*(k-1) - 1)//s + 1."""
    d_ = len(k_)
    if self.ndim < d_: raise ValueError(f"can't pool {d_} dims of a tensor with shape {self.shape}")
    s_, dl_ = make_tuple(stride, d_), make_tuple(dilation, d_)
    pre, i_ = self.shape[:-d_], self.shape[-d_:]
    o_ = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(i_, k_, s_, dl_))
    for i, k, o in zip(i_, k_, o_):
      if k <= 0 or o <= 0: raise ShapeError(f"window {k_} (dilation {dl_}) doesn't fit in input of spatial size {i_}")
    x = self
    for j in range(d_):   # each window step turns one axis into an (o, k) pair
      x = x._window_axis(len(pre) + 2 * j, k_[j], s_[j], dl_[j], o_[j])
    # x is (*pre, o0, k0, o1, k1, ...) -> (*pre, *o_, *k_)
    n = len(pre)
    return x.permute(tuple(range(n)) + tuple(n + 2 * j for j in range(d_)) + tuple(n + 2 * j + 1 for j in range(d_)))
  def _window_axis(self, ax: int, k: int, s: int, d: int, o: int):
    """Replace axis `ax` (size i) by two axes (o, k) with out[a, b] = x[a*s + b*d]."""
    A, i, B = self.shape[:ax], self.shape[ax], self.shape[ax + 1:]
    keep = tuple((0, v) for v in A), tuple((0, v) for v in B)
    if d == 1 and k <= s:
      # non-overlapping windows: pad/shrink to o*s, split into (o, s), keep the first k
      x = self._slice_dim(ax, 0, min(i, o * s)).pad(tuple((0, 0) for _ in A) + ((0, max(0, o * s - i)),) + tuple((0, 0) for _ in B))
      x = x.reshape(*A, o, s, *B)
      return x.shrink(keep[0] + ((0, o), (0, k)) + keep[1])
    # overlapping: repeat the axis e times, view rows of length L with L = d (mod i), so row r starts at x[r*d]
    L = i + d + i * max(0, math.ceil((o * s - i - d) / i))
    e = math.ceil(k * L / i)
    x = self.unsqueeze(ax).expand(*A, e, i, *B).reshape(*A, e * i, *B)
    x = x.shrink(keep[0] + ((0, k * L),) + keep[1]).reshape(*A, k, L, *B)
    x = x.shrink(keep[0] + ((0, k), (0, o * s)) + keep[1]).reshape(*A, k, o, s, *B)
    x = x.shrink(keep[0] + ((0, k), (0, o), (0, 1)) + keep[1]).reshape(*A, k, o, *B)
    return x.transpose(len(A), len(A) + 1)

  def unfold(self, dimension: int, size: int, step: int):
    """torch.Tensor.unfold: windows of `size` every `step` along `dimension`; windows replace it, the window is the new last dim."""
    d = self._resolve_dim(dimension)
    if size < 0 or step <= 0: raise ArgumentError(f"unfold needs size >= 0 and step > 0, got size {size} and step {step}")
    if size > self.shape[d]: raise ShapeError(f"unfold size {size} exceeds dimension {d} of size {self.shape[d]} (shape {self.shape})")
    if size == 0:   # (n - 0) // step + 1 windows, each empty: nothing to read, so a zero-size constant
      return self.full((*self.shape[:d], self.shape[d] // step + 1, *self.shape[d + 1:], 0), 0, dtype=self.dtype, device=self.device)
    x = self.transpose(d, -1) if d != self.ndim - 1 else self
    w = x._pool((size,), step)                      # (..., o, size) with dim d at the end
    return w.transpose(d, -2) if d != self.ndim - 1 else w

  # ---- einsum
  @staticmethod
  def einsum(formula: str, *operands, dtype=None):
    """Einstein summation as torch.einsum: '...' for broadcast dims (first in an implicit output), a letter repeated in
    one operand takes its diagonal, letters missing from the output are summed. Every operand is broadcast onto the
    union of the letters, multiplied, and reduced."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    f = formula.replace(" ", "")
    lhs, arrow, rhs = f.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(operands): raise ArgumentError(f"einsum {formula!r} names {len(ins)} operands, got {len(operands)}")
    for s_ in ins + ([rhs] if arrow else []):
      if s_.count("...") > 1: raise ArgumentError(f"einsum {formula!r}: '...' appears more than once in {s_!r}")
      if not s_.replace("...", "").isalpha() and s_.replace("...", ""): raise ArgumentError(f"einsum {formula!r}: subscripts must be letters, got {s_!r}")
    # '...' becomes fresh capital letters, aligned from the right (operands may cover fewer of them)
    n_ell = 0
    for s_, t in zip(ins, operands):
      n = t.ndim - len(s_.replace("...", ""))
      if n < 0 or (n > 0 and "..." not in s_): raise ShapeError(f"einsum operand {s_!r} doesn't match a tensor of shape {t.shape}")
      n_ell = max(n_ell, n)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in f][:n_ell]
    subs, xs, sizes = [], [], {}
    for s_, t in zip(ins, operands):
      k = t.ndim - len(s_.replace("...", ""))
      sub = list(s_.replace("...", "".join(free[n_ell - k:])))
      # a repeated letter: the diagonal over its two dims, which becomes a new last dim named by that letter
      while (rep := next((c for c in sub if sub.count(c) > 1), None)) is not None:
        p1 = sub.index(rep); p2 = sub.index(rep, p1 + 1)
        if t.shape[p1] != t.shape[p2]: raise ShapeError(f"einsum {formula!r}: {rep!r} repeats in {s_!r} over dims of sizes {t.shape[p1]} and {t.shape[p2]}")
        t = t.diagonal(0, p1, p2)
        sub = [c for i, c in enumerate(sub) if i not in (p1, p2)] + [rep]
      for c, n in zip(sub, t.shape):
        if c in sizes and sizes[c] != n and 1 not in (n, sizes[c]):
          raise ShapeError(f"einsum {formula!r}: {c!r} has size {sizes[c]} in one operand and {n} in another")
        if sizes.get(c, 1) == 1: sizes[c] = n
      subs.append(sub); xs.append(t)
    if arrow:
      out = list(rhs.replace("...", "".join(free)))
      for c in out:
        if c not in sizes: raise ArgumentError(f"einsum output letter {c!r} is not in any input of {formula!r}")
      if len(set(out)) != len(out): raise ArgumentError(f"einsum {formula!r}: an output letter repeats")
    else:
      allsub = [c for sub in subs for c in sub]
      out = free + sorted(c for c in set(allsub) if allsub.count(c) == 1 and c not in free)
    letters = out + sorted(set(c for sub in subs for c in sub) - set(out))
    full = None
    for sub, t in zip(subs, xs):
      order = sorted(range(len(sub)), key=lambda i: letters.index(sub[i]))
      t = t.permute(order) if order else t
      have = [sub[i] for i in order]
      t = t.reshape(tuple(t.shape[have.index(c)] if c in have else 1 for c in letters))
      full = t if full is None else full * t
    if full is None: raise ArgumentError(f"einsum {formula!r} needs at least one operand")
    full = full.expand(tuple(sizes[c] for c in letters)) if letters else full
    out_dt = to_dtype(dtype) if dtype is not None else least_upper_dtype(*[t.dtype for t in operands])
    red = tuple(range(len(out), len(letters)))
    return (full.sum(red) if red else full).cast(out_dt)

  def rearrange(self, formula: str, **sizes):
    """einops-style axis rearrangement: 'b c (h p) w -> b (c p) h w', p=2. Names, groups in (), '...' and '1'."""
    def err(msg): return ValueError(f"rearrange {formula!r}: {msg}")
    def parse(side: str) -> list:   # a bare axis is a list, a (group) a tuple: '...' and '(...)' differ on the right
      out, group = [], None
      for tok in side.replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
          if group is not None: raise err("nested parentheses")
          group = []
        elif tok == ")":
          if group is None: raise err("unbalanced ')'")
          out.append(tuple(group)); group = None
        elif tok not in ("...", "1") and not tok.isidentifier(): raise err(f"bad axis name {tok!r}")
        elif group is not None: group += [] if tok == "1" else [tok]
        else: out.append([] if tok == "1" else [tok])
      if group is not None: raise err("unbalanced '('")
      return out
    if formula.count("->") != 1: raise ValueError(f"rearrange needs exactly one '->', got {formula!r}")
    lhs, rhs = (parse(s) for s in formula.split("->"))
    names = lambda side: [n for g in side for n in g]
    if sorted(names(lhs)) != sorted(names(rhs)) or len(set(names(lhs))) != len(names(lhs)): raise err("both sides must name the same axes, each once")
    if any("..." in g and g != ["..."] for g in lhs): raise err("'...' on the left must stand alone, not in a group")
    if (bad := set(sizes) - set(names(lhs))): raise err(f"sizes given for unknown axes {sorted(bad)}")
    has_ell = ["..."] in lhs
    if (self.ndim < len(lhs) - 1) if has_ell else (self.ndim != len(lhs)): raise err(f"the left side has {len(lhs)} axes, the tensor {self.ndim} ({self.shape})")
    ell = [f"...{i}" for i in range(self.ndim - len(lhs) + 1)] if has_ell else []
    known, dims, d = dict(sizes), [], 0
    for g in lhs:
      if g == ["..."]:
        known.update(zip(ell, self.shape[d:d + len(ell)])); dims += ell; d += len(ell); continue
      if len(unknown := [n for n in g if n not in known]) > 1: raise err(f"can't infer {unknown} from dim {self.shape[d]}: give all but one")
      rest = prod(known[n] for n in g if n in known)
      if unknown:
        if rest == 0 or self.shape[d] % rest: raise err(f"dim {self.shape[d]} isn't divisible by {rest}")
        known[unknown[0]] = self.shape[d] // rest
      if prod(known[n] for n in g) != self.shape[d]: raise err(f"({' '.join(g)}) is {prod(known[n] for n in g)}, but the dim is {self.shape[d]}")
      dims += g; d += 1
    out_groups = []
    for g in rhs: out_groups += [[e] for e in ell] if g == ["..."] else [[e for n in g for e in (ell if n == "..." else [n])]]
    x = self.reshape(tuple(known[n] for n in dims)).permute(tuple(dims.index(n) for g in out_groups for n in g))
    return x.reshape(tuple(prod(known[n] for n in g) for g in out_groups))

  def pad_to(self, shape, *args, value=0):
    """Pad at the end of each dim up to `shape` (None keeps a dim)."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) != self.ndim: raise ValueError(f"pad_to shape {shape} has {len(shape)} dims, the tensor {self.ndim} ({self.shape})")
    if any(t is not None and t < s for s, t in zip(self.shape, shape)): raise ValueError(f"pad_to can't shrink {self.shape} to {shape}")
    return self.pad(tuple((0, 0 if t is None else t - s) for s, t in zip(self.shape, shape)), value=value)
  def shrink_to(self, shape, *args):
    """Keep the first `shape` elements of each dim (None keeps a dim)."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) != self.ndim: raise ValueError(f"shrink_to shape {shape} has {len(shape)} dims, the tensor {self.ndim} ({self.shape})")
    if any(t is not None and t > s for s, t in zip(self.shape, shape)): raise ValueError(f"shrink_to can't grow {self.shape} to {shape}")
    return self.shrink(tuple((0, s if t is None else t) for s, t in zip(self.shape, shape)))
