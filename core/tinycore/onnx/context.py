"""What a handler sees besides its inputs: the opset, the device, and conversions between static (numpy) values and Tensors."""
from __future__ import annotations
from typing import Any, Callable
import numpy as np
from tinycore.dtype import dtypes, DType
from tinycore.onnx.registry import UnsupportedOpError

# ONNX TensorProto.DataType -> tinycore dtype (the ones tinycore computes in)
ONNX_DTYPES: dict[int, DType] = {1: dtypes.float32, 2: dtypes.uint8, 3: dtypes.int8, 4: dtypes.uint16, 5: dtypes.int16, 6: dtypes.int32,
                                 7: dtypes.int64, 9: dtypes.bool, 10: dtypes.float16, 11: dtypes.float64, 12: dtypes.uint32,
                                 13: dtypes.uint64, 16: dtypes.bfloat16, 17: dtypes.fp8e4m3, 19: dtypes.fp8e5m2}

_ML_DTYPES = {"bfloat16": dtypes.bfloat16, "float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2}

def onnx_dtype(code: int, what: str = "dtype") -> DType:
  if code not in ONNX_DTYPES: raise UnsupportedOpError(f"{what}: ONNX data type {code} is not supported by tinycore.onnx")
  return ONNX_DTYPES[code]

class OpContext:
  def __init__(self, opset: int, device: str, run_graph: Callable[..., list], node_name: str = "", n_outputs: int = 1,
               scope=None, const_cache: dict | None = None):
    self.opset, self.device, self.run_graph, self.node_name, self.n_outputs = opset, device, run_graph, node_name, n_outputs
    self.scope = scope   # the values visible to a subgraph (If/Loop bodies read outer names)
    self.const_cache = const_cache if const_cache is not None else {}

  def tensor(self, x) -> Any:
    """A Tensor for compute, whether x is already one or a static numpy value."""
    from tinycore.tensor import Tensor
    if x is None or isinstance(x, Tensor): return x
    from tinycore.onnx.dynamic import is_sym, sym_tensor
    if is_sym(x): return sym_tensor(x, self)
    arr = np.asarray(x)
    if arr.dtype == np.float64 and not isinstance(x, np.ndarray): arr = arr.astype(np.float32)
    if arr.dtype.name in _ML_DTYPES:   # bfloat16/float8 constants (ml_dtypes arrays): uploaded as their exact float32 widening
      key = (arr.dtype.str, arr.shape, arr.tobytes())
      if key not in self.const_cache:
        self.const_cache[key] = Tensor(arr.astype(np.float32), device=self.device).cast(_ML_DTYPES[arr.dtype.name]).realize()
      return self.const_cache[key]
    # one realized buffer per distinct static value, made on the first call: a TinyJit capture (a later call) then sees
    # only kernels reading existing buffers; an upload made inside the capture would not be replayed
    key = (arr.dtype.str, arr.shape, arr.tobytes())
    if key not in self.const_cache:
      self.const_cache[key] = Tensor(np.require(arr, requirements='C'), device=self.device).realize()   # require keeps 0-d 0-d
    return self.const_cache[key]

  def array(self, x) -> np.ndarray:
    """The concrete value of x (realizes a Tensor: only for inputs that decide shapes, which ONNX allows to be computed)."""
    from tinycore.tensor import Tensor
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)

  def ints(self, x) -> list:
    """Sizes/axes as ints; symbolic sizes (dynamic axes) stay UOps."""
    from tinycore.onnx.dynamic import is_sym, norm_sint
    if is_sym(x): return [norm_sint(v) for v in x.reshape(-1)]
    return [int(v) for v in self.array(x).reshape(-1)]
  def floats(self, x) -> list[float]: return [float(v) for v in self.array(x).reshape(-1)]
  def scalar(self, x) -> Any:
    from tinycore.onnx.dynamic import is_sym, norm_sint
    if is_sym(x): return norm_sint(x.reshape(-1)[0])
    return self.array(x).reshape(-1)[0].item()
