"""The shared-memory GEMM (codegen/opt_smem.py) is capabilities, not NVIDIA code: a renderer without asynchronous
copies or matrix loads gets synchronous LDS staging (plain copies between two barriers) with fragments gathered by
its own TensorCore layouts. Shown here on AMD's RDNA3 WMMA (wave32, A/B replicated across lanes) in the emulator, with
`shared_staging` switched on for the test: AMD's renderers don't render DEFINE_LOCAL yet, so it is off there."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.codegen import get_program
from tinycore.emulator import EmulatedRenderer, serialize
from tinycore.emulator.interp import Interpreter
from tinycore.uop import Ops

@pytest.mark.needs_device
@pytest.mark.parametrize("arch", ["gfx1100"])
def test_rdna3_wmma_through_lds_in_the_emulator(registry, arch):
  amd = pytest.importorskip("tinycore_amd")
  from tinycore_amd.renderer_hip import HIPRenderer
  from tinycore_amd.emulator import model
  from tinycore.helpers import DEV
  DEV.value = f"EMU+AMD::{arch}"
  base = HIPRenderer(arch)
  assert not base.shared_staging and not base.async_copy and amd
  base.shared_staging = True
  ren, m = EmulatedRenderer(base, model("AMD", arch)), model("AMD", arch)
  rng = np.random.default_rng(0)
  a, b = rng.integers(-3, 4, (128, 64)).astype(np.float16), rng.integers(-3, 4, (64, 128)).astype(np.float16)
  p = get_program((Tensor.empty(128, 64, dtype=dtypes.half) @ Tensor.empty(64, 128, dtype=dtypes.half)).schedule()[-1].ast, ren)
  assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops) and any(u.op is Ops.WMMA for u in p.uops)
  assert sum(u.op is Ops.BARRIER for u in p.uops) == 2 and not any(u.op is Ops.STORE and u.arg is not None for u in p.uops)
  out = np.zeros((128, 128), np.float16)
  name, nodes = serialize.decode(serialize.decode_bytes(p.src))
  Interpreter(nodes, m, name).run((out, a, b), p.global_size, p.local_size, ())
  np.testing.assert_array_equal(out.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32))
