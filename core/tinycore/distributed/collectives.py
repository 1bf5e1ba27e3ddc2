"""Collectives on Tensors. Each realizes its input, makes a fresh output buffer and runs the engine as one item of the
schedule runner (engine/run.py's run_items), so TinyJit captures it like a kernel and replays it on later calls.

Shapes follow torch.distributed's tensor forms: allgather concatenates along axis 0 in rank order, reduce_scatter
splits axis 0 into world_size equal parts and returns this rank's reduced part."""
from __future__ import annotations
import time
from typing import Callable
from tinycore.device import Buffer
from tinycore.dtype import DType, dtypes, to_dtype
from tinycore.helpers import all_int, prod
from tinycore.tensor import Tensor
from tinycore.uop import UOp, Ops
from tinycore.engine.run import ExecItem, run_items
from tinycore.distributed.engine import REDUCE_OPS, CollectiveError
from tinycore.distributed.group import get_engine, world_size, rank

class CollectiveRunner:
  """An ExecItem runner that calls the engine on (out, in) buffers; `name` shows in DEBUG=2 output."""
  def __init__(self, name: str, fn: Callable[..., None]): self.name, self.fn = name, fn
  def __call__(self, bufs: list[Buffer], var_vals, wait=False) -> float | None:
    st = time.perf_counter()
    self.fn(*bufs)
    return time.perf_counter() - st if wait else None

def _run(name: str, fn: Callable[..., None], bufs: list[Buffer]) -> None:
  run_items([ExecItem(CollectiveRunner(name, fn), bufs, {})], {})

def _input(x: Tensor, what: str) -> tuple[Buffer, str, tuple[int, ...]]:
  if not isinstance(x, Tensor): raise TypeError(f"{what} takes a Tensor, got {type(x).__name__}")
  if isinstance(x.device, tuple): raise CollectiveError(f"{what} takes a tensor on one device, got one sharded over {x.device}")
  shape = x.shape
  if not all_int(shape): raise CollectiveError(f"{what} needs a concrete shape, got {shape}")
  return x._buffer(), x.device, shape   # type: ignore[return-value]   # all_int checked; a realized tensor: its own buffer, no copy

def _output(shape: tuple[int, ...], dtype: DType, device: str) -> tuple[Tensor, Buffer]:
  buf = Buffer(device, prod(shape), dtype)
  return Tensor(UOp(Ops.BUFFER, dtype, (), buf).reshape(shape), requires_grad=False), buf

def _check_op(op: str, x: Tensor) -> str:
  if op not in REDUCE_OPS: raise ValueError(f"unknown reduce op {op!r}; expected one of {', '.join(REDUCE_OPS)}")
  if op == "mean" and not dtypes.is_float(x.dtype): raise CollectiveError(f"op 'mean' needs a float tensor, got {x.dtype}; use 'sum'")
  return op

def _peer(r: int, what: str) -> int:
  if type(r) is not int or not 0 <= r < world_size(): raise ValueError(f"{what} must be a rank in 0..{world_size() - 1}, got {r!r}")
  return r

def allreduce(x: Tensor, op: str = "sum") -> Tensor:
  """The elementwise `op` (sum, mean, max, min) of `x` over every rank; every rank gets the result."""
  op = _check_op(op, x)
  inp, dev, shape = _input(x, "allreduce")
  eng = get_engine(dev)
  out, obuf = _output(shape, x.dtype, dev)
  _run(f"allreduce_{op}", lambda o, i: eng.allreduce(o, i, op), [obuf, inp])
  return out

def allgather(x: Tensor) -> Tensor:
  """Every rank's `x`, concatenated along axis 0 in rank order (a 0-d `x` gives shape (world_size,))."""
  inp, dev, shape = _input(x, "allgather")
  eng = get_engine(dev)
  out, obuf = _output((eng.world_size * shape[0], *shape[1:]) if shape else (eng.world_size,), x.dtype, dev)
  _run("allgather", eng.allgather, [obuf, inp])
  return out

def reduce_scatter(x: Tensor, op: str = "sum") -> Tensor:
  """Reduce `x` over every rank, then split axis 0 into world_size parts: this rank gets part `rank()`."""
  op = _check_op(op, x)
  inp, dev, shape = _input(x, "reduce_scatter")
  eng = get_engine(dev)
  if not shape or shape[0] % eng.world_size:
    raise CollectiveError(f"reduce_scatter needs axis 0 divisible by the world size {eng.world_size}, got shape {shape}")
  out, obuf = _output((shape[0] // eng.world_size, *shape[1:]), x.dtype, dev)
  _run(f"reduce_scatter_{op}", lambda o, i: eng.reduce_scatter(o, i, op), [obuf, inp])
  return out

def broadcast(x: Tensor, root: int = 0) -> Tensor:
  """Rank `root`'s `x` on every rank (the others' `x` gives only shape, dtype and device, and must match it)."""
  inp, dev, shape = _input(x, "broadcast")
  eng = get_engine(dev)
  root = _peer(root, "broadcast root")
  out, obuf = _output(shape, x.dtype, dev)
  _run("broadcast", lambda o, i: eng.broadcast(o, i, root), [obuf, inp])
  return out

def send(x: Tensor, dst: int, tag: int = 0) -> None:
  """Send `x` to rank `dst`, which must `recv` the same shape and dtype with the same tag."""
  inp, dev, _ = _input(x, "send")
  eng = get_engine(dev)
  dst = _peer(dst, "send destination")
  if dst == eng.rank: raise ValueError(f"rank {dst} can't send to itself")
  _run("send", lambda i: eng.send(i, dst, tag), [inp])

def recv(shape: tuple[int, ...], src: int, dtype: DType | str = dtypes.float32, device: str | None = None, tag: int = 0) -> Tensor:
  """A tensor of `shape` and `dtype` received from rank `src` (which `send`s it with the same tag)."""
  from tinycore.device import Device
  dev = Device.canonicalize(device) if device is not None else Device.DEFAULT
  eng = get_engine(dev)
  src = _peer(src, "recv source")
  if src == eng.rank: raise ValueError(f"rank {src} can't receive from itself")
  if not all(type(s) is int and s >= 0 for s in shape): raise ValueError(f"recv needs a shape of non-negative ints, got {shape!r}")
  out, obuf = _output(tuple(shape), to_dtype(dtype), dev)
  _run("recv", lambda o: eng.recv(o, src, tag), [obuf])
  return out

def barrier(device: str | None = None) -> None:
  """Wait until every rank reaches this call (or the timeout passes)."""
  from tinycore.device import Device
  get_engine(device or Device.DEFAULT).barrier()

__all__ = ["allreduce", "allgather", "reduce_scatter", "broadcast", "send", "recv", "barrier", "rank", "world_size"]
