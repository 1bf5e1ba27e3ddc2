"""fp8 casts agree bit for bit on every device, the emulator and the numpy reference: the C-family renderers share one
helper text (tinycore/renderer/fp8.py), the LLVM renderer and engine/numeric.py implement the same rounding. Checked
against torch's float8 casts, with the one intended difference (docs/compat.md): e5m2 saturates finite overflow."""
import numpy as np, pytest
from tinycore import Tensor, Context, Device, dtypes
from tinycore.engine.numeric import float_to_bits, bits_to_float
pytestmark = pytest.mark.needs_device

FP8 = {"fp8e4m3": dtypes.fp8e4m3, "fp8e5m2": dtypes.fp8e5m2}
MAX = {"fp8e4m3": 448.0, "fp8e5m2": 57344.0}

def _values(name: str) -> np.ndarray:
  """Every finite code's value, the midpoints between neighbours (ties go to the even code), just either side of them,
  both zeros, below the smallest subnormal, past the largest finite, infinities and NaN, each with both signs."""
  codes = bits_to_float(np.arange(128, dtype=np.uint8), FP8[name]).astype(np.float64)
  fin = codes[np.isfinite(codes)]
  mids = (fin[:-1] + fin[1:]) / 2
  extra = [0.0, 2.0 ** -20, MAX[name] * 1.01, MAX[name] * 1.2, 1e6, 3e38, np.inf, np.nan]
  pos = np.concatenate([fin, mids, np.nextafter(mids.astype(np.float32), 0), np.nextafter(mids.astype(np.float32), np.inf), extra])
  return np.concatenate([pos, -pos]).astype(np.float32)

def _roundtrip(x: np.ndarray, name: str) -> np.ndarray: return Tensor(x).cast(FP8[name]).cast(dtypes.float32).numpy()

def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
  np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
  ok = ~np.isnan(want)
  np.testing.assert_array_equal(got[ok], want[ok], err_msg=what)
  np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]), err_msg=f"{what}: sign of zero")

def _cant_run(dev: str, dt) -> str | None:
  try:
    with Context(DEV=dev): claimed = Device[Device.DEFAULT].renderer.claimed_dtypes
  except Exception as e: return f"{dev} is not available here: {e}"
  return None if claimed is None or dt in claimed else f"{dev} doesn't claim {dt.name}"

@pytest.mark.parametrize("name", FP8)
@pytest.mark.parametrize("dev", ["CPU", "CPU:LLVM", "CL", "EMU+NV", "EMU+METAL", "NV", "NV:PTX", "AMD:HIP", "METAL", "WEBGPU"])
def test_fp8_cast_matches_reference_on_every_device(dev, name):
  if (why := _cant_run(dev, FP8[name])) is not None: pytest.skip(why)
  x = _values(name)
  with Context(DEV=dev): got = _roundtrip(x, name)
  _same(got, bits_to_float(float_to_bits(x, FP8[name]), FP8[name]), f"{dev} {name} vs the numpy reference")
  with Context(DEV=dev, REFERENCE=1): _same(_roundtrip(x, name), got, f"REFERENCE=1 vs {dev}")

@pytest.mark.parametrize("name", FP8)
def test_fp8_reference_matches_torch_but_e5m2_saturates(name):
  torch = pytest.importorskip("torch")
  x = _values(name)
  ours = bits_to_float(float_to_bits(x, FP8[name]), FP8[name])
  theirs = torch.from_numpy(x).to(getattr(torch, {"fp8e4m3": "float8_e4m3fn", "fp8e5m2": "float8_e5m2"}[name])).float().numpy()
  # torch rounds e5m2 overflow like IEEE (to inf from 61440 up); tinycore saturates at 57344 like tinygrad and like
  # the devices' own conversions (PTX cvt .satfinite); inf itself stays inf
  over = np.isfinite(x) & (np.abs(x) > MAX[name])
  if name == "fp8e5m2":
    assert np.all(ours[over] == np.copysign(MAX[name], x[over])) and np.isinf(theirs[over & (np.abs(x) >= 61440)]).all()
    keep = ~over
  else: keep = np.ones_like(x, dtype=bool)
  _same(ours[keep], theirs[keep], f"{name} vs torch")
