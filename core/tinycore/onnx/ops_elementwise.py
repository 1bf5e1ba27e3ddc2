"""Elementwise and math ops: arithmetic with numpy broadcasting, comparisons, logic, activations, Cast."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.onnx.registry import op, UnsupportedOpError
from tinycore.onnx.context import onnx_dtype

def _binary(fn):
  def handler(ctx, ins, attrs):
    a, b = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    return fn(a, b)
  return handler

def _same_dtype(a, b):
  # ONNX binary ops take equal input types; a Python scalar promotion must not widen the result
  return a, b.cast(a.dtype) if b.dtype != a.dtype else b

def _div(a, b):
  a, b = _same_dtype(a, b)
  return a.div(b, rounding_mode="trunc") if dtypes.is_int(a.dtype) else a / b

def _pow(a, b):
  # the result has the base's type (an int base with a float exponent computes in float, then casts back)
  if dtypes.is_int(a.dtype) and dtypes.is_float(b.dtype): return a.cast(b.dtype).pow(b).cast(a.dtype)
  return a.pow(b.cast(a.dtype)) if dtypes.is_float(a.dtype) else a.pow(b.cast(a.dtype))

op("Add")(_binary(lambda a, b: a + b))
op("Sub")(_binary(lambda a, b: a - b))
op("Mul")(_binary(lambda a, b: a * b))
op("Div")(_binary(_div))
op("Pow")(_binary(_pow))
op("Equal")(_binary(lambda a, b: a == b))
op("Less")(_binary(lambda a, b: a < b))
op("Greater")(_binary(lambda a, b: a > b))
op("LessOrEqual")(_binary(lambda a, b: a <= b))
op("GreaterOrEqual")(_binary(lambda a, b: a >= b))
op("And")(_binary(lambda a, b: a & b))
op("Or")(_binary(lambda a, b: a | b))
op("Xor")(_binary(lambda a, b: a ^ b))
op("BitwiseAnd")(_binary(lambda a, b: a.bitwise_and(b)))
op("BitwiseOr")(_binary(lambda a, b: a.bitwise_or(b)))
op("BitwiseXor")(_binary(lambda a, b: a.bitwise_xor(b)))

@op("Mod")
def mod(ctx, ins, attrs):
  a, b = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  if attrs.get("fmod", 0): return a.fmod(b)
  r = a.mod(b)
  if not dtypes.is_float(r.dtype): return r
  # floats, numpy's (and ONNX's) edge cases: a zero result takes the divisor's sign; a finite x over an infinite divisor
  # is x when their signs agree (or x is 0), else the divisor
  r = (r == 0).where(b.sign() * 0.0, r).cast(r.dtype)
  agree = (a == 0) | ((a < 0) == (b < 0))
  return (b.isinf() & ~a.isinf() & ~a.isnan()).where(agree.where(a, b), r)

@op("BitShift")
def bitshift(ctx, ins, attrs):
  a, b = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  # a shift by a negative amount or by the width or more is undefined in C: ONNX gives 0 (left) and the sign fill (right)
  out_of_range = (b < 0) | (b >= a.dtype.itemsize * 8)
  if attrs["direction"] == "LEFT": return out_of_range.where(0, a.lshift(b.maximum(0))).cast(a.dtype)
  fill = (a < 0).where(-1, 0).cast(a.dtype) if dtypes.is_int(a.dtype) and not dtypes.is_unsigned(a.dtype) else a.zeros_like()
  return out_of_range.where(fill, a.rshift(b.maximum(0))).cast(a.dtype)

_UNARY = {
  "Neg": lambda x: -x, "Abs": lambda x: x.abs(), "Sqrt": lambda x: x.sqrt(), "Exp": lambda x: x.exp(), "Log": lambda x: x.log(),
  "Reciprocal": lambda x: x.reciprocal(), "Floor": lambda x: x.floor(), "Ceil": lambda x: x.ceil(), "Round": lambda x: x.round(),
  "Sign": lambda x: x.sign(), "Relu": lambda x: x.relu(), "Sigmoid": lambda x: x.sigmoid(), "Tanh": lambda x: x.tanh(),
  "Erf": lambda x: x.erf(), "Sin": lambda x: x.sin(), "Cos": lambda x: x.cos(), "Tan": lambda x: x.tan(), "Asin": lambda x: x.asin(),
  "Acos": lambda x: x.acos(), "Atan": lambda x: x.atan(), "Sinh": lambda x: x.sinh(), "Cosh": lambda x: x.cosh(),
  "Asinh": lambda x: x.asinh(), "Acosh": lambda x: x.acosh(), "Atanh": lambda x: x.atanh(), "Softplus": lambda x: x.softplus(),
  "Softsign": lambda x: x.softsign(), "Not": lambda x: x.logical_not(), "BitwiseNot": lambda x: x.bitwise_not(),
  "IsNaN": lambda x: x.isnan(), "Mish": lambda x: x.mish(), "Identity": lambda x: x,
}

def _unary(fn):
  def handler(ctx, ins, attrs): return fn(ctx.tensor(ins[0]))
  return handler

for _name, _fn in _UNARY.items(): op(_name)(_unary(_fn))

@op("IsInf")
def isinf(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  return x.isinf(detect_positive=bool(attrs.get("detect_positive", 1)), detect_negative=bool(attrs.get("detect_negative", 1)))

@op("LeakyRelu")
def leaky_relu(ctx, ins, attrs): return ctx.tensor(ins[0]).leaky_relu(attrs.get("alpha", 0.01))

@op("Elu")
def elu(ctx, ins, attrs): return ctx.tensor(ins[0]).elu(attrs.get("alpha", 1.0))

@op("Selu")
def selu(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  alpha, gamma = attrs.get("alpha", 1.67326319217681884765625), attrs.get("gamma", 1.05070102214813232421875)
  return gamma * (x > 0).where(x, alpha * (x.exp() - 1))

@op("Celu")
def celu(ctx, ins, attrs): return ctx.tensor(ins[0]).celu(attrs.get("alpha", 1.0))

@op("ThresholdedRelu")
def thresholded_relu(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  return (x > attrs.get("alpha", 1.0)).where(x, 0)

@op("HardSigmoid")
def hard_sigmoid(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  return (attrs.get("alpha", 0.2) * x + attrs.get("beta", 0.5)).clip(0, 1)

@op("HardSwish")
def hard_swish(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  return x * (x / 6 + 0.5).clip(0, 1)

@op("Swish", since=24)
def swish(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  return x * (x * attrs.get("alpha", 1.0)).sigmoid()

@op("Gelu")
def gelu(ctx, ins, attrs): return ctx.tensor(ins[0]).gelu(approximate=attrs.get("approximate", "none"))

@op("PRelu")
def prelu(ctx, ins, attrs):
  x, slope = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  return (x < 0).where(x * slope, x)

@op("Shrink")
def shrink(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  lambd, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
  return (x < -lambd).where(x + bias, (x > lambd).where(x - bias, 0)).cast(x.dtype)

@op("Clip")
def clip(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  if ctx.opset < 11: lo, hi = attrs.get("min"), attrs.get("max")
  else:
    lo = ctx.tensor(ins[1]) if len(ins) > 1 and ins[1] is not None else None
    hi = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
  if lo is not None: x = x.maximum(lo).cast(x.dtype)
  if hi is not None: x = x.minimum(hi).cast(x.dtype)
  return x

def _variadic(fn):
  def handler(ctx, ins, attrs):
    ts = [ctx.tensor(x) for x in ins if x is not None]
    out = ts[0]
    for t in ts[1:]: out = fn(out, t)
    return out
  return handler

op("Max")(_variadic(lambda a, b: a.maximum(b)))
op("Min")(_variadic(lambda a, b: a.minimum(b)))
op("Sum")(_variadic(lambda a, b: a + b))

@op("Mean")
def mean(ctx, ins, attrs):
  ts = [ctx.tensor(x) for x in ins if x is not None]
  return _variadic(lambda a, b: a + b)(ctx, ts, attrs) / len(ts)

@op("Where")
def where(ctx, ins, attrs):
  c, a, b = (ctx.tensor(x) for x in ins)
  return c.cast(dtypes.bool).where(a, b)

@op("Cast")
def cast(ctx, ins, attrs):
  return _cast_to(ctx.tensor(ins[0]), onnx_dtype(attrs["to"], "Cast"), bool(attrs.get("saturate", 1)))

def _cast_to(x, to, saturate: bool):
  if dtypes.is_float(x.dtype) and dtypes.is_int(to) and not dtypes.is_float(to):
    x = x.trunc()   # float -> int truncates toward zero, as in C
  if to in _FP8_OVERFLOW and dtypes.is_float(x.dtype):
    limit, over, inclusive = _FP8_OVERFLOW[to]
    if saturate:   # infinities saturate too, to the largest finite float8
      return x.isinf().where(x.sign() * _FP8_MAX[to], x).cast(to)
    # saturate=0: what rounds past the largest finite float8 is inf (E5M2) or NaN (E4M3FN has no inf), not the max
    big = (x.abs() >= limit) if inclusive else (x.abs() > limit)
    return big.where(x.sign() * over if over == float("inf") else over, x).cast(to)
  return x.cast(to)

# float8 type -> (the magnitude from which round-to-nearest-even leaves the finite range, the value it becomes, whether
# the boundary itself overflows): halfway between the max (57344 / 448) and the next power-of-two step, ties to even
_FP8_OVERFLOW = {dtypes.fp8e5m2: (59392.0, float("inf"), True), dtypes.fp8e4m3: (464.0, float("nan"), False)}
_FP8_MAX = {dtypes.fp8e5m2: 57344.0, dtypes.fp8e4m3: 448.0}

@op("CastLike")
def cast_like(ctx, ins, attrs):
  x, like = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  return _cast_to(x, like.dtype, bool(attrs.get("saturate", 1)))

@op("Dropout")
def dropout(ctx, ins, attrs):
  # inference: the identity, and a mask of all True when asked for
  x = ctx.tensor(ins[0])
  if len(ins) > 2 and ins[2] is not None and bool(ctx.scalar(ins[2])):
    raise UnsupportedOpError("Dropout with training_mode=True (tinycore.onnx runs inference graphs)")
  return x, x.ones_like().cast(dtypes.bool)
