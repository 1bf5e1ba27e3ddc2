"""The shared-memory tensor-core GEMM (codegen/opt_smem.py, c_tile.py) on AMD, provable without a GPU, for both
renderers (HIP through clang, LLVM IR through llvmlite):
- EMU+AMD runs the staged kernels bit-exact against numpy (integer-valued inputs make every fp32 sum exact);
- the RDNA ISA emulator (tinycore_amd.isa) runs their machine code for gfx1100 (RDNA3 WMMA) and gfx1201 (RDNA4), tails
  included: a gated 16-byte store of the C tile must not write;
- the amdgcn assembly has the 128-bit LDS accesses, v_wmma (v_mfma on CDNA's gfx942, wave64), no scratch, and a
  bounded VGPR count."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.codegen import get_program
from tinycore.uop import Ops
from _amd_tools import renderer, on_isa
from tinycore_amd.renderer_hip import HIPRenderer

D = "EMU+AMD"
ARCHS = ("gfx1100", "gfx1201")

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = D

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

@pytest.mark.needs_device
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shapes", [((128, 64), (64, 128)), ((100, 36), (36, 72))], ids=["whole_tiles", "tails"])
def test_isa_staged_fp32_gemm_bit_exact(shapes, kind, arch):
  """fp32 (no tensor core): opt_simt.py's FMA register tiles over the LDS panels, as machine code on the ISA emulator."""
  (sa, sb), r = shapes, renderer(kind, arch)
  a, b = ints(sa, 3, np.float32), ints(sb, 4, np.float32)
  staged_program(sa, sb, r, dtypes.float32)
  out, rep = on_isa(Tensor(a) @ Tensor(b), r)
  np.testing.assert_array_equal(out, a @ b)
  assert {"ds_load_b128", "ds_store_b128"} <= rep.stats.opcodes, rep.stats.opcodes

# ---- EMU+AMD: the UOp interpreter under AMD's lane layouts, with the LLVM renderer's (the default) capabilities
@pytest.mark.needs_device
@pytest.mark.parametrize("arch", ARCHS + ("gfx942",))
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.float32])
@pytest.mark.parametrize("case", ["square", "tails", "batched_epilogue", "transposed_b"])
def test_emu_staged_gemm_bit_exact(case, dt, arch):
  from tinycore.device import Device
  dev = f"EMU+AMD:LLVM:{arch}"
  npdt = np.float16 if dt == dtypes.half else np.float32
  sa, sb = {"square": ((128, 64), (64, 128)), "tails": ((37, 40), (40, 29)), "batched_epilogue": ((2, 64, 32), (2, 32, 64)),
            "transposed_b": ((64, 64), (64, 64))}[case]
  a, b, bias = ints(sa, 5, npdt), ints(sb, 6, npdt), ints(sb[-1:], 7, np.float32)
  ta, tb = Tensor(a, device=dev), Tensor(b.swapaxes(-1, -2).copy() if case == "transposed_b" else b, device=dev)
  if case == "transposed_b": tb = tb.transpose(-1, -2)
  out = ta @ tb
  ref = a.astype(np.float32) @ b.astype(np.float32)
  if case == "batched_epilogue": out, ref = (out.float() + Tensor(bias, device=dev)).relu(), np.maximum(ref + bias, 0)
  p = get_program(out.schedule()[-1].ast, Device[dev].renderer)
  assert any(u.op is Ops.DEFINE_LOCAL for u in p.uops) and (dt != dtypes.half or any(u.op is Ops.WMMA for u in p.uops))
  np.testing.assert_array_equal(out.numpy(), ref.astype(out.dtype.np))

# ---- the machine code: 128-bit global and LDS accesses, the matrix (or FMA) instructions, no scratch, bounded VGPRs
@pytest.mark.parametrize("arch", ARCHS + ("gfx942",))
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.float32])
def test_default_tile_machine_code(dt, kind, arch):
  """A 1024^3 GEMM's default tile (half: 128x128x32 on 8 wave32s, WMMA, or 128x64 on 4 wave64s, MFMA; fp32: opt_simt's
  8x8 FMA tiles): measured half 68-158 VGPRs, fp32 205-209 on RDNA, 180-249 on CDNA (which has 512 a lane with AGPRs),
  by LLVM 22 via llvmlite and clang 19; the bounds leave room and catch a spill-prone change."""
  from tinycore_amd.codeobject import read
  r = renderer(kind, arch)
  p = staged_program((1024, 1024), (1024, 1024), r, dt)
  lib = r.compiler.compile(p.src)
  kd = read(lib).kernels[p.name]
  lds = sum(u.dtype.size * u.dtype.base.itemsize for u in p.uops if u.op is Ops.DEFINE_LOCAL)
  # no scratch (no spills, no private arrays); two workgroups fit a WGP's LDS; registers within the bound
  assert kd.private_segment_size == 0 and kd.group_segment_size == lds <= 32 * 1024
  cdna = arch == "gfx942"
  assert kd.vgprs <= (192 if dt == dtypes.half else 256 if cdna else 224), kd.vgprs
  asm = r.compiler.to_asm(p.src) if kind == "LLVM" else r.compiler.disassemble(lib)
  if "ds_" not in asm: pytest.skip("no llvm-objdump to disassemble the HIP code object (apt-get install llvm-19)")
  want = {"global_load_dwordx4", "ds_write_b128", "ds_read_b128", "global_store_dwordx4"} if cdna else \
         {"global_load_b128", "ds_store_b128", "ds_load_b128", "global_store_b128"}   # gfx9's names, RDNA3+'s
  want |= {"v_mfma_f32_16x16x16_f16" if cdna else "v_wmma_f32_16x16x16_f16"} if dt == dtypes.half else {"v_fmac_f32" if cdna else "v_dual_fmac_f32"}
  assert all(w in asm for w in want), [w for w in want if w not in asm]
  assert "scratch_" not in asm
