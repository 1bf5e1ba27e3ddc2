"""torch_load: read a torch.save zip checkpoint (.pt/.pth) without importing torch. The pickle is read by an unpickler that
only builds containers and tensors: any other global in the file is refused, so a checkpoint can't run code."""
from __future__ import annotations
import io, os, pickle, zipfile
from collections import OrderedDict
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes
from tinycore.helpers import prod

_STORAGES: dict[str, DType] = {"FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64, "HalfStorage": dtypes.float16,
  "BFloat16Storage": dtypes.bfloat16, "LongStorage": dtypes.int64, "IntStorage": dtypes.int32, "ShortStorage": dtypes.int16,
  "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8, "BoolStorage": dtypes.bool, "Float8_e4m3fnStorage": dtypes.fp8e4m3,
  "Float8_e5m2Storage": dtypes.fp8e5m2}
_TORCH_DTYPES: dict[str, DType] = {"float32": dtypes.float32, "float": dtypes.float32, "float64": dtypes.float64, "double": dtypes.float64,
  "float16": dtypes.float16, "half": dtypes.float16, "bfloat16": dtypes.bfloat16, "int64": dtypes.int64, "long": dtypes.int64,
  "int32": dtypes.int32, "int": dtypes.int32, "int16": dtypes.int16, "int8": dtypes.int8, "uint8": dtypes.uint8, "bool": dtypes.bool,
  "float8_e4m3fn": dtypes.fp8e4m3, "float8_e5m2": dtypes.fp8e5m2, "uint16": dtypes.uint16, "uint32": dtypes.uint32, "uint64": dtypes.uint64}

class _StorageType:
  def __init__(self, dtype: DType | None): self.dtype = dtype
class _DType:
  def __init__(self, dtype: DType): self.dtype = dtype
class _Storage:
  """One torch storage: raw bytes from the archive, typed when a tensor first views it."""
  def __init__(self, data: bytes, dtype: DType | None): self.data, self.dtype = data, dtype

def _rebuild_tensor(storage: _Storage, offset: int, size, stride, *_a, **_k) -> Tensor:
  dt = storage.dtype
  if dt is None: raise pickle.UnpicklingError("untyped storage with no dtype")
  size, stride, n = tuple(size), tuple(stride), prod(size)
  item = dt.itemsize
  raw = np.frombuffer(storage.data, dtype=np.uint8)
  if n and (offset + sum((s - 1) * st for s, st in zip(size, stride)) + 1) * item > len(raw):
    raise pickle.UnpicklingError(f"tensor of shape {size} at storage offset {offset} needs more than the storage's {len(raw)} bytes")
  # view as same-width unsigned ints so bfloat16/fp8 survive bit-exact, then apply the (maybe non-contiguous) strides
  bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[item]
  words = raw[:len(raw) // item * item].view(bits)
  arr = np.lib.stride_tricks.as_strided(words[offset:], shape=size, strides=tuple(s * item for s in stride)) if n else np.zeros(size, bits)
  from tinycore.nn.state import tensor_from_bytes
  return tensor_from_bytes(np.ascontiguousarray(arr).view(np.uint8).reshape(-1), dt, size)

def _rebuild_parameter(data, requires_grad=False, *_a): return data
def _rebuild_from_type(fn, _type, args, _state): return fn(*args)

class _Unpickler(pickle.Unpickler):
  def __init__(self, f, load_storage):
    super().__init__(f); self._load_storage = load_storage
  def find_class(self, module: str, name: str):
    if module == "collections" and name == "OrderedDict": return OrderedDict
    if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"): return _rebuild_tensor
    if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"): return _rebuild_parameter
    if module == "torch._tensor" and name == "_rebuild_from_type_v2": return _rebuild_from_type
    if module == "torch" and name in _STORAGES: return _StorageType(_STORAGES[name])
    if module in ("torch", "torch.storage") and name in ("UntypedStorage", "TypedStorage"): return _StorageType(None)
    if module == "torch" and name in _TORCH_DTYPES: return _DType(_TORCH_DTYPES[name])
    if module == "torch.nn.parameter" and name == "Parameter": return _rebuild_parameter
    if module == "torch" and name == "Tensor": return Tensor
    raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only tensors and plain containers are allowed in a checkpoint")
  def persistent_load(self, pid):
    # ('storage', storage type, key, location, numel)
    if not (isinstance(pid, tuple) and pid and pid[0] == "storage"): raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
    st, key = pid[1], str(pid[2])
    dt = st.dtype if isinstance(st, _StorageType) else st.dtype if isinstance(st, _DType) else None
    return self._load_storage(key, dt)

def _tensor_bytes(t: Tensor) -> bytes:
  from tinycore.nn.state import tensor_bytes
  return tensor_bytes(t)

def torch_load(fn) -> dict[str, Any]:
  """Load a torch.save zip checkpoint into tinycore Tensors (on the default device)."""
  name = os.fspath(fn) if not isinstance(fn, (bytes, bytearray, Tensor)) else "<bytes>"
  src = io.BytesIO(_tensor_bytes(fn) if isinstance(fn, Tensor) else fn) if isinstance(fn, (bytes, bytearray, Tensor)) else name
  try: zf = zipfile.ZipFile(src)
  except zipfile.BadZipFile as e:
    from tinycore.nn.state import CorruptFileError
    size = os.path.getsize(name) if isinstance(src, str) else len(src.getbuffer())
    raise CorruptFileError(f"{name}: not a torch zip checkpoint ({e}); the zip directory should end at offset {size}") from None
  from tinycore.nn.state import CorruptFileError
  with zf:
    pkls = [n for n in zf.namelist() if n.endswith("data.pkl")]
    if not pkls: raise CorruptFileError(f"{name}: zip has no data.pkl, so it is not a torch checkpoint")
    prefix = pkls[0][:-len("data.pkl")]
    if (bo := prefix + "byteorder") in zf.namelist() and zf.read(bo).strip() != b"little":
      raise NotImplementedError(f"{name}: big-endian torch checkpoints are not supported")
    cache: dict[str, _Storage] = {}
    def load_storage(key: str, dt):
      if key not in cache:
        entry = f"{prefix}data/{key}"
        try: info = zf.getinfo(entry)
        except KeyError: raise CorruptFileError(f"{name}: storage {entry!r} is missing from the archive") from None
        try: cache[key] = _Storage(zf.read(entry), dt)
        except (zipfile.BadZipFile, EOFError, OSError) as e:
          raise CorruptFileError(f"{name}: storage {entry!r} at offset {info.header_offset} is corrupt or truncated: {e}") from None
      elif cache[key].dtype is None: cache[key].dtype = dt
      return cache[key]
    try:
      with zf.open(pkls[0]) as f: return _Unpickler(f, load_storage).load()
    except (zipfile.BadZipFile, EOFError) as e:
      raise CorruptFileError(f"{name}: {pkls[0]!r} at offset {zf.getinfo(pkls[0]).header_offset} is corrupt or truncated: {e}") from None
