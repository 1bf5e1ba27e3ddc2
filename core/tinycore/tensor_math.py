"""Elementwise math composed from the core primitives (exp2, log2, sin, sqrt, reciprocal): hyperbolic and inverse trig
functions, erf, copysign/fmod, polynomials, closeness tests."""
from __future__ import annotations
import math
from tinycore.tensor_base import TensorBase, tensor_type

class MathMixin(TensorBase):
  __slots__ = ()

  def isnan(self): return self != self
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True):
    return ((self == math.inf) & detect_positive) | ((self == -math.inf) & detect_negative)
  def isfinite(self): return (self.isinf() | self.isnan()).logical_not()
  def log10(self): return self.log2() * math.log10(2)
  def log1p(self): return (1 + self._float()).log()
  def expm1(self): return self.exp() - 1
  def erf(self):
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)."""
    x = self._float()
    t = 1.0 / (1.0 + 0.3275911 * x.abs())
    y = 1.0 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * (-(x * x)).exp()
    return x.sign() * y
  def sinh(self): x = self._float(); return (x.exp() - (-x).exp()) * 0.5
  def cosh(self): x = self._float(); return (x.exp() + (-x).exp()) * 0.5
  def asinh(self): x = self._float(); a = x.abs(); return x.sign() * (a + (a * a + 1).sqrt()).log()
  def acosh(self): x = self._float(); return (x + (x * x - 1).sqrt()).log()
  def atanh(self): x = self._float(); return ((1 + x) / (1 - x)).log() * 0.5
  def atan(self):
    """Range-reduced to |y| <= tan(pi/8), then the Taylor series to y^15 (error < 3e-8)."""
    x = self._float()
    a = x.abs()
    inv = a > 1
    a1 = inv.where(1 / a, a)
    red = a1 > 0.41421356237309503
    y = red.where((a1 - 1) / (a1 + 1), a1)
    y2, p, term = y * y, None, y
    for k in range(8):
      c = term * ((-1) ** k / (2 * k + 1))
      p = c if p is None else p + c
      term = term * y2
    r = red.where(p + math.pi / 4, p)
    r = inv.where(math.pi / 2 - r, r)
    return x.sign() * r
  def asin(self): return _asin(self._float())
  def acos(self): return math.pi / 2 - self.asin()
  def lerp(self, end, weight): return self + (end - self) * weight
  def copysign(self, other):
    Tensor = tensor_type()
    o = other if isinstance(other, Tensor) else Tensor(float(other), device=self.device)
    neg = (o < 0) | ((o == 0) & ((1 / o._float()) < 0))   # -0.0 counts as negative
    return neg.where(-self.abs(), self.abs())
  def fmod(self, x): return self - self.div(x, rounding_mode="trunc") * x   # C's fmod: sign of the dividend
  def logaddexp(self, x):
    m = self.maximum(x).detach()
    m = (m.abs() == math.inf).where(0, m)   # shift by 0 at +-inf: logaddexp(-inf, -inf) is -inf, not nan
    return m + ((self - m).exp() + (x - m).exp()).log()
  def polyN(self, coeffs):
    """Horner evaluation of coeffs[0]*x^(n-1) + ... + coeffs[-1]."""
    r = self.zeros_like() + coeffs[0]
    for c in coeffs[1:]: r = r * self + c
    return r
  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    Tensor = tensor_type()
    if not isinstance(other, Tensor): other = Tensor(other, device=self.device)
    # infinities are close only to themselves (inf - inf is nan, never <= tol); nans only to nans, with equal_nan
    finite = self.isfinite() & other.isfinite() & ((self - other).abs() <= atol + rtol * other.abs())
    ok = finite | ((self.isinf() | other.isinf()) & (self == other))
    return ok | (self.isnan() & other.isnan()) if equal_nan else ok
  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

def _asin(x):
  """asin(x) = atan(x / sqrt(1 - x^2)); |x| = 1 gives +-inf inside atan -> +-pi/2, |x| > 1 gives nan through the sqrt."""
  return (x / (1 - x * x).sqrt()).atan()
