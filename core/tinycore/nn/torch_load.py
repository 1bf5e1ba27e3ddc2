"""torch_load: read a torch.save zip checkpoint (.pt/.pth) without importing torch. The pickle is read by an unpickler that
only builds containers and tensors: any other global in the file is refused, so a checkpoint can't run code."""
from __future__ import annotations
import io, pickle, pickletools, struct, zipfile, zlib
from collections import OrderedDict
from typing import Any
import numpy as np
from tinycore.dtype import DType, dtypes
from tinycore.helpers import prod
from tinycore.nn.file_errors import CorruptFileError, UnsupportedFileError

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
class _TensorClass:
  """Stands for torch.Tensor / torch.nn.Parameter where the pickle names the class (not callable: nothing is built from it)."""
class _Storage:
  """One torch storage: raw bytes from the archive, typed when a tensor first views it."""
  def __init__(self, data: bytes, dtype: DType | None): self.data, self.dtype = data, dtype

class _TensorRef(int):
  """What the unpickler builds for a tensor: an index into the loader's list of tensors. An int subclass without
  attributes, so a BUILD opcode in the pickle can't set fields on it (on a Tensor it could replace its graph); the
  result is walked afterwards and each ref replaced by its Tensor."""
  __slots__ = ()

MAX_DIMS = 64

def _is_count(x) -> bool: return isinstance(x, int) and not isinstance(x, bool) and x >= 0

def _rebuild_tensor(tensors: list, storage, offset, size, stride, *_a, **_k) -> _TensorRef:
  """A tensor viewing `storage` from element `offset` with `size` and `stride` (in elements). Every field is checked:
  the view must lie inside the storage (negative strides or offsets would read before it)."""
  if not isinstance(storage, _Storage): raise pickle.UnpicklingError(f"a tensor's storage is {type(storage).__name__}, not a storage")
  dt = storage.dtype
  if dt is None: raise pickle.UnpicklingError("untyped storage with no dtype")
  if not (isinstance(size, (tuple, list)) and isinstance(stride, (tuple, list)) and len(size) == len(stride) <= MAX_DIMS):
    raise pickle.UnpicklingError(f"tensor size {size!r} and stride {stride!r} must be sequences of the same length (at most {MAX_DIMS})")
  if not (_is_count(offset) and all(map(_is_count, size)) and all(map(_is_count, stride))):
    raise pickle.UnpicklingError(f"tensor storage offset {offset!r}, size {size!r} and stride {stride!r} must be non-negative integers")
  size, stride, n, item = tuple(size), tuple(stride), prod(size), dt.itemsize
  words = len(storage.data) // item
  if n and offset + sum((s - 1) * st for s, st in zip(size, stride)) + 1 > words:
    raise pickle.UnpicklingError(f"tensor of shape {size} with stride {stride} at storage offset {offset} reaches past the storage's "
                                 f"{words} {dt} elements")
  if n * item > max(len(storage.data), 1 << 20) * 4096:   # only stride-0 views read one element many times; bound the expansion
    raise pickle.UnpicklingError(f"tensor of shape {size} would expand a {len(storage.data)}-byte storage to {n * item} bytes")
  # view as same-width unsigned ints so bfloat16/fp8 survive bit-exact, then apply the (maybe non-contiguous) strides
  bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[item]
  arr = np.lib.stride_tricks.as_strided(np.frombuffer(storage.data, np.uint8, words * item).view(bits)[offset:], shape=size,
                                        strides=tuple(s * item for s in stride), writeable=False) if n else np.zeros(size, bits)
  from tinycore.nn.state import tensor_from_bytes
  tensors.append(tensor_from_bytes(np.ascontiguousarray(arr).view(np.uint8).reshape(-1), dt, size))
  return _TensorRef(len(tensors) - 1)

def _rebuild_parameter(data, requires_grad=False, *_a):
  if not isinstance(data, _TensorRef): raise pickle.UnpicklingError(f"a parameter wraps {type(data).__name__}, not a tensor")
  return data

class _Unpickler(pickle.Unpickler):
  """Resolves only the globals a torch state dict uses, each to a checked stand-in: any other global (os.system,
  builtins.eval, torch functions) is refused, so no code named by the file runs."""
  def __init__(self, f, load_storage):
    super().__init__(f)
    self._load_storage, self.tensors = load_storage, []
    rebuild = lambda *a, **k: _rebuild_tensor(self.tensors, *a, **k)
    def rebuild_from_type(fn, _type, args, _state):
      if fn not in (rebuild, _rebuild_parameter) or not isinstance(args, tuple):
        raise pickle.UnpicklingError("_rebuild_from_type_v2 of something that isn't a tensor")
      return fn(*args)
    self._globals = {("torch._utils", "_rebuild_tensor_v2"): rebuild, ("torch._utils", "_rebuild_tensor"): rebuild,
      ("torch._utils", "_rebuild_parameter"): _rebuild_parameter, ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
      ("torch._tensor", "_rebuild_from_type_v2"): rebuild_from_type, ("collections", "OrderedDict"): OrderedDict,
      ("torch.nn.parameter", "Parameter"): _TensorClass, ("torch", "Tensor"): _TensorClass}
  def find_class(self, module: str, name: str):
    if (g := self._globals.get((module, name))) is not None: return g
    if module == "torch" and name in _STORAGES: return _StorageType(_STORAGES[name])
    if module in ("torch", "torch.storage") and name in ("UntypedStorage", "TypedStorage"): return _StorageType(None)
    if module == "torch" and name in _TORCH_DTYPES: return _DType(_TORCH_DTYPES[name])
    raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only tensors and plain containers are allowed in a checkpoint")
  def persistent_load(self, pid):
    # ('storage', storage type, key, location, numel)
    if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"): raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
    st, key = pid[1], pid[2]
    if not isinstance(key, (str, int)) or isinstance(key, bool): raise pickle.UnpicklingError(f"storage key {key!r} is not a name")
    dt = st.dtype if isinstance(st, (_StorageType, _DType)) else None
    return self._load_storage(str(key), dt)

_PLAIN = (str, bytes, int, float, bool, type(None))

def _resolve(obj, tensors: list, depth: int = 0):
  """The unpickled object with tensor refs replaced by Tensors; anything but containers, scalars and tensors is refused."""
  if depth > 100: raise pickle.UnpicklingError("containers nested more than 100 deep")
  if isinstance(obj, _TensorRef): return tensors[obj]
  if isinstance(obj, _PLAIN): return obj
  if type(obj) in (dict, OrderedDict):
    out = type(obj)((_resolve(k, tensors, depth + 1), _resolve(v, tensors, depth + 1)) for k, v in obj.items())
    if isinstance(md := getattr(obj, "_metadata", None), dict): out._metadata = _resolve(md, tensors, depth + 1)   # torch's state_dict versions
    return out
  if type(obj) in (list, tuple): return type(obj)(_resolve(v, tensors, depth + 1) for v in obj)
  raise pickle.UnpicklingError(f"a checkpoint may hold only tensors, containers and scalars, not {type(obj).__name__}")

def _read_entry(zf: zipfile.ZipFile, entry: str, name: str) -> bytes:
  """An archive member's bytes, refusing a compressed member that claims to inflate past deflate's ~1032:1 limit
  (a zip bomb would otherwise allocate its claimed size) and turning zip damage into CorruptFileError."""
  try: info = zf.getinfo(entry)
  except KeyError: raise CorruptFileError(f"{name}: {entry!r} is missing from the archive") from None
  if info.compress_type != zipfile.ZIP_STORED and info.file_size > 1100 * info.compress_size + 1024:
    raise CorruptFileError(f"{name}: {entry!r} at offset {info.header_offset} claims {info.file_size} bytes from {info.compress_size} compressed")
  try: return zf.read(entry)
  except (NotImplementedError, RuntimeError) as e: raise UnsupportedFileError(f"{name}: {entry!r}: {e}") from None   # odd compression, encryption
  except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as e:
    raise CorruptFileError(f"{name}: {entry!r} at offset {info.header_offset} is corrupt or truncated: {e}") from None

_MEMO_OPS = {"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}

def _check_pickle(pkl: bytes, name: str, entry: str) -> None:
  """Scan the pickle's opcodes before running it: the C unpickler sizes its memo by the largest index a PUT names, so one
  flipped byte (LONG_BINPUT 2^32-1) would make it allocate and clear tens of GB. Indices must stay below the opcode count."""
  try:
    ops = list(pickletools.genops(pkl))
    for op, arg, pos in ops:
      if op.name in _MEMO_OPS and not (isinstance(arg, int) and 0 <= arg <= len(ops)):
        raise CorruptFileError(f"{name}: {entry!r} byte {pos}: memo index {arg!r} of {op.name} is out of range")
  except CorruptFileError: raise
  except (ValueError, TypeError, IndexError, KeyError, struct.error, UnicodeDecodeError, OverflowError, EOFError) as e:
    raise CorruptFileError(f"{name}: {entry!r} is not a valid pickle: {type(e).__name__}: {e}") from None

def torch_load(fn) -> dict[str, Any]:
  """Load a torch.save zip checkpoint into tinycore Tensors (on the default device). A damaged or hostile file raises
  CorruptFileError (UnsupportedFileError for valid features tinycore lacks) naming the file and the entry."""
  from tinycore.nn.state import _open_bytes
  mv, name, keep = _open_bytes(fn)
  # a path was checked to be a regular file by _open_bytes; zipfile reads it itself (it needs a seekable file)
  try: zf = zipfile.ZipFile(name if keep is not None else io.BytesIO(mv))
  except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError, struct.error) as e:
    raise CorruptFileError(f"{name}: not a torch zip checkpoint ({e}); the zip directory should end at offset {len(mv)}") from None
  except NotImplementedError as e: raise UnsupportedFileError(f"{name}: a zip feature tinycore can't read: {e}") from None
  with zf:
    names = zf.namelist()
    pkls = [n for n in names if n.endswith("data.pkl")]
    if not pkls: raise CorruptFileError(f"{name}: zip has no data.pkl, so it is not a torch checkpoint")
    prefix = pkls[0][:-len("data.pkl")]
    if (bo := prefix + "byteorder") in names and _read_entry(zf, bo, name).strip() != b"little":
      raise UnsupportedFileError(f"{name}: big-endian torch checkpoints are not supported")
    cache: dict[str, _Storage] = {}
    def load_storage(key: str, dt):
      if key not in cache: cache[key] = _Storage(_read_entry(zf, f"{prefix}data/{key}", name), dt)
      elif cache[key].dtype is None: cache[key].dtype = dt
      return cache[key]
    pkl = _read_entry(zf, pkls[0], name)
    _check_pickle(pkl, name, pkls[0])
    try:
      up = _Unpickler(io.BytesIO(pkl), load_storage)
      return _resolve(up.load(), up.tensors)
    except CorruptFileError: raise
    # whatever else a malformed pickle makes the unpickler raise (bad opcodes, wrong argument types, deep nesting)
    except (pickle.UnpicklingError, ValueError, TypeError, AttributeError, IndexError, KeyError, EOFError, struct.error, RecursionError,
            OverflowError, MemoryError, UnicodeDecodeError) as e:
      raise CorruptFileError(f"{name}: {pkls[0]!r} is not a loadable torch state dict: {type(e).__name__}: {e}") from None
