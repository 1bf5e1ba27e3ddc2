"""Load an ONNX file into numpy-backed weights and a graph, checking every size against the bytes that back it.

A model file is hostile input: raw_data lengths must match the declared shape and dtype, external data must stay inside
the model's folder (no absolute paths, no `..`, no symlinks out) and inside the file it names, and nothing the file
contains is ever executed. External weights are memory-mapped, not read."""
from __future__ import annotations
import os
from dataclasses import dataclass, field
from typing import Any
import numpy as np
from tinycore.nn.file_errors import CorruptFileError, UnsupportedFileError

# ONNX TensorProto.DataType -> numpy dtype (bfloat16/float8 are read as their raw bits and converted by the runner)
ONNX_TO_NP: dict[int, type] = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
                               9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64, 16: np.uint16}
BFLOAT16 = 16
MAX_DIMS, MAX_ELEMENTS = 64, 1 << 40

def require_onnx():
  try:
    import onnx
  except ImportError as e:
    from tinycore.errors import MissingDependencyError
    raise MissingDependencyError("tinycore.onnx needs the `onnx` package to parse models", module="onnx",
                                 install="pip install 'tinycore[onnx]'") from e
  return onnx

@dataclass
class LoadedModel:
  graph: Any                              # onnx.GraphProto (shape-inferred)
  opset: int                              # default-domain opset version
  weights: dict[str, np.ndarray] = field(default_factory=dict)
  path: str | None = None

def _shape_of(t, where: str) -> tuple[int, ...]:
  dims = tuple(int(d) for d in t.dims)
  if len(dims) > MAX_DIMS or any(d < 0 for d in dims): raise CorruptFileError(f"{where}: tensor {t.name!r} has invalid dims {dims}")
  n = 1
  for d in dims:
    n *= d
    if n > MAX_ELEMENTS: raise CorruptFileError(f"{where}: tensor {t.name!r} dims {dims} are too large")
  return dims

def _external_location(t, base_dir: str, where: str) -> tuple[str, int, int | None]:
  info = {e.key: e.value for e in t.external_data}
  loc = info.get("location", "")
  if not loc or os.path.isabs(loc) or any(p == ".." for p in loc.replace("\\", "/").split("/")):
    raise CorruptFileError(f"{where}: tensor {t.name!r} external data location {loc!r} must be a relative path inside the model's folder")
  full = os.path.realpath(os.path.join(base_dir, loc))
  root = os.path.realpath(base_dir)
  if os.path.commonpath([full, root]) != root:
    raise CorruptFileError(f"{where}: tensor {t.name!r} external data {loc!r} resolves outside the model's folder")
  try: off, length = int(info.get("offset", 0)), (int(info["length"]) if "length" in info else None)
  except ValueError as e: raise CorruptFileError(f"{where}: tensor {t.name!r} has a non-integer external offset/length") from e
  if off < 0 or (length is not None and length < 0): raise CorruptFileError(f"{where}: tensor {t.name!r} has a negative external offset/length")
  return full, off, length

def tensor_to_numpy(t, base_dir: str | None = None, where: str = "model") -> np.ndarray:
  """One TensorProto as a numpy array (memory-mapped when external), validated against its declared shape."""
  if t.data_type not in ONNX_TO_NP:
    raise UnsupportedFileError(f"{where}: tensor {t.name!r} has ONNX data type {t.data_type}, which tinycore.onnx doesn't read")
  dims, npdt = _shape_of(t, where), np.dtype(ONNX_TO_NP[t.data_type])
  count = int(np.prod(dims, dtype=np.int64)) if dims else 1
  need = count * npdt.itemsize
  if t.data_location == 1:   # EXTERNAL
    if base_dir is None: raise CorruptFileError(f"{where}: tensor {t.name!r} uses external data but the model was not loaded from a file")
    full, off, length = _external_location(t, base_dir, where)
    if not os.path.isfile(full): raise CorruptFileError(f"{where}: tensor {t.name!r} external data file {full!r} does not exist")
    size = os.path.getsize(full)
    if length is not None and length != need:
      raise CorruptFileError(f"{where}: tensor {t.name!r} external length {length} != {need} bytes for dims {dims} of {npdt}")
    if off + need > size: raise CorruptFileError(f"{where}: tensor {t.name!r} needs bytes {off}..{off + need} of {full!r}, which has {size}")
    if need == 0: return np.zeros(dims, npdt)
    return _widen_bfloat16(np.memmap(full, dtype=npdt.newbyteorder("<"), mode="r", offset=off, shape=dims), t.data_type)
  if t.HasField("raw_data"):
    if len(t.raw_data) != need:
      raise CorruptFileError(f"{where}: tensor {t.name!r} raw_data has {len(t.raw_data)} bytes, dims {dims} of {npdt} need {need}")
    return _widen_bfloat16(np.frombuffer(t.raw_data, dtype=npdt.newbyteorder("<")).reshape(dims), t.data_type)
  # typed fields: float_data / int32_data (also packs 8/16-bit ints, bool, float16 bits) / int64_data / double_data / uint64_data
  via: Any
  if t.data_type == 1: src, via = t.float_data, np.float32
  elif t.data_type == 11: src, via = t.double_data, np.float64
  elif t.data_type == 7: src, via = t.int64_data, np.int64
  elif t.data_type in (12, 13): src, via = t.uint64_data, np.uint64
  else: src, via = t.int32_data, np.int32
  if len(src) != count: raise CorruptFileError(f"{where}: tensor {t.name!r} has {len(src)} values, dims {dims} need {count}")
  arr = np.asarray(src, dtype=via)
  if t.data_type in (10, BFLOAT16): arr = arr.astype(np.uint16).view(npdt)   # 16-bit floats arrive as their bit patterns
  return _widen_bfloat16(arr.astype(npdt).reshape(dims), t.data_type)

def _widen_bfloat16(arr: np.ndarray, data_type: int) -> np.ndarray:
  # numpy has no bfloat16: its bits are the top half of a float32, exact in float32
  return (arr.astype(np.uint32) << 16).view(np.float32) if data_type == BFLOAT16 else arr

def load(path_or_bytes, infer_shapes: bool = True) -> LoadedModel:
  onnx = require_onnx()
  from google.protobuf.message import DecodeError
  base_dir, path = None, None
  try:
    if isinstance(path_or_bytes, (bytes, bytearray)): model = onnx.load_model_from_string(bytes(path_or_bytes))
    elif hasattr(path_or_bytes, "graph"): model = path_or_bytes
    else:
      path = os.fspath(path_or_bytes)
      if not os.path.isfile(path): raise FileNotFoundError(f"no ONNX model at {path!r}")
      base_dir = os.path.dirname(os.path.abspath(path))
      # external data stays on disk: we map it ourselves after checking each location
      model = onnx.load(path, load_external_data=False)
  except DecodeError as e: raise CorruptFileError(f"{path or 'model'}: not a valid ONNX protobuf ({e})") from e
  where = path or "model"
  opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
  if opset is None: raise CorruptFileError(f"{where}: no default-domain opset_import")
  if infer_shapes:
    try: model = onnx.shape_inference.infer_shapes(model)
    except Exception: pass   # inference is a convenience for declared shapes; the runner works from real shapes
  weights = {t.name: tensor_to_numpy(t, base_dir, where) for t in model.graph.initializer}
  return LoadedModel(model.graph, int(opset), weights, path)
