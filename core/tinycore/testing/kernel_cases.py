"""A shared table of small kernels that exercise a renderer: dtypes (half, bf16, fp8, ints, f64), reductions, matmuls,
movement, bitcasts and transcendentals. Backend tests render/compile each (`Tensor.schedule()[-1].ast`)."""
from __future__ import annotations
from typing import Callable
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes

def kernel_cases(device: str, skip: tuple[str, ...] = ()) -> dict[str, Callable[[], Tensor]]:
  def E(shape, dt=dtypes.float32): return Tensor.empty(*shape, dtype=dt, device=device)
  cases = {
    "add_f32": lambda: E((4, 5)) + E((4, 5)),
    "half": lambda: (E((16,), dtypes.float16) * 2 + E((16,), dtypes.float16)).exp2(),
    "bf16": lambda: (E((16,), dtypes.bfloat16) * 2).sqrt().cast(dtypes.float16),
    "fp8": lambda: (E((16,), dtypes.fp8e4m3).cast(dtypes.float32) * 3).cast(dtypes.fp8e5m2),
    "int_divmod": lambda: (E((16,), dtypes.int32) // E((16,), dtypes.int32)) % 3,
    "int8": lambda: E((8,), dtypes.int8) * 3 + E((8,), dtypes.uint8).cast(dtypes.int8),
    "int64_shift": lambda: (E((8,), dtypes.int64) << 3) ^ E((8,), dtypes.int64),
    "where_bool": lambda: (E((16,)) < 2).where(E((16,)), 0),
    "f64_exp": lambda: E((8,), dtypes.float64).exp2().max(),
    "sum": lambda: E((32, 33)).sum(1),
    "max0": lambda: E((32, 33)).max(0),
    "matmul": lambda: E((16, 32)) @ E((32, 8)),
    "hmatmul": lambda: E((16, 32), dtypes.float16) @ E((32, 8), dtypes.float16),
    "pad_permute": lambda: E((3, 4)).pad(((1, 1), (0, 2))).permute(1, 0) + 1,
    "bitcast": lambda: E((8,)).bitcast(dtypes.int32) + 1,
    "transcendental": lambda: E((8,)).sin() + E((8,)).log2() + E((8,)).sqrt(),
  }
  return {k: v for k, v in cases.items() if k not in skip}
