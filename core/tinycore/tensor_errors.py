"""The exceptions Tensor ops raise for bad arguments. tinygrad raises RuntimeError where Python convention says ValueError or
TypeError; each class here is both, so `except RuntimeError` (tinygrad code) and `except ValueError` (ours, numpy's) catch it."""

class ShapeError(ValueError, RuntimeError):
  """Shapes that don't fit together: matmul, einsum, permute, reshape, gather/scatter, conv windows."""

class ArgumentError(ValueError, RuntimeError):
  """An argument outside what the op accepts: a rounding mode, a reduce name, a repeated dim, a negative step."""

class DTypeError(TypeError, RuntimeError):
  """An op asked of a dtype it doesn't support: shifts of floats, scatter of a different dtype, int ** negative."""

class UnsupportedModeError(ValueError, NotImplementedError):
  """A mode string the op doesn't know (torch raises NotImplementedError for pad's)."""

class ShapeEntryError(TypeError, ValueError):
  """A shape entry that isn't a size (a tuple, a float): TypeError by Python's rules, ValueError by tinygrad's."""
