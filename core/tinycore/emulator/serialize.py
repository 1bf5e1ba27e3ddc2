"""A linearized program as text: a flat node table (src as indices) pickled, zlib'd and base64'd.

DTypes travel by name, not pickled: a DType caches its hash, and the compile cache is shared between processes."""
from __future__ import annotations
import base64, enum, io, pickle, sys, zlib
from tinycore.dtype import DType, PtrDType, dtypes

MAGIC = "tcemu1:"

class Node:
  """A decoded UOp: the interpreter only reads op, dtype, src, arg."""
  __slots__ = ("op", "dtype", "src", "arg")
  def __init__(self, op, dtype, arg): self.op, self.dtype, self.src, self.arg = op, dtype, (), arg
  def __repr__(self): return f"Node({self.op.name}, {self.dtype}, arg={self.arg!r})"

def _dt_key(dt: DType) -> tuple:
  if isinstance(dt, PtrDType): return ("p", dt.base.scalar().name, dt.base.count, dt.addrspace, dt.size)
  return ("d", dt.scalar().name, dt.count)
_BY = {v.name: v for v in vars(dtypes).values() if isinstance(v, DType)}
def _dt(key: tuple) -> DType:
  base = _BY[key[1]].vec(key[2]) if key[2] > 1 else _BY[key[1]]
  return base.ptr(key[4], key[3]) if key[0] == "p" else base

class _P(pickle.Pickler):
  def persistent_id(self, obj): return _dt_key(obj) if isinstance(obj, DType) else None
class _U(pickle.Unpickler):
  """Programs come back from the shared compile cache, a file another process (or a hostile user) may have written: the
  only globals resolved are tinycore's enums (Ops), which pickle calls with a value, so no other code can run."""
  def persistent_load(self, pid):
    try: return _dt(pid)
    except (KeyError, IndexError, TypeError, AttributeError) as e: raise pickle.UnpicklingError(f"bad dtype key {pid!r}: {e}") from None
  def find_class(self, module: str, name: str):
    obj = getattr(sys.modules.get(module), name, None) if module.startswith("tinycore.") else None
    if isinstance(obj, type) and issubclass(obj, enum.Enum): return obj
    raise pickle.UnpicklingError(f"emulator program refers to {module}.{name}: only tinycore enums are allowed")

def encode(name: str, uops: list) -> str:
  """uops: the program; sources outside it (a DEFINE_REG's REDUCE) are appended as non-executed nodes."""
  order, pos = list(uops), {u: i for i, u in enumerate(uops)}
  i = 0
  while i < len(order):
    for s in order[i].src:
      if s not in pos: pos[s] = len(order); order.append(s)
    i += 1
  table = [(u.op, u.dtype, tuple(pos[s] for s in u.src), u.arg) for u in order]
  f = io.BytesIO()
  _P(f, protocol=4).dump((name, len(uops), table))
  return MAGIC + base64.b64encode(zlib.compress(f.getvalue())).decode()

def decode_bytes(src: str) -> bytes:
  if not src.startswith(MAGIC): raise ValueError("not an emulator program (rendered by EmulatedRenderer?)")
  return zlib.decompress(base64.b64decode(src[len(MAGIC):]))

def decode(lib: bytes) -> tuple[str, list[Node]]:
  name, n, table = _U(io.BytesIO(lib)).load()
  nodes = [Node(op, dt, arg) for op, dt, _, arg in table]
  for nd, (_, _, src, _) in zip(nodes, table): nd.src = tuple(nodes[j] for j in src)
  return name, nodes[:n]
