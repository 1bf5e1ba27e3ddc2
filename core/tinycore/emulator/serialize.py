"""A linearized program as text: a flat node table (src as indices) pickled, zlib'd and base64'd.

DTypes travel by name, not pickled: a DType caches its hash, and the compile cache is shared between processes."""
from __future__ import annotations
import base64, io, pickle, zlib
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.uop import Ops

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
  """Programs come back from the on-disk compile cache, which other processes write: the only class a program may
  name is Ops, so a planted entry can't make unpickling call anything else."""
  def persistent_load(self, pid):
    try: return _dt(pid)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e: raise pickle.UnpicklingError(f"bad dtype {pid!r}") from e
  def find_class(self, module, name):
    if (module, name) == ("tinycore.uop", "Ops"): return Ops
    raise pickle.UnpicklingError(f"names {module}.{name}, which is not part of a UOp program")

def encode(name: str, uops: list) -> str:
  """uops: the program; sources outside it (a DEFINE_REG's REDUCE) are appended as non-executed nodes."""
  order, pos = list(uops), {u: i for i, u in enumerate(uops)}
  i = 0
  while i < len(order):
    for s in order[i].src:
      if s not in pos: pos[s] = len(order); order.append(s)
    i += 1
  # a node may appear twice (a value a program writer emits again in a second loop, as C redeclares it in a new
  # block): each source is its latest occurrence before the reader
  latest: dict = {}
  table = []
  for i, u in enumerate(order):
    table.append((u.op, u.dtype, tuple(latest.get(s, pos[s]) for s in u.src), u.arg))
    latest[u] = i
  f = io.BytesIO()
  _P(f, protocol=4).dump((name, len(uops), table))
  return MAGIC + base64.b64encode(zlib.compress(f.getvalue())).decode()

def decode_bytes(src: str) -> bytes:
  if not src.startswith(MAGIC): raise ValueError("not an emulator program (rendered by EmulatedRenderer?)")
  return zlib.decompress(base64.b64decode(src[len(MAGIC):]))

def decode(lib: bytes) -> tuple[str, list[Node]]:
  try:
    name, n, table = _U(io.BytesIO(lib)).load()
    nodes = [Node(op, dt, arg) for op, dt, _, arg in table]
    for nd, (op, dt, src, _) in zip(nodes, table):
      if not isinstance(op, Ops) or not isinstance(dt, DType) or not all(isinstance(j, int) and 0 <= j < len(nodes) for j in src):
        raise ValueError(f"node {op!r} {dt!r} with sources {src!r}")
      nd.src = tuple(nodes[j] for j in src)
    if not isinstance(name, str) or not isinstance(n, int) or not 0 <= n <= len(nodes): raise ValueError("bad header")
  except Exception as e:   # whatever the bytes are, the caller gets one clear error, never a half-built program
    raise ValueError(f"not a valid emulator program ({type(e).__name__}: {e})") from None
  return name, nodes[:n]
