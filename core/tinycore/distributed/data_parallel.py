"""Data-parallel training: every rank holds the whole model, computes gradients on its part of the batch, and the
gradients are averaged across ranks before the optimizer step, so every rank takes the same step.

Gradients are packed into buckets (one flat buffer per dtype, up to `bucket_mb`), so a model with many small
parameters costs a few large collectives instead of many small ones; the averaged bucket is split back into views
that replace each `.grad`. Everything goes through the schedule runner, so a TinyJit-compiled step captures the
packing kernels and the collectives and replays them. Each bucket's allreduce starts as soon as the kernel that
completes it has run, while backward computes the rest (overlap.py); `overlap=False` starts them all after backward."""
from __future__ import annotations
from tinycore.tensor import Tensor
from tinycore.distributed.collectives import broadcast

def _buckets(params: list[Tensor], bucket_bytes: int) -> list[list[Tensor]]:
  # in reverse order: backward produces the last layers' gradients first, so their bucket can start first
  out: list[list[Tensor]] = []
  by_dtype: dict = {}
  for p in reversed(params):
    cur = by_dtype.setdefault(p.grad.dtype, [[], 0])
    nbytes = p.grad.nbytes()
    if cur[0] and cur[1] + nbytes > bucket_bytes:
      out.append(cur[0])
      cur[0], cur[1] = [], 0
    cur[0].append(p)
    cur[1] += nbytes
  return out + [b for b, _ in by_dtype.values() if b]

class GradBuckets:
  """Persistent flat buffers, one per bucket, that the gradients are packed into and reduced in place (the host engine
  hands them to MPI with no copy and no allocation per step). After `allreduce`, each `.grad` is a view of its bucket,
  valid until the next step's gradients overwrite it (as in torch's DDP)."""
  def __init__(self, bucket_mb: float = 25.0):
    if not bucket_mb > 0: raise ValueError(f"bucket_mb must be positive, got {bucket_mb}")
    self.bucket_bytes = int(bucket_mb * 2**20)
    self.layout: tuple = ()
    self.groups: list[list[Tensor]] = []
    self.flats: list[Tensor] = []

  def _plan(self, with_grad: list[Tensor]) -> None:
    layout = tuple((id(p), p.grad.dtype, p.grad.shape, str(p.grad.device)) for p in with_grad)
    if layout == self.layout: return
    self.layout, self.groups = layout, _buckets(with_grad, self.bucket_bytes)
    self.flats = [Tensor.empty(sum(p.grad.numel() for p in g), dtype=g[0].grad.dtype, device=g[0].grad.device).realize()
                  for g in self.groups]

  def allreduce(self, params: list[Tensor], op: str = "mean", overlap: bool = True) -> None:
    from tinycore.distributed.collectives import _check_op, _input
    from tinycore.distributed.group import get_engine
    from tinycore.distributed.overlap import realize_and_allreduce
    with_grad = [p for p in params if p.grad is not None]
    if not with_grad: return
    for p in with_grad: _check_op(op, p.grad)
    self._plan(with_grad)
    bufs = [_input(flat, "allreduce")[0] for flat in self.flats]
    # each gradient's kernel stores straight into its slice of the bucket: no copy, and no cat kernel fusing reductions
    # of different shapes into one masked kernel (4x slower for the MLP of bench/distributed.py)
    packs = []
    for flat, g in zip(self.flats, self.groups):
      at = 0
      for p in g:
        n = p.grad.numel()
        packs.append(flat[at:at + n].assign(p.grad.detach().flatten()))
        at += n
    realize_and_allreduce(packs, bufs, get_engine(str(self.flats[0].device)), op, overlap)
    for flat, g in zip(self.flats, self.groups):
      at = 0
      for p in g:
        n = p.grad.numel()
        p.grad = flat[at:at + n].reshape(p.grad.shape)
        at += n

def allreduce_grads(params: list[Tensor], op: str = "mean", bucket_mb: float = 25.0, overlap: bool = True) -> None:
  """Replace every `p.grad` with its `op` ("mean": the data-parallel average; "sum") over all ranks. Parameters
  without a gradient are skipped, so every rank must have the same set of gradients (the same model and loss).
  `overlap`: start each bucket's allreduce as soon as its gradients are computed (distributed/overlap.py)."""
  GradBuckets(bucket_mb).allreduce(params, op, overlap)

def broadcast_params(params: list[Tensor], root: int = 0) -> None:
  """Make every rank's parameters rank `root`'s (call once after building the model, before training)."""
  for p in params:
    p.assign(broadcast(p.detach(), root)).realize()

class DataParallel:
  """Wraps an nn.optim optimizer: `step()` averages the gradients across ranks, then steps. Build it after the model;
  it broadcasts rank 0's parameters so every rank starts from the same weights."""
  def __init__(self, optimizer, bucket_mb: float = 25.0, sync_params: bool = True, overlap: bool = True):
    self.optimizer, self.bucket_mb, self.overlap = optimizer, bucket_mb, overlap
    self.buckets = GradBuckets(bucket_mb)
    if sync_params: broadcast_params(optimizer.params)
  def zero_grad(self) -> None: self.optimizer.zero_grad()
  def schedule_step(self) -> list[Tensor]:
    self.buckets.allreduce(self.optimizer.params, "mean", self.overlap)
    return self.optimizer.schedule_step()
  def step(self) -> None: Tensor.realize(*self.schedule_step())
  def __getattr__(self, name): return getattr(self.optimizer, name)   # lr, params, ... of the wrapped optimizer
