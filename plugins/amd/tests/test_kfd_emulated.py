"""The KFD runtime on the mock driver with the real RDNA ISA emulator (tinycore_amd.isa): our compilers' machine code for
gfx1100 and gfx1201, from both renderers, executed instruction by instruction and compared with numpy. The conformance
kit runs the same way in .ci/lanes/amd-kfd.sh."""
import numpy as np
import pytest
from tinycore_amd.compiler import find_clang, find_lld

isa = pytest.importorskip("tinycore_amd.isa", reason="this tree has no RDNA ISA emulator (tinycore_amd.isa)")
pytestmark = [pytest.mark.needs_device, pytest.mark.skipif(find_lld() is None, reason="no ld.lld to link code objects")]
ARCHS = ["gfx1100", "gfx1201"]

@pytest.mark.parametrize("arch", ARCHS)
def test_blit_kernel_copies_on_the_emulator(arch):
  from tinycore_amd.kfd.device import KFDAllocator, KFDGPU, gpu_nodes
  from tinycore_amd.mockgpu.driver import MockKFD
  m = MockKFD((arch,), dispatch=isa.dispatch)
  g = KFDGPU(m, gpu_nodes(m)[0])
  al = KFDAllocator(g)
  for n in (1, 17, 4096 + 5):
    x = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    p = al.alloc(n)
    al._copyin(p, memoryview(x))
    out = np.zeros(n, np.uint8)
    al._copyout(memoryview(out), p)
    np.testing.assert_array_equal(out, x)
  assert m.cp.coverage.dispatches == 6

@pytest.fixture
def mock_dev(registry, monkeypatch):
  from tinycore.device import Device
  from tinycore_amd.mockgpu import driver
  monkeypatch.setenv("MOCKGPU", "1")
  monkeypatch.setattr(driver.shared_mock().cp, "dispatch", isa.dispatch)
  yield
  Device.reset()

def _renderers(arch):
  return ["LLVM"] + (["HIP"] if find_clang(arch) else [])

@pytest.mark.parametrize("arch", ARCHS)
def test_elementwise_and_reduce(mock_dev, arch):
  from tinycore import Tensor
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((7, 33)).astype(np.float32), rng.standard_normal((7, 33)).astype(np.float32)
  for ren in _renderers(arch):
    dev = f"KFD+AMD:{ren}:{arch}"
    ta, tb = Tensor(a, device=dev), Tensor(b, device=dev)
    np.testing.assert_allclose(((ta + tb) * 2 - ta.exp()).numpy(), (a + b) * 2 - np.exp(a), rtol=1e-5, atol=1e-5, err_msg=dev)
    np.testing.assert_allclose(ta.sum(axis=1).numpy(), a.sum(axis=1), rtol=1e-5, atol=1e-5, err_msg=dev)
    np.testing.assert_array_equal((ta > tb).where(ta, tb).max().numpy(), np.maximum(a, b).max())

@pytest.mark.parametrize("arch", ARCHS)
def test_matmul(mock_dev, arch):
  from tinycore import Tensor
  rng = np.random.default_rng(1)
  a, b = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
  for ren in _renderers(arch):
    dev = f"KFD+AMD:{ren}:{arch}"
    np.testing.assert_allclose((Tensor(a, device=dev) @ Tensor(b, device=dev)).numpy(), a @ b, rtol=1e-4, atol=1e-4, err_msg=dev)

@pytest.mark.needs_device
def test_two_mock_gpus_in_one_process(mock_dev):
  """One mock machine, a gfx1100 and a gfx1201 node: two KFD GPUs with their own queues, data moved between them."""
  from tinycore import Tensor
  from tinycore.device import Device
  a, b = Device["KFD+AMD::gfx1100"], Device["KFD+AMD::gfx1201"]
  assert a.gpu is not b.gpu and a.gpu.kfd == b.gpu.kfd and a.gpu.node["gpu_id"] != b.gpu.node["gpu_id"]
  assert a.gpu.queue.event_id == b.gpu.queue.event_id   # one signal event (and event page) per process
  x = np.arange(300, dtype=np.int32)
  np.testing.assert_array_equal(Tensor(x, device="KFD+AMD::gfx1100").to("KFD+AMD::gfx1201").numpy(), x)
