"""Model state: walking objects for their Tensors, loading a state dict into a model, and the checkpoint formats
(safetensors here; torch zip checkpoints and GGUF in their own modules, re-exported)."""
from __future__ import annotations
import json, mmap, os, stat, struct, warnings
from typing import Any
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes
from tinycore.helpers import prod
from tinycore.fileio import atomic_write
from tinycore.nn.file_errors import CorruptFileError, UnsupportedFileError

# ---- state dicts
def get_state_dict(obj: Any, prefix: str = "", tensor_type=Tensor) -> dict[str, Tensor]:
  """Every Tensor reachable from obj through attributes, dicts, lists and tuples, named by its path ('layers.0.weight')."""
  if isinstance(obj, tensor_type): return {prefix.strip("."): obj}
  if hasattr(obj, "_asdict"): return get_state_dict(obj._asdict(), prefix, tensor_type)  # namedtuple
  items: Any
  if isinstance(obj, dict): items = obj.items()
  elif isinstance(obj, (list, tuple)): items = enumerate(obj)
  elif hasattr(obj, "__dict__"): items = vars(obj).items()
  else: return {}
  out: dict[str, Tensor] = {}
  for k, v in items: out.update(get_state_dict(v, f"{prefix}{k}.", tensor_type))
  return out

def get_parameters(obj: Any) -> list[Tensor]:
  """The Tensors of obj, each once (an optimizer's parameter list)."""
  return list({id(t): t for t in get_state_dict(obj).values()}.values())

def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = False, consume: bool = False,
                    realize: bool = True) -> None:
  """Copy state_dict's tensors into model's. strict: every model tensor must be present. Shapes must match exactly; dtypes are
  cast to the model's."""
  model_sd = get_state_dict(model)
  if strict and (missing := [k for k in model_sd if k not in state_dict]):
    raise KeyError(f"load_state_dict: {len(missing)} model tensor(s) missing from the state dict: "
                   f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
  if (unused := [k for k in state_dict if k not in model_sd]):
    warnings.warn(f"load_state_dict: {len(unused)} state dict tensor(s) not in the model: "
                  f"{', '.join(unused[:10])}{' ...' if len(unused) > 10 else ''}")
  loaded = []
  for k, v in model_sd.items():
    if k not in state_dict:
      if verbose: print(f"load_state_dict: {k} not in state dict, left as is")
      continue
    src = state_dict[k]
    if not isinstance(src, Tensor): src = Tensor(src, device=v.device)
    if tuple(src.shape) != tuple(v.shape):
      raise ValueError(f"load_state_dict: shape mismatch for {k!r}: model has {tuple(v.shape)}, state dict has {tuple(src.shape)}")
    src = src.to(v.device).cast(v.dtype)
    # TODO: v.assign(src) (copy into v's own buffer, like torch) once a buffer-to-buffer copy kernel lowers; until then v takes src's data
    v.replace(src)
    loaded.append(v)
    if consume: del state_dict[k]
  if realize and loaded: Tensor.realize(*loaded)

# ---- raw bytes -> Tensor (every dtype, including those numpy lacks: bfloat16 and fp8 are copied as bits)
def tensor_from_bytes(data, dtype: DType, shape: tuple, device: str | None = None) -> Tensor:
  """A Tensor of `shape` and `dtype` holding a copy of `data`, which must be exactly prod(shape) * itemsize bytes."""
  from tinycore.device import Buffer
  from tinycore.uop import UOp, Ops
  from tinycore.tensor import _canon_device
  shape = tuple(shape)
  if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
    raise ValueError(f"tensor_from_bytes: shape {shape} must be non-negative integers")
  n, mv = prod(shape), memoryview(data).cast("B")
  if len(mv) != n * dtype.itemsize:
    raise ValueError(f"tensor_from_bytes: {len(mv)} bytes can't be a {dtype} tensor of shape {shape} ({n * dtype.itemsize} bytes)")
  buf = Buffer(_canon_device(device), n, dtype)  # type: ignore[arg-type]
  if n: buf.allocate().copyin(mv)
  return Tensor(UOp(Ops.BUFFER, dtype, (), buf).reshape(shape))

def tensor_bytes(t: Tensor) -> bytes:
  if t.numel() == 0: return b""
  # through numpy: Tensor.data() can't cast a memoryview to every format (half). bfloat16/fp8 (no numpy type) are read as the
  # realized buffer's raw bytes: a BITCAST to uint16 of a computed bfloat16 doesn't compile yet
  if t.dtype.fmt is not None: return t.numpy().tobytes()
  rt = t.contiguous().realize()
  return bytes(rt.uop.base.buffer.as_buffer())

# ---- safetensors: u64 header length, JSON header {name: {dtype, shape, data_offsets}}, then the data
SAFE_DTYPES: dict[str, DType] = {"BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "U16": dtypes.uint16, "I16": dtypes.int16,
  "U32": dtypes.uint32, "I32": dtypes.int32, "U64": dtypes.uint64, "I64": dtypes.int64, "F16": dtypes.float16, "BF16": dtypes.bfloat16,
  "F32": dtypes.float32, "F64": dtypes.float64, "F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2}
_SAFE_NAMES = {v: k for k, v in SAFE_DTYPES.items()}

MAX_HEADER_BYTES = 100 << 20   # the safetensors format's own limit on the JSON header

def _is_count(x) -> bool: return isinstance(x, int) and not isinstance(x, bool) and x >= 0

def _open_bytes(fn) -> tuple[memoryview, str, Any]:
  """The file's bytes as a read-only memoryview (memory-mapped for paths), a name for errors, and what keeps it alive."""
  if isinstance(fn, Tensor): return memoryview(tensor_bytes(fn)).cast("B"), "<tensor>", None
  if isinstance(fn, (bytes, bytearray, memoryview)): return memoryview(fn).cast("B"), "<bytes>", None
  path = os.fspath(fn)
  # non-blocking, and only regular files: a FIFO or a device given as a model path would otherwise hang or stream forever
  fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
  try:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode): raise CorruptFileError(f"{path}: not a regular file (mode {stat.filemode(st.st_mode)})")
    if st.st_size == 0: return memoryview(b""), path, None
    mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
  finally: os.close(fd)
  return memoryview(mm), path, mm

def safe_load_metadata(fn) -> tuple[dict, int, memoryview]:
  """(header dict, data start offset, file bytes) of a safetensors file. Every entry is checked against the file before
  any tensor is touched: a known dtype, a shape of non-negative integers, data_offsets inside the data section that
  hold exactly shape*itemsize bytes, and no two tensors sharing bytes. Anything else is a CorruptFileError."""
  mv, name, _keep = _open_bytes(fn)
  if len(mv) < 8: raise CorruptFileError(f"{name}: truncated safetensors file: {len(mv)} bytes, need at least 8 for the header length (offset 0)")
  n = struct.unpack_from("<Q", mv, 0)[0]
  if n > len(mv) - 8: raise CorruptFileError(f"{name}: safetensors header length {n} at offset 0 runs past the end of the file ({len(mv)} bytes)")
  if n > MAX_HEADER_BYTES:
    raise CorruptFileError(f"{name}: safetensors header length {n} at offset 0 is over the format's {MAX_HEADER_BYTES}-byte limit")
  try: header = json.loads(bytes(mv[8:8 + n]))
  # ValueError: bad JSON, bad UTF-8, or an integer past Python's 4300-digit limit
  except ValueError as e: raise CorruptFileError(f"{name}: safetensors header at offset 8 is not valid JSON: {e}") from None
  except RecursionError: raise CorruptFileError(f"{name}: safetensors header at offset 8 nests too deeply to be a tensor table") from None
  if not isinstance(header, dict): raise CorruptFileError(f"{name}: safetensors header at offset 8 is not a JSON object")
  start, size = 8 + n, len(mv) - 8 - n
  spans = []
  for k, info in header.items():
    if k == "__metadata__":
      if not isinstance(info, dict): raise CorruptFileError(f"{name}: __metadata__ in the header (offset 8) is not a JSON object")
      continue
    def bad(field: str, why: str): return CorruptFileError(f"{name}: tensor {k!r} in the header (offset 8): {field} {why}")
    if not isinstance(info, dict): raise bad("entry", f"is {type(info).__name__}, not an object with dtype, shape and data_offsets")
    dt_name, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dt_name, str) or dt_name not in SAFE_DTYPES: raise bad("dtype", f"{dt_name!r} is not one of {', '.join(SAFE_DTYPES)}")
    if not isinstance(shape, list) or not all(_is_count(s) for s in shape): raise bad("shape", f"{shape!r} is not a list of non-negative integers")
    if not (isinstance(offs, list) and len(offs) == 2 and all(_is_count(o) for o in offs)):
      raise bad("data_offsets", f"{offs!r} is not [begin, end] in bytes")
    begin, end = offs
    if not begin <= end <= size:
      raise bad("data_offsets", f"[{begin}, {end}] run past the data (offset {start + end} > file size {len(mv)})" if end > size
                else f"[{begin}, {end}] end before they begin")
    if end - begin != (need := prod(shape) * SAFE_DTYPES[dt_name].itemsize):
      raise bad("data_offsets", f"[{begin}, {end}] at offset {start + begin} hold {end - begin} bytes, but {dt_name}{shape} needs {need}")
    if end > begin: spans.append((begin, end, k))
  spans.sort()
  for (b0, e0, k0), (b1, e1, k1) in zip(spans, spans[1:]):
    if b1 < e0: raise CorruptFileError(f"{name}: tensors {k0!r} [{b0}, {e0}] and {k1!r} [{b1}, {e1}] share bytes (offset {start + b1})")
  return header, start, mv

def safe_load(fn, device: str | None = None) -> dict[str, Tensor]:
  """Load a safetensors file (memory-mapped: each tensor is copied straight from the mapping to its device buffer)."""
  header, start, mv = safe_load_metadata(fn)
  out: dict[str, Tensor] = {}
  for k, info in header.items():
    if k == "__metadata__": continue
    b, e = info["data_offsets"]
    out[k] = tensor_from_bytes(mv[start + b:start + e], SAFE_DTYPES[info["dtype"]], tuple(info["shape"]), device)
  return out

def safe_save(tensors: dict[str, Tensor], fn, metadata: dict[str, str] | None = None) -> None:
  """Write `tensors` as a safetensors file, atomically: readers see the old file or the whole new one."""
  header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
  blobs, off = [], 0
  for k, t in tensors.items():
    if t.dtype not in _SAFE_NAMES: raise TypeError(f"safe_save: tensor {k!r} has dtype {t.dtype}, which safetensors can't store")
    data = tensor_bytes(t)
    header[k] = {"dtype": _SAFE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
    blobs.append(data); off += len(data)
  hj = json.dumps(header, separators=(",", ":")).encode()
  hj += b" " * (-len(hj) % 8)  # the data starts 8-byte aligned
  def write(f):
    f.write(struct.pack("<Q", len(hj))); f.write(hj)
    for d in blobs: f.write(d)
  # a failure part-way (full disk, file size limit, a kill) leaves an existing checkpoint as it was
  atomic_write(fn, write)

def torch_load(fn) -> dict[str, Any]:
  """A PyTorch checkpoint's state dict (nn/torch_load.py), imported on first use: its zipfile/pickle machinery is
  ~1 MiB resident in every process that imports nn, the LLM runner among them, most of which never read one."""
  from tinycore.nn.torch_load import torch_load as load
  return load(fn)

from tinycore.nn.gguf import gguf_load  # noqa: E402
__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_load", "safe_save", "safe_load_metadata", "torch_load", "gguf_load",
           "tensor_from_bytes", "CorruptFileError", "UnsupportedFileError"]
