"""Builders for the loader tests: valid files of each format (the starting point of every mutation) and hand-crafted
torch checkpoints whose pickle names torch globals without torch installed."""
from __future__ import annotations
import io, json, pickle, struct, zipfile
from collections import OrderedDict
import numpy as np

def safetensors_bytes(header: dict, data: bytes) -> bytes:
  """A safetensors file with exactly this header (no validation: the tests write broken ones on purpose)."""
  hj = json.dumps(header).encode()
  return struct.pack("<Q", len(hj)) + hj + data

def valid_safetensors() -> tuple[bytes, dict[str, np.ndarray]]:
  arrs = {"w": np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5, "b": np.array([1, -2, 3], np.int16), "m": np.array([[True, False]]),
          "h": np.linspace(-2, 2, 6).astype(np.float16)}
  names = {np.float32: "F32", np.int16: "I16", np.bool_: "BOOL", np.float16: "F16"}
  header, off, data = {}, 0, b""
  for k, a in arrs.items():
    raw = a.tobytes()
    header[k] = {"dtype": names[a.dtype.type], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
    data += raw; off += len(raw)
  return safetensors_bytes(header, data), arrs

def valid_gguf(path: str) -> dict[str, np.ndarray]:
  """A GGUF with metadata of every value kind and F32/F16/Q8_0/Q4_0 tensors; returns the float32 arrays written."""
  from tinycore.llm.gguf_write import gguf_write
  rng = np.random.default_rng(0)
  arrs = {"f32": rng.standard_normal((2, 8)).astype(np.float32), "f16": rng.standard_normal((3, 4)).astype(np.float32),
          "q8": rng.standard_normal((2, 32)).astype(np.float32), "q4": rng.standard_normal((1, 64)).astype(np.float32)}
  kinds = {"f32": "F32", "f16": "F16", "q8": "Q8_0", "q4": "Q4_0"}
  kv = {"general.name": "fuzz", "general.alignment": 32, "some.list": [1, 2, 3], "some.strs": ["a", "bc"], "some.float": 0.5}
  gguf_write(path, kv, {k: (a, kinds[k]) for k, a in arrs.items()})
  return arrs

class Global:
  """Pickled as GLOBAL module.name, whether or not that module exists here."""
  def __init__(self, module: str, name: str): self.module, self.name = module, name

class Reduce:
  """Pickled as fn(*args) (REDUCE), with `state` applied by BUILD when given."""
  def __init__(self, fn, args: tuple, state=None): self.fn, self.args, self.state = fn, args, state

class Storage:
  """A persistent id ('storage', <type global>, key, 'cpu', numel): the archive's data/<key>."""
  def __init__(self, key: str, type_name: str, numel: int): self.key, self.type_name, self.numel = key, type_name, numel

class _Pickler(pickle._Pickler):
  dispatch = pickle._Pickler.dispatch.copy()
  def persistent_id(self, obj):
    return ("storage", Global("torch", obj.type_name), obj.key, "cpu", obj.numel) if isinstance(obj, Storage) else None
  def save_crafted_global(self, obj):
    self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
  def save_crafted_reduce(self, obj):
    self.save(obj.fn); self.save(obj.args); self.write(pickle.REDUCE)
    if obj.state is not None: self.save(obj.state); self.write(pickle.BUILD)
  dispatch[Global] = save_crafted_global
  dispatch[Reduce] = save_crafted_reduce

def tensor_v2(storage: Storage, offset, size, stride) -> Reduce:
  return Reduce(Global("torch._utils", "_rebuild_tensor_v2"), (storage, offset, tuple(size), tuple(stride), False, OrderedDict()))

def crafted_pth(obj, storages: dict[str, bytes]) -> bytes:
  """A torch.save-style zip: archive/data.pkl holding `obj` (with Global/Reduce/Storage markers), archive/data/<key>."""
  f = io.BytesIO()
  _Pickler(f, protocol=2).dump(obj)
  out = io.BytesIO()
  with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", f.getvalue())
    z.writestr("archive/byteorder", "little"); z.writestr("archive/version", "3\n")
    for k, v in storages.items(): z.writestr(f"archive/data/{k}", v)
  return out.getvalue()

def valid_pth() -> tuple[bytes, dict[str, np.ndarray]]:
  """A state dict of a float32 matrix, its transpose (a strided view of the same storage) and an int64 vector."""
  w = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5
  ids = np.array([3, -1, 7], np.int64)
  sw, si = Storage("0", "FloatStorage", 6), Storage("1", "LongStorage", 3)
  obj = OrderedDict([("w", tensor_v2(sw, 0, (2, 3), (3, 1))), ("wt", tensor_v2(sw, 0, (3, 2), (1, 3))), ("ids", tensor_v2(si, 0, (3,), (1,)))])
  return crafted_pth(obj, {"0": w.tobytes(), "1": ids.tobytes()}), {"w": w, "wt": w.T, "ids": ids}
