"""An out-of-tree backend (tests/fixtures/thirdparty_backend, distribution tinycore-toy) adds device TOY through hooks alone."""
import importlib.metadata, importlib.util, os, sys
import pytest
from tinycore import plugins
from tinycore.device import Device

SRC = os.path.join(os.path.dirname(__file__), "fixtures", "thirdparty_backend")
HAVE_PIPELINE = importlib.util.find_spec("tinycore.tensor") is not None and importlib.util.find_spec("tinycore_cpu.device") is not None

def _installed() -> bool:
  try: return importlib.metadata.distribution("tinycore-toy") is not None
  except importlib.metadata.PackageNotFoundError: return False

@pytest.fixture
def toy(registry, fake_dist):
  if not _installed(): fake_dist("tinycore-toy", "toy", "tinycore_toy.plugin", src_dir=SRC)   # pip-installed by .ci/run; else made to look installed
  return registry

def test_toy_is_discovered_and_registered(toy):
  rec = {r.name: r for r in plugins.discover()}["toy"]
  assert rec.dist == "tinycore-toy" and rec.status == "listed"
  assert toy.find_device("TOY")[1] is rec and rec.status == "loaded"
  assert Device.spec_for("TOY")[0].renderer == "C"
  assert [r["device"] for _, rows in plugins.call("tinycore_smi", device="TOY") for r in rows] == ["TOY"]

def test_toy_never_default_over_cpu(toy):
  toy.load_all()
  infos = {i.name: i for i, _ in toy.devices().values()}
  assert infos["TOY"].priority < infos.get("CPU", infos["TOY"]).priority or "CPU" not in infos

@pytest.mark.skipif(not HAVE_PIPELINE, reason="the CPU runtime or the Tensor frontend is not in this tree yet")
def test_toy_runs_a_real_computation(toy):
  import numpy as np
  from tinycore import Tensor
  stats = sys.modules["tinycore_toy.plugin"].stats if "tinycore_toy.plugin" in sys.modules else None
  out = (Tensor([1., 2., 3.], device="TOY") * 2 + 1).numpy()
  np.testing.assert_allclose(out, [3., 5., 7.])
  stats = sys.modules["tinycore_toy.plugin"].stats
  assert stats["opened"] >= 1 and stats["alloc"] >= 1   # its own allocator carried the buffers
