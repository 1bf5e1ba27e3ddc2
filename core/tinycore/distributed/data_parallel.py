"""Data-parallel training: every rank holds the whole model, computes gradients on its part of the batch, and the
gradients are averaged across ranks before the optimizer step, so every rank takes the same step.

Gradients are packed into buckets (one flat tensor per dtype, up to `bucket_mb`), so a model with many small
parameters costs a few large collectives instead of many small ones; the averaged bucket is split back into views
that replace each `.grad`. Everything goes through the schedule runner, so a TinyJit-compiled step captures the
packing kernels and the collectives and replays them. The collectives run after backward (not overlapped with it:
the scheduler realizes backward as one graph, so there is no point at which one bucket is ready before the rest)."""
from __future__ import annotations
from tinycore.tensor import Tensor
from tinycore.distributed.collectives import allreduce, broadcast

def _buckets(params: list[Tensor], bucket_bytes: int) -> list[list[Tensor]]:
  out: list[list[Tensor]] = []
  by_dtype: dict = {}
  for p in params:
    cur = by_dtype.setdefault(p.grad.dtype, [[], 0])
    nbytes = p.grad.nbytes()
    if cur[0] and cur[1] + nbytes > bucket_bytes:
      out.append(cur[0])
      cur[0], cur[1] = [], 0
    cur[0].append(p)
    cur[1] += nbytes
  return out + [b for b, _ in by_dtype.values() if b]

def allreduce_grads(params: list[Tensor], op: str = "mean", bucket_mb: float = 25.0) -> None:
  """Replace every `p.grad` with its `op` ("mean": the data-parallel average; "sum") over all ranks. Parameters
  without a gradient are skipped, so every rank must have the same set of gradients (the same model and loss)."""
  if not bucket_mb > 0: raise ValueError(f"bucket_mb must be positive, got {bucket_mb}")
  with_grad = [p for p in params if p.grad is not None]
  for bucket in _buckets(with_grad, int(bucket_mb * 2**20)):
    flat = Tensor.cat(*[p.grad.detach().flatten() for p in bucket]) if len(bucket) > 1 else bucket[0].grad.detach().flatten()
    reduced = allreduce(flat, op)
    at = 0
    for p in bucket:
      n = p.grad.numel()
      p.grad = reduced[at:at + n].reshape(p.grad.shape)
      at += n

def broadcast_params(params: list[Tensor], root: int = 0) -> None:
  """Make every rank's parameters rank `root`'s (call once after building the model, before training)."""
  for p in params:
    p.assign(broadcast(p.detach(), root)).realize()

class DataParallel:
  """Wraps an nn.optim optimizer: `step()` averages the gradients across ranks, then steps. Build it after the model;
  it broadcasts rank 0's parameters so every rank starts from the same weights."""
  def __init__(self, optimizer, bucket_mb: float = 25.0, sync_params: bool = True):
    self.optimizer, self.bucket_mb = optimizer, bucket_mb
    if sync_params: broadcast_params(optimizer.params)
  def zero_grad(self) -> None: self.optimizer.zero_grad()
  def schedule_step(self) -> list[Tensor]:
    allreduce_grads(self.optimizer.params, "mean", self.bucket_mb)
    return self.optimizer.schedule_step()
  def step(self) -> None: Tensor.realize(*self.schedule_step())
  def __getattr__(self, name): return getattr(self.optimizer, name)   # lr, params, ... of the wrapped optimizer
