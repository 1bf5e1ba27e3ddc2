"""DEV=NULL+<DEVICE>: kernels go through the device's real renderer and compiler, nothing runs, and NULL is never a default."""
import numpy as np, pytest
from tinycore import Tensor, Context, GlobalCounters, Device
from tinycore.compiler import CompileError
from tinycore.errors import ResultUnavailableError
pytestmark = pytest.mark.needs_device

def _ops():
  a = Tensor(np.ones((16, 32), np.float32))
  return [(a @ a.T + 1).relu().sum(1), a.exp().max(), (a.half() * 3).float()]

@pytest.mark.parametrize("dev", ["NULL+CPU", "NULL+CPU:LLVM"])
def test_null_compiles_and_runs_nothing(dev):
  with Context(DEV=dev):
    GlobalCounters.reset()
    Tensor.realize(*_ops())
    assert GlobalCounters.kernel_count >= 3
    back = Tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_equal(back.numpy(), np.arange(4))   # data copied in and not handed to a kernel reads back as it is
    # the add never ran: reading its "result" is an error naming the devices that would compute it, never zeros
    with pytest.raises(ResultUnavailableError, match="compile-only") as e: (back + 1).numpy()
    assert "DEV=EMU+CPU" in str(e.value) and "DEV=CPU" in str(e.value)
    for read in (lambda t: t.tolist(), lambda t: t.sum().item()):
      with pytest.raises(ResultUnavailableError, match="compile-only"): read(Tensor(np.ones(3, np.float32)) * 2)

def test_null_uses_the_real_compiler(monkeypatch):
  """A compiler failure surfaces in NULL mode exactly as it would on the device."""
  with Context(DEV="NULL+CPU"):
    dev = Device[Device.DEFAULT]
    def broken(src): raise CompileError("compiler says no", src, "error: injected")
    monkeypatch.setattr(dev.compiler, "compile", broken)
    monkeypatch.setattr(dev.compiler, "cachekey", None)
    with pytest.raises(CompileError, match="compiler says no"): (Tensor(np.ones(7, np.float32)) * 5.5).realize()

@pytest.mark.parametrize("dev", ["NULL+NV", "NULL+NV:PTX:sm_90", "NULL+AMD::gfx1100"])
def test_null_gpu_toolchains(dev):
  """NVRTC/ptxas and llvmlite's amdgcn backend compile real kernels without a GPU (skipped where the toolchain is absent)."""
  try:
    with Context(DEV=dev):
      Device[Device.DEFAULT]
      GlobalCounters.reset()
      Tensor.realize(*_ops())
  except Exception as e:
    if "not available" in str(e) or "unknown device" in str(e) or "not found" in str(e): pytest.skip(f"{dev}: {e}")
    raise
  assert GlobalCounters.kernel_count >= 3

def test_null_is_never_the_default():
  assert not Device.DEFAULT.startswith("NULL")

def test_kit_compile_also(monkeypatch):
  """The kit's --compile-also: every kernel that runs is also compiled for the NULL targets, and their compile errors
  fail the run (the conformance kit uses this to compile its kernels for several AMD archs and renderers in CI)."""
  from tinycore.engine import run
  from tinycore.testing.plugin import _compile_also
  monkeypatch.setattr(run, "capture_hooks", [])
  _compile_also(["NULL+CPU:LLVM"])
  x = (Tensor(np.arange(9, dtype=np.float32)) * 2.5 - 1).exp()
  np.testing.assert_allclose(x.numpy(), np.exp(np.arange(9) * 2.5 - 1), rtol=1e-6)
  elsewhere = [r for k, r in run._runners.items() if k[0] == "NULL+CPU:LLVM"]
  assert elsewhere and all(r.prg.lib for r in elsewhere)   # compiled for real by llvmlite
  dev = Device["NULL+CPU:LLVM"]
  def broken(src): raise CompileError("second target says no", src, "error: injected")
  monkeypatch.setattr(dev.compiler, "compile", broken)
  monkeypatch.setattr(dev.compiler, "cachekey", None)
  with pytest.raises(CompileError, match="second target says no"): (Tensor(np.ones(5, np.float32)) * 7.25 + 3).realize()
