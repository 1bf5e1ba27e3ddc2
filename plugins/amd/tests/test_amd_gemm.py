"""The shared-memory tensor-core GEMM (codegen/opt_smem.py, c_tile.py) on AMD, provable without a GPU, for both
renderers (HIP through clang, LLVM IR through llvmlite):
- EMU+AMD runs the staged kernels bit-exact against numpy (integer-valued inputs make every fp32 sum exact);
- the RDNA ISA emulator (tinycore_amd.isa) runs their machine code for gfx1100 (RDNA3 WMMA) and gfx1201 (RDNA4), tails
  included: a gated 16-byte store of the C tile must not write;
- the amdgcn assembly has the 128-bit LDS accesses, v_wmma, no scratch, and a bounded VGPR count."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.codegen import get_program
from tinycore.uop import Ops
from tinycore_amd.compiler import find_clang, find_lld
from tinycore_amd.renderer_hip import HIPRenderer

D = "EMU+AMD"
ARCHS = ("gfx1100", "gfx1201")

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = D

try: import llvmlite.binding  # noqa: F401
except ImportError: llvmlite = None

def renderer(kind: str, arch: str):
  if kind == "LLVM":
    if llvmlite is None: pytest.skip("llvmlite not installed")
    from tinycore_amd.renderer_llvm import AMDLLVMRenderer
    return AMDLLVMRenderer(arch)
  if find_clang(arch) is None: pytest.skip(f"no clang with the amdgcn target for {arch} (apt-get install clang-19)")
  return HIPRenderer(arch)

def ints(shape, seed, dt=np.float16):
  return np.random.default_rng(seed).integers(-3, 4, shape).astype(dt)

def staged_program(a_shape, b_shape, r, dt=dtypes.half):
  k = (Tensor.empty(*a_shape, dtype=dt) @ Tensor.empty(*b_shape, dtype=dt)).schedule()[-1].ast
  p = get_program(k, r)
  assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops), "the GEMM was not staged through LDS"
  return p

# ---- HIP: the C tile through LDS with a padded N tail (48 of a 64-wide tile): the chunks past N are gated stores
# whose index is clamped onto the last real chunk. The C renderer dropped that gate on vector stores, so on the ISA
# emulator the padding's zeros overwrote columns 40-47 (a sixth of test_matmul_half's outputs); EMU+AMD honors gates.
def test_hip_gated_vector_stores_keep_their_gate():
  r = HIPRenderer("gfx1100")
  assert r.staged_epilogue
  p = staged_program((64, 32), (32, 48), r)
  stores = [ln.strip() for ln in p.src.splitlines() if "*(tc__Float16_8*)(data0" in ln]
  assert len(stores) == 4 and all(s.startswith("if (") for s in stores), stores

def on_isa(t, r):
  if find_lld() is None: pytest.skip("no ld.lld: code objects cannot be linked (apt-get install lld-19)")
  from tinycore_amd.isa.run_tensor import realize_on_isa
  return realize_on_isa(t, r)

KINDS = ["LLVM", "HIP"]

@pytest.mark.needs_device
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shapes", [((64, 32), (32, 48)), ((37, 40), (40, 29))], ids=["n_tail", "m_n_k_tails"])
def test_isa_staged_half_gemm_bit_exact(shapes, kind, arch):
  """The staged GEMM's machine code on the RDNA ISA emulator: LDS panels, barriers, WMMA and the C tile through LDS."""
  (sa, sb), r = shapes, renderer(kind, arch)
  a, b = ints(sa, 1), ints(sb, 2)
  staged_program(sa, sb, r)
  out, rep = on_isa(Tensor(a) @ Tensor(b), r)
  np.testing.assert_array_equal(out, (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16))
  ops = rep.stats.opcodes
  assert any(o.startswith("v_wmma_f32_16x16x16_f16") for o in ops) and ops & {"s_barrier", "s_barrier_wait"}, ops   # RDNA4: signal, wait
