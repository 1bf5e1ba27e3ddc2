"""The shared-memory tensor-core GEMM (codegen/opt_smem.py) on NVIDIA, provable without a GPU:
- EMU+NV runs every tile shape bit-exact against numpy (integer-valued inputs make every fp32 sum exact), plus random
  inputs at fp16's tolerance, for half and bfloat16, transposed operands, a batch and a fused epilogue;
- the emulator catches a deliberately broken kernel: no barrier, no cp.async wait, too little shared memory;
- the swizzled panels are bank-conflict free for ldmatrix's 8-row phases;
- ptxas -v for sm_90: no spills, >= 2 blocks per SM on an H200 for the default tiles;
- the SASS has HMMA, LDSM and LDGSTS (cuobjdump/nvdisasm from the nvidia-cuda-cuobjdump/-nvdisasm wheels)."""
import numpy as np
import pytest
from _nv_harness import NVHarness as NV
from tinycore import Tensor, dtypes
from tinycore.helpers import Context
from tinycore.codegen import get_program
from tinycore.codegen.opt_smem import GemmTile, bank_conflict_ways, gemm_actions, tile_from_actions, valid_tile, smem_bytes
from tinycore.emulator import EmulatedRenderer, MissingBarrier, AsyncCopyPending, OutOfBounds
from tinycore.uop import Ops
from tinycore_nv.renderer_cuda import CUDARenderer
from tinycore_nv.emulator import model as nv_model
from tinycore_nv.nvrtc import find_nvrtc
from tinycore_nv.ptxas import find_ptxas
from tinycore_nv.occupancy import ptxas_usage, blocks_per_sm, H200, find_sass_tool

DEV = "EMU+NV"

pytestmark = pytest.mark.usefixtures("emu_nv")   # EMU+NV the default device (conftest.py)

def _renderer(sync: bool = False) -> CUDARenderer: return NV.renderer(sync)

def _ast(a_shape, b_shape, dt, trans_b=False, batch=None, epilogue=False):
  ta = Tensor.empty(*((batch,) if batch else ()), *a_shape, dtype=dt)
  tb = Tensor.empty(*((batch,) if batch else ()), *(b_shape[::-1] if trans_b else b_shape), dtype=dt)
  if trans_b: tb = tb.transpose(-1, -2)
  out = ta @ tb
  if epilogue: out = (out.float() + Tensor.empty(b_shape[1], dtype=dtypes.float32)).relu()
  return out.schedule()[-1].ast

def _program(ast, sync=False, tile: GemmTile | None = None): return NV.program(ast, "sm_90", tile, _renderer(sync))
def _run(p, bufs, edit=None): NV.run(p, bufs, "sm_90", edit)
def _is_smem(p) -> bool: return NV.is_staged(p)

def _mm(M, K, N, dt, sync=False, tile=None, trans_b=False, batch=None, epilogue=False, ints=True, seed=0):
  rng = np.random.default_rng(seed)
  bshape = (batch,) if batch else ()
  mk = (lambda s: rng.integers(-3, 4, s).astype(np.float32)) if ints else (lambda s: rng.standard_normal(s).astype(np.float32))
  a, b, bias = mk(bshape + (M, K)), mk(bshape + (K, N)), mk((N,))
  p = _program(_ast((M, K), (K, N), dt, trans_b, batch, epilogue), sync, tile)
  assert _is_smem(p), "the kernel was not staged through shared memory"
  def mem(x):   # the buffers as their device bytes
    return x.astype(np.float16) if dt == dtypes.half else (x.view(np.uint32) >> 16).astype(np.uint16)
  out_dt = np.float32 if epilogue else (np.float16 if dt == dtypes.half else np.uint16)
  out = np.zeros(bshape + (M, N), out_dt)
  bb = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans_b else b
  bufs = [out, mem(a), mem(bb)] + ([bias] if epilogue else [])
  _run(p, bufs)
  if dt == dtypes.half: a, b = a.astype(np.float16).astype(np.float32), b.astype(np.float16).astype(np.float32)   # what the device holds
  ref = a @ b
  if epilogue: ref = np.maximum(ref.astype(np.float16).astype(np.float32) + bias, 0)   # the half matmul, then the fp32 epilogue
  got = out.astype(np.float32) if dt == dtypes.half or epilogue else (out.astype(np.uint32) << 16).view(np.float32)
  return got, ref, p

TILES = [GemmTile(64, 64, 32, 2, 2, 2, True), GemmTile(64, 64, 16, 2, 2, 3, True), GemmTile(64, 128, 32, 2, 2, 4, False),
         GemmTile(128, 64, 32, 2, 2, 3, True), GemmTile(32, 64, 64, 1, 2, 2, True)]

@pytest.mark.needs_device
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t.bm}x{t.bn}x{t.bk}_w{t.warps_m}{t.warps_n}_s{t.stages}_sw{int(t.swizzle)}")
def test_tiles_bit_exact(tile):
  got, ref, _ = _mm(128, 128, 128, dtypes.half, tile=tile)
  np.testing.assert_array_equal(got, ref)   # small integers: every product and partial sum is exact in fp32 and fp16

@pytest.mark.needs_device
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
@pytest.mark.parametrize("trans_b", [False, True])
def test_default_tile_dtypes_and_layouts(dt, trans_b):
  got, ref, p = _mm(256, 64, 128, dt, trans_b=trans_b)
  np.testing.assert_array_equal(got, ref)
  assert p.local_size[0] >= 128

@pytest.mark.needs_device
def test_random_inputs_at_fp16_tolerance():
  got, ref, _ = _mm(128, 256, 64, dtypes.half, ints=False)
  np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-2)

@pytest.mark.needs_device
def test_batched_and_fused_epilogue():
  got, ref, p = _mm(64, 64, 64, dtypes.half, batch=3, epilogue=True, ints=False, seed=1)
  np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-2)   # the epilogue (bias, relu) runs in registers, in the same kernel
  assert p.global_size[2] == 3 or 3 in p.global_size

@pytest.mark.needs_device
@pytest.mark.parametrize("trans_b", [False, True])
def test_synchronous_staging_without_async_copy(trans_b):
  """The portable path (what AMD LDS or Metal threadgroup memory would declare): plain copies between two barriers,
  fragments gathered element by element."""
  got, ref, p = _mm(128, 64, 128, dtypes.half, sync=True, trans_b=trans_b)
  np.testing.assert_array_equal(got, ref)
  assert not any(u.op is Ops.BARRIER and u.arg is not None for u in p.uops)

# ---- the emulator catches what a real GPU would only show as wrong numbers, sometimes

def _broken(edit, sync=False):
  M = K = N = 64
  p = _program(_ast((M, K), (K, N), dtypes.half), sync, GemmTile(64, 64, 16, 2, 2, 1 if sync else 2, True))
  bufs = [np.zeros((M, N), np.float16), np.ones((M, K), np.float16), np.ones((K, N), np.float16)]
  _run(p, bufs, edit)

@pytest.mark.needs_device
def test_emulator_reports_missing_barrier():
  _broken(None)   # intact, it runs
  with pytest.raises(MissingBarrier, match=r"missing barrier: .*local \d+ index \d+ .*by thread group"):
    _broken(NV.drop(lambda n: n.op is Ops.BARRIER and n.arg is None))
  # the synchronous path's second barrier guards the next step's copies against warps still reading (write after read)
  def second_barrier(nodes):
    bars = [n for n in nodes if n.op is Ops.BARRIER]
    assert len(bars) == 6   # the k loop's two, then the C tile's (codegen/c_tile.py): 2 passes through the 1-stage panels, 2 each
    bars[1].op = Ops.NOOP
  with pytest.raises(MissingBarrier, match=r"missing barrier: write to local \d+ index \d+ read by"):
    _broken(second_barrier, sync=True)

@pytest.mark.needs_device
@pytest.mark.parametrize("which", [0, 1], ids=["before_c_tile_writes", "before_c_tile_reads"])
def test_emulator_reports_missing_c_tile_barrier(which):
  """The C tile reuses the panels after the k loop: its writes must wait for every warp's last fragment reads, its
  16-byte reads for every warp's writes."""
  def drop(nodes):
    loop_end = max(i for i, n in enumerate(nodes) if n.op is Ops.END)
    bars = [n for n in nodes[loop_end:] if n.op is Ops.BARRIER and n.arg is None]
    assert len(bars) == 2
    bars[which].op = Ops.NOOP
  with pytest.raises(MissingBarrier, match=r"missing barrier: (write to|read of) local \d+ index \d+"):
    _broken(drop)

@pytest.mark.needs_device
def test_emulator_reports_missing_async_wait():
  with pytest.raises(AsyncCopyPending, match=r"ldmatrix read of local \d+ index \d+ while an async copy into it is in flight"):
    _broken(NV.drop(lambda n: n.op is Ops.BARRIER and n.arg is not None and n.arg[0] == "async_wait"))

@pytest.mark.needs_device
def test_emulator_reports_out_of_bounds_shared_access():
  def shrink(nodes):
    loc = next(n for n in nodes if n.op is Ops.DEFINE_LOCAL)
    loc.dtype = loc.dtype.base.ptr(loc.dtype.size // 2, "local")   # half the panel: the second stage runs off its end
  with pytest.raises(OutOfBounds, match=r"out-of-bounds .*local \d+ at index \d+"):
    _broken(shrink)

# ---- structure

def test_swizzle_is_bank_conflict_free():
  for cols in (16, 32, 64, 128):   # panel row lengths in halves: 2, 4, 8, 16 chunks of 16 bytes
    for col in range(0, cols, 8):
      for r0 in range(0, 32, 8):
        assert bank_conflict_ways(list(range(r0, r0 + 8)), col, cols, 8, True) == 1, (cols, col, r0)
  assert bank_conflict_ways(list(range(8)), 0, 64, 8, False) == 8   # unswizzled 128-byte rows: all 8 rows in one bank group

def test_tiles_are_actions_and_checked():
  t = GemmTile(128, 64, 32, 2, 2, 3, False)
  assert tile_from_actions(gemm_actions(t)) == t
  r = _renderer()
  assert valid_tile(t, 256, 256, 64, r, 8, 2) is None and smem_bytes(t, 2) == 3 * (128 + 64) * 32 * 2
  assert valid_tile(t, 200, 256, 64, r, 8, 2) is None   # a size that isn't a multiple of the tile: its tail is gated
  small = GemmTile(16, 16, 16, 1, 2, 2, True)   # 64 threads, 256-element panels: too few for one 8-element copy each
  assert "more than twice" in valid_tile(small, 1, 4096, 4096, r, 8, 2)   # a GEMV (decode) stays off this path
  assert "whole 8-element copies" in valid_tile(small, 16, 16, 16, r, 8, 2) and valid_tile(small, 16, 16, 16, r, 8, 2, copy=(1, 2)) is None
  assert "shared memory" in valid_tile(GemmTile(256, 256, 64, 2, 4, 4, True), 512, 512, 512, r, 8, 2)
  assert "at least 2 stages" in valid_tile(GemmTile(64, 64, 32, 2, 2, 1, True), 128, 128, 128, r, 8, 2)

needs_nvrtc = pytest.mark.skipif(find_nvrtc() is None or find_ptxas() is None, reason="NVRTC or ptxas not found (no CUDA toolkit)")

def _cubin_and_log(dt, shape=(4096, 4096, 4096)):
  M, K, N = shape
  p = get_program(_ast((M, K), (K, N), dt), CUDARenderer("sm_90"))
  assert _is_smem(p)
  cubin, log = NV.cubin(p, "sm_90")
  return p, cubin, log

@needs_nvrtc
@pytest.mark.parametrize("dt", [dtypes.half, dtypes.bfloat16])
def test_ptxas_no_spills_and_two_blocks_per_sm(dt):
  p, _, log = _cubin_and_log(dt)
  use = ptxas_usage(log)
  assert use["spill_stores"] == 0 and use["spill_loads"] == 0 and use["stack"] == 0, log
  threads = p.local_size[0] * p.local_size[1] * p.local_size[2]
  assert use["smem"] == 3 * (128 + 128) * 32 * 2   # 3 stages of 128x32 + 32x128 halves
  assert blocks_per_sm(use["registers"], use["smem"], threads, H200) >= 2, (use, threads)

@needs_nvrtc
@pytest.mark.skipif(find_sass_tool() is None, reason="cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
def test_sass_has_tensor_core_matrix_load_and_async_copy():
  from tinycore_nv.occupancy import sass_counts
  _, cubin, _ = _cubin_and_log(dtypes.half)
  c = sass_counts(cubin)
  # per 32-wide k step a warp of the 64x32 warp tile issues 2 k16 steps x 4x4 mma, 2 x (4 A + 4 B) ldmatrix, and each
  # thread 4 16-byte copies (2 of A, 2 of B); the prologue adds 2 stages of copies. (ptxas 13 keeps the loop rolled:
  # 32/16/12; another version may unroll it, so the ratios are what is checked)
  assert c["HMMA"] >= 32 and c["HMMA"] % 32 == 0 and c["HMMA"] == 2 * c["LDSM"], c
  assert c["LDGSTS"] >= 12 and c["LDGSTS"] % 4 == 0, c
  assert c["FADD"] == 0, c   # the running sums are the mma's C operand (codegen/mma_accumulate.py), no float adds

# ---- BEAM searches tiles (timed in the emulator here: which wins means nothing, that it is correct and cached does)

@pytest.mark.needs_device
def test_beam_searches_gemm_tiles_and_caches_them(tmp_path, capsys):
  import json, glob
  from tinycore.engine import run
  import tinycore.codegen.search  # noqa: F401  (defines BEAM_DEBUG/BEAM_TIME_LIMIT, which Context sets only once they exist)
  rng = np.random.default_rng(4)
  a, b = rng.integers(-3, 4, (128, 64)).astype(np.float16), rng.integers(-3, 4, (64, 128)).astype(np.float16)
  want = a.astype(np.float32) @ b.astype(np.float32)
  run._runners.clear()
  with Context(BEAM=1, IGNORE_BEAM_CACHE=1, CACHEDB=str(tmp_path), BEAM_DEBUG=1, BEAM_TIME_LIMIT=4):
    np.testing.assert_array_equal((Tensor(a, device=DEV) @ Tensor(b, device=DEV)).numpy().astype(np.float32), want)
  out = capsys.readouterr().out
  assert "SMEM_TILE" in out and "variants in" in out   # tiles were timed
  (entry,) = glob.glob(str(tmp_path / "beam" / "*" / "*.json"))
  with open(entry) as f: assert isinstance(json.load(f), list)
  run._runners.clear()
  with Context(BEAM=1, IGNORE_BEAM_CACHE=0, CACHEDB=str(tmp_path), BEAM_DEBUG=1):
    np.testing.assert_array_equal((Tensor(a, device=DEV) @ Tensor(b, device=DEV)).numpy().astype(np.float32), want)
  assert "variants in" not in capsys.readouterr().out   # the cached winner, no search

def test_gemm_actions_from_a_cache_are_checked():
  from tinycore.codegen.opt import InvalidOpt
  for bad in [(("SMEM_TILE", "gemm", (64, 64)),), (("SMEM_TILE", "gemm", (64, 64, -32)),), (("SWIZZLE", "gemm", 7),), (("STAGES", "gemm", "3"),)]:
    with pytest.raises(InvalidOpt): tile_from_actions(bad)

# ---- TF32 (fp32 operands on tensor cores, only under ALLOW_TF32=1)

@pytest.mark.needs_device
def test_tf32_only_when_asked_and_rounded_like_the_hardware():
  from tinycore_nv.tensor_cores import round_tf32
  rng = np.random.default_rng(5)
  a, b = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)
  exact = a.astype(np.float64) @ b.astype(np.float64)
  with Context(ALLOW_TF32=1):
    p = get_program(_ast((128, 64), (64, 128), dtypes.float32), EmulatedRenderer(_renderer(), nv_model("NV", "sm_90")))
    got = (Tensor(a, device=DEV) @ Tensor(b, device=DEV)).numpy()
  assert _is_smem(p) and any(u.op is Ops.WMMA and "tf32" in u.arg[0] for u in p.uops)
  np.testing.assert_allclose(got, round_tf32(a).astype(np.float64) @ round_tf32(b).astype(np.float64), rtol=1e-5, atol=1e-4)
  assert np.abs(got - exact).max() > 1e-3   # really reduced precision: it is TF32, not fp32
  p32 = get_program(_ast((128, 64), (64, 128), dtypes.float32), EmulatedRenderer(_renderer(), nv_model("NV", "sm_90")))
  assert not any(u.op is Ops.WMMA for u in p32.uops)
  np.testing.assert_allclose((Tensor(a, device=DEV) @ Tensor(b, device=DEV)).numpy(), exact, rtol=1e-5, atol=1e-4)

def test_tf32_rounding_is_nearest_ties_away():
  from tinycore_nv.tensor_cores import round_tf32
  one_ulp = np.float32(2.0 ** -10)
  x = np.array([1 + one_ulp / 2, 1 + one_ulp / 2 - 2.0 ** -23, -(1 + one_ulp / 2), np.inf, 1 + one_ulp], np.float32)
  np.testing.assert_array_equal(round_tf32(x), np.array([1 + one_ulp, 1, -(1 + one_ulp), np.inf, 1 + one_ulp], np.float32))
  assert np.isnan(round_tf32(np.array([np.nan], np.float32)))[0]

@needs_nvrtc
@pytest.mark.skipif(find_sass_tool() is None, reason="cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
def test_tf32_kernel_ptxas_and_sass():
  from tinycore_nv.occupancy import sass_counts
  with Context(ALLOW_TF32=1): p, cubin, log = _cubin_and_log(dtypes.float32)
  use = ptxas_usage(log)
  assert use["spill_stores"] == 0 and use["spill_loads"] == 0, log
  assert blocks_per_sm(use["registers"], use["smem"], p.local_size[0], H200) >= 2, use
  c = sass_counts(cubin)
  assert c["HMMA"] > 0 and c["LDGSTS"] > 0 and c["FADD"] == 0, c

def test_gemm_tile_env_errors_say_what_is_expected():
  with pytest.raises(ValueError, match=r"GEMM_TILE='128,x'.*7 integers"):
    with Context(GEMM_TILE="128,x"): get_program(_ast((128, 64), (64, 128), dtypes.half), _renderer())
  with pytest.raises(ValueError, match=r"tile 512x128x32 is more than twice the 128x128x64 GEMM"):
    with Context(GEMM_TILE="512,128,32,2,4,3,1"): get_program(_ast((128, 64), (64, 128), dtypes.half), _renderer())

@pytest.mark.needs_device
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_follows_the_ptx_isa(trans):
  """A hand-built warp: lane 8j+i gives row i of matrix j (16 bytes); lane l receives row l//4, elements 2(l%4) and
  2(l%4)+1 of each matrix, transposed with .trans (PTX ISA, ldmatrix, "fragment layout")."""
  from tinycore.uop import UOp
  lds = UOp(Ops.DEFINE_LOCAL, dtypes.half.ptr(4 * 64, "local"), (), 0)
  out = UOp(Ops.DEFINE_GLOBAL, dtypes.half.ptr(32 * 8), (), 0)
  inp = UOp(Ops.DEFINE_GLOBAL, dtypes.half.ptr(4 * 64), (), 1)
  lane = UOp(Ops.SPECIAL, dtypes.index, (UOp.const(dtypes.index, 32),), ("gidx0", 32))
  def st(buf, idx, val): return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, buf.dtype, (buf, idx)), val))
  fill = [st(lds, lane * 8 + e, UOp(Ops.LOAD, dtypes.half, (UOp(Ops.INDEX, inp.dtype, (inp, lane * 8 + e)),))) for e in range(8)]
  bar = UOp(Ops.BARRIER, dtypes.void, tuple(fill))
  # matrix j is stored at rows 8j..8j+7 (row-major, 8 halves a row): lane 8j+i points at row 8j+i
  frag = UOp(Ops.LOAD, dtypes.half.vec(8), (UOp(Ops.INDEX, lds.dtype, (lds, lane * 8), ("ldmatrix", 4, trans)), bar))
  nodes: list = []
  for u in [st(out, lane * 8 + e, UOp(Ops.GEP, dtypes.half, (frag,), (e,))) for e in range(8)]:
    nodes += [s for s in u.toposort() if s not in nodes]   # a flat program: every source before its use, each node once
  mats = np.arange(4 * 64, dtype=np.float16)   # element value = its address
  got = np.zeros(32 * 8, np.float16)
  NV.run_nodes("ldm", nodes, (got, mats), (32, 1, 1))
  M = mats.reshape(4, 8, 8).astype(np.float32)
  for l in range(32):
    for j in range(4):
      want = M[j, l // 4, 2 * (l % 4):2 * (l % 4) + 2] if not trans else M[j, 2 * (l % 4):2 * (l % 4) + 2, l // 4]
      np.testing.assert_array_equal(got.reshape(32, 8)[l, 2 * j:2 * j + 2].astype(np.float32), want, err_msg=f"lane {l} matrix {j}")

# ---- attention: both matmuls (QK^T and PV) on the staged path, the softmax between them in its own kernels

@pytest.mark.needs_device
def test_attention_matmuls_are_staged():
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(9)
  q, k, v = (rng.standard_normal((1, 2, 64, 32)).astype(np.float16) for _ in range(3))
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True)
  staged = [si for si in out.schedule() if _is_smem(get_program(si.ast, EmulatedRenderer(_renderer(), nv_model("NV", "sm_90"))))]
  assert len(staged) == 2, "QK^T and PV should both be shared-memory tensor-core GEMMs"
  ref = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(x.astype(np.float32)) for x in (q, k, v)), is_causal=True)
  np.testing.assert_allclose(out.numpy().astype(np.float32), ref.numpy(), rtol=1e-2, atol=5e-3)   # fp16 scores and output

# ---- 16-byte epilogue stores: the C tile through the freed panels (codegen/c_tile.py)

@needs_nvrtc
@pytest.mark.skipif(find_sass_tool() is None, reason="cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
@pytest.mark.parametrize("dt,stg128", [(dtypes.half, 8), (dtypes.bfloat16, 8), (dtypes.float32, 16)], ids=["half", "bf16", "tf32"])
def test_epilogue_stores_are_16_bytes(dt, stg128):
  """A 128x128 C tile of 256 threads: 8 (16-bit) or 16 (fp32, in 2 passes: it is bigger than the panels) STG.E.128 a
  thread, no narrower global stores."""
  import re
  from tinycore_nv.occupancy import sass
  with Context(ALLOW_TF32=int(dt == dtypes.float32)): _, cubin, log = _cubin_and_log(dt)
  assert ptxas_usage(log)["spill_stores"] == 0, log
  ops = re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?(STG[A-Z0-9_.]*)", sass(cubin), re.M)
  assert ops.count("STG.E.128") == stg128 and len(ops) == stg128, ops

@pytest.mark.needs_device
def test_c_tile_tails_bit_exact():
  """Sizes that aren't tile multiples: the chunk stores are gated per row and per run of 8 columns; C_TILE=0 (stores
  from registers) gives the same bits."""
  tile = GemmTile(64, 64, 32, 2, 2, 2, True)   # the default for this shape is a 16x16 tile of 64 threads: too few chunks
  got, ref, p = _mm(200, 64, 136, dtypes.half, tile=tile)
  np.testing.assert_array_equal(got, ref)
  assert any(u.op is Ops.STORE and u.src[0].arg == ("vec", 8, 16) and u.src[0].src[0].op is Ops.DEFINE_GLOBAL for u in p.uops)
  with Context(C_TILE=0): got0, _, p0 = _mm(200, 64, 136, dtypes.half, tile=tile)
  np.testing.assert_array_equal(got0, got)
  assert not any(u.op is Ops.STORE and u.src[0].arg is not None and u.src[0].src[0].op is Ops.DEFINE_GLOBAL for u in p0.uops)
