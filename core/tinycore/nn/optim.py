"""Optimizers. Each step builds the update of every parameter and state tensor as lazy assigns, then realizes them all
in one `Tensor.realize` so the scheduler can fuse across parameters. The learning rate is a Tensor, so changing it
(schedulers, `opt.lr.assign(...)`) reuses the compiled kernels."""
from __future__ import annotations
import math
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.helpers import dedup

class Optimizer:
  def __init__(self, params: list[Tensor], lr: float):
    for x in params:
      if x.requires_grad is None: x.requires_grad = True  # type: ignore[misc]
    self.params: list[Tensor] = dedup([x for x in params if x.requires_grad])
    if not self.params: raise ValueError("optimizer got no parameters that require grad")
    self.buffers: list[Tensor] = dedup([x for x in params if not x.requires_grad])
    self.device = self.params[0].device
    self.lr = Tensor([lr], device=self.device, dtype=dtypes.float32, requires_grad=False)  # already a buffer: assignable
  def zero_grad(self):
    for p in self.params: p.grad = None
  def step(self):
    """Apply one update with the current .grad of every parameter."""
    Tensor.realize(*self.schedule_step())
  def schedule_step(self) -> list[Tensor]:
    """The tensors to realize for one step (updated params, optimizer state, buffers) without realizing them."""
    for p in self.params:
      if p.grad is not None and p.grad.shape != p.shape: raise RuntimeError(f"grad shape {p.grad.shape} doesn't match parameter shape {p.shape}")
    return self._step() + self.params + self.buffers
  def _step(self) -> list[Tensor]: raise NotImplementedError
  def _grad(self, p: Tensor) -> Tensor:
    # updates never enter autograd, and work in the parameter's dtype
    return p.grad.detach().cast(p.dtype)
  def _lr(self, p: Tensor) -> Tensor: return self.lr.cast(p.dtype) if p.dtype != dtypes.float32 else self.lr

class OptimizerGroup(Optimizer):
  """Several optimizers stepped as one (for example different settings for different parameter sets)."""
  def __init__(self, *optimizers: Optimizer):
    self.optimizers = optimizers
    self.params, self.buffers = dedup([p for o in optimizers for p in o.params]), dedup([b for o in optimizers for b in o.buffers])
  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]
  def zero_grad(self):
    for o in self.optimizers: o.zero_grad()
  def _step(self) -> list[Tensor]: return [t for o in self.optimizers for t in o._step()]

class SGD(Optimizer):
  """torch.optim.SGD semantics: weight decay is added to the grad; momentum buffer b <- m*b + g (g on the first step);
  nesterov steps with g + m*b."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
               classic: bool = False):
    super().__init__(params, lr)
    if nesterov and momentum <= 0: raise ValueError("nesterov momentum needs momentum > 0")
    self.momentum, self.wd, self.nesterov, self.classic = momentum, weight_decay, nesterov, classic
    self.b = [Tensor.zeros(*p.shape, dtype=p.dtype, device=p.device, requires_grad=False).contiguous().realize()
              for p in self.params] if momentum else []
  def _step(self) -> list[Tensor]:
    for i, p in enumerate(self.params):
      if p.grad is None: continue
      g = self._grad(p)
      if self.wd: g = g + self.wd * p.detach()
      if self.momentum:
        self.b[i].assign(self.momentum * self.b[i] + g)
        g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
      p.assign((p.detach() - self._lr(p) * g).cast(p.dtype))
    return self.b

class LAMB(Optimizer):
  """LAMB (You et al. 2019); with adam=True it is Adam/AdamW with decoupled weight decay. Bias corrections use running
  products b1^t, b2^t kept as tensors so the step count never enters the kernel source."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6, weight_decay: float = 0.0,
               adam: bool = False):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    self.b1_t, self.b2_t = (Tensor([1.0], dtype=dtypes.float32, device=self.device, requires_grad=False) for _ in range(2))
    self.m = [Tensor.zeros(*p.shape, dtype=dtypes.float32, device=p.device, requires_grad=False).contiguous().realize() for p in self.params]
    self.v = [Tensor.zeros(*p.shape, dtype=dtypes.float32, device=p.device, requires_grad=False).contiguous().realize() for p in self.params]
  def _step(self) -> list[Tensor]:
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    for i, p in enumerate(self.params):
      if p.grad is None: continue
      g = self._grad(p).float()
      self.m[i].assign(self.b1 * self.m[i] + (1.0 - self.b1) * g)
      self.v[i].assign(self.b2 * self.v[i] + (1.0 - self.b2) * g * g)
      m_hat, v_hat = self.m[i] / (1.0 - self.b1_t), self.v[i] / (1.0 - self.b2_t)
      up = m_hat / (v_hat.sqrt() + self.eps) + self.wd * p.detach().float()
      if not self.adam:
        # trust ratio ||p|| / ||update||, 1 where either norm is 0
        r1, r2 = p.detach().float().square().sum().sqrt(), up.square().sum().sqrt()
        r = (r1 > 0).where((r2 > 0).where(r1 / r2, 1.0), 1.0)
        up = up * r
      p.assign((p.detach().float() - self.lr * up).cast(p.dtype))
    return [self.b1_t, self.b2_t] + self.m + self.v

def Adam(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> LAMB:
  return LAMB(params, lr, b1, b2, eps, 0.0, adam=True)
def AdamW(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.01) -> LAMB:
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)

# ---- learning-rate schedulers (torch names): they assign into optimizer.lr, so kernels are reused
class LR_Scheduler:
  def __init__(self, optimizer: Optimizer):
    self.optimizer, self.epoch_counter = optimizer, 0
    self.base_lr = float(optimizer.lr.numpy()[0]) if not isinstance(optimizer, OptimizerGroup) else float(optimizer[0].lr.numpy()[0])
  def get_lr(self) -> float: raise NotImplementedError
  def step(self):
    self.epoch_counter += 1
    lr = self.get_lr()
    for o in (self.optimizer.optimizers if isinstance(self.optimizer, OptimizerGroup) else (self.optimizer,)):
      # TODO: plain assign(Tensor([lr])) once a buffer-to-buffer copy kernel lowers (it fails in lower_kernel today)
      o.lr.assign(o.lr * 0 + Tensor([lr], device=o.lr.device, dtype=o.lr.dtype)).realize()

class StepLR(LR_Scheduler):
  def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1):
    super().__init__(optimizer); self.step_size, self.gamma = step_size, gamma
  def get_lr(self) -> float: return self.base_lr * self.gamma ** (self.epoch_counter // self.step_size)

class MultiStepLR(LR_Scheduler):
  def __init__(self, optimizer: Optimizer, milestones: list[int], gamma: float = 0.1):
    super().__init__(optimizer); self.milestones, self.gamma = sorted(milestones), gamma
  def get_lr(self) -> float: return self.base_lr * self.gamma ** sum(1 for m in self.milestones if self.epoch_counter >= m)

class CosineAnnealingLR(LR_Scheduler):
  def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0):
    super().__init__(optimizer); self.T_max, self.eta_min = T_max, eta_min
  def get_lr(self) -> float:
    return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * self.epoch_counter / self.T_max)) / 2
