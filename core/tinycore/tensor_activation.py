"""Activation functions composed from the elementwise core (relu, sigmoid and softmax families, gelu, silu, softplus, ...)."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING
from tinycore.tensor_base import TensorBase
if TYPE_CHECKING: from tinycore.tensor import Tensor

class ActivationMixin(TensorBase):
  __slots__ = ()

  # gradient 0 at 0 (torch's convention; maximum(0) would split it 0.5/0.5) and nan stays nan
  def relu(self) -> Tensor: return (self <= 0).where(0, self)
  def sigmoid(self) -> Tensor:
    # through e = exp(-|x|) <= 1, never exp(+large): 1/(1+exp(-x)) overflows to inf at x << 0 and its backward is then
    # 0 * inf = nan (torch's gradient there is 0). -|x| as a select, not abs(): abs's gradient at 0 is 0, and
    # sigmoid'(0) must be 1/4
    x = self._float()
    pos = x >= 0
    e = (pos.where(-x, x) * (1 / math.log(2))).exp2()
    r = (1 + e).reciprocal()
    return pos.where(r, e * r)
  def tanh(self) -> Tensor: return 2.0 * ((2.0 * self).sigmoid()) - 1.0
  def softmax(self, axis=-1, dtype=None) -> Tensor:
    x = self.cast(dtype) if dtype is not None else self._float()
    m = x - x.max(axis, keepdim=True).detach()
    e = m.exp()
    return e / e.sum(axis, keepdim=True)
  def softmin(self, axis=-1, dtype=None) -> Tensor: return (-self).softmax(axis, dtype)
  def log_softmax(self, axis=-1, dtype=None) -> Tensor:
    x = self.cast(dtype) if dtype is not None else self._float()
    m = x - x.max(axis, keepdim=True).detach()
    return m - m.exp().sum(axis, keepdim=True).log()
  def logsumexp(self, axis=None, keepdim=False) -> Tensor:
    m = self.max(axis, keepdim=True).detach()
    # shift by 0 where the max is infinite: an all -inf row is then log(0) = -inf and a +inf row inf (torch), not NaN
    m = (m.abs() == math.inf).where(0, m)
    return (self - m).exp().sum(axis, keepdim=True).log().add(m).reshape(self._reduced_shape(axis, keepdim))
  def _reduced_shape(self, axis, keepdim) -> tuple:
    axes = self._axes(axis)
    return tuple(1 if i in axes else s for i, s in enumerate(self.shape)) if keepdim else tuple(s for i, s in enumerate(self.shape) if i not in axes)
  def relu6(self): return self.relu() - (self - 6).relu()
  def leaky_relu(self, neg_slope: float = 0.01): return (self < 0).where(self * neg_slope, self)
  # elu/selu: exp only of the non-positive side (the unused branch's exp(+large) = inf would make its masked gradient
  # 0 * inf = nan), and x > 0 picks the linear branch, so the gradient at 0 is alpha's side (torch)
  def elu(self, alpha: float = 1.0): pos = self > 0; return pos.where(self, alpha * (pos.where(0, self).exp() - 1))
  def celu(self, alpha: float = 1.0): return self.maximum(0) + (alpha * ((self / alpha).exp() - 1)).minimum(0)
  def selu(self, alpha: float = 1.67326, gamma: float = 1.0507):
    pos = self > 0
    return gamma * pos.where(self, alpha * (pos.where(0, self).exp() - 1))
  def gelu(self, approximate: str = "tanh"):
    """approximate="tanh" (tinygrad's default; torch's gelu(approximate='tanh')) or "none", the exact x * Phi(x)."""
    if approximate == "tanh": return 0.5 * self * (1 + (math.sqrt(2 / math.pi) * (self + 0.044715 * self * self * self)).tanh())
    if approximate == "none": return 0.5 * self * (1 + (self * (1 / math.sqrt(2))).erf())
    raise ValueError(f"gelu approximate must be 'tanh' or 'none', got {approximate!r}")
  def quick_gelu(self): return self * (self * 1.702).sigmoid()
  def silu(self): return self * self.sigmoid()
  def swish(self): return self.silu()
  def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5): return (alpha * self + beta).relu() - (alpha * self + beta - 1).relu()
  def hardswish(self): return self * (self + 3).relu6() * (1 / 6)
  def hardtanh(self, min_val: float = -1, max_val: float = 1): return self.clip(min_val, max_val)
  def softplus(self, beta: float = 1.0):
    # log(1+e^x) = max(x,0) + log(1+e^-|x|) without overflow; the max and -|x| as selects on one condition so the
    # gradient at 0 is 1/2 (relu's and abs's own conventions at 0 would both give 0 there)
    bx = self._float() * beta
    pos = bx >= 0
    return (pos.where(bx, 0) + (1 + pos.where(-bx, bx).exp()).log()) * (1 / beta)
  def mish(self): return self * self.softplus().tanh()
  def logsigmoid(self): return -(-self).softplus()
  def softsign(self): return self / (1 + self.abs())
