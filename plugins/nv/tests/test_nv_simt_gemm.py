"""The staged fp32 FMA GEMM (codegen/opt_simt.py: no TF32) on NVIDIA, provable without a GPU:
- EMU+NV runs it bit-exact against numpy for integer-valued inputs (every product and partial sum is exact in fp32), for
  every operand orientation, sizes that aren't tile multiples, a batch, and several tiles; random inputs agree within
  fp32 reassociation tolerance (the k sum is added in another order than numpy's);
- matmul + bias + relu + cast to half is one kernel, its epilogue in registers, stored 4 halves (8 bytes) at a time;
- the shared-memory reads are bank-conflict free (quarter-warp by quarter-warp, with the kernel's own address function);
- ptxas -v for sm_90: no spills, >= 2 blocks per SM on an H200; the SASS has LDGSTS.128, LDS.128, STG.E.128, FFMAs."""
import re
import numpy as np
import pytest
from _nv_harness import NVHarness as NV
from tinycore import Tensor
from tinycore.helpers import Context
from tinycore.codegen import get_program
from tinycore.codegen.opt_simt import SimtTile
from tinycore.emulator import EmulatedRenderer, EmulatorError
from tinycore.uop import Ops
from tinycore_nv.renderer_cuda import CUDARenderer
from tinycore_nv.emulator import model as nv_model
from tinycore_nv.nvrtc import find_nvrtc
from tinycore_nv.ptxas import find_ptxas
from tinycore_nv.occupancy import ptxas_usage, blocks_per_sm, H200, find_sass_tool

DEV = "EMU+NV"

pytestmark = pytest.mark.usefixtures("emu_nv")   # EMU+NV the default device (conftest.py)

def _renderer(sync: bool = False) -> CUDARenderer: return NV.renderer(sync)

def _ast(M, K, N, ta=False, tb=False, batch=None, epilogue=False):
  bs = (batch,) if batch else ()
  a = Tensor.empty(*bs, K, M).transpose(-1, -2) if ta else Tensor.empty(*bs, M, K)
  b = Tensor.empty(*bs, N, K).transpose(-1, -2) if tb else Tensor.empty(*bs, K, N)
  out = a @ b
  if epilogue: out = (out + Tensor.empty(N)).relu().half()
  return out.schedule()[-1].ast

def _program(ast, sync=False, tile: SimtTile | None = None): return NV.program(ast, "sm_90", tile, _renderer(sync), env="SIMT_TILE")
def _run(p, bufs, edit=None): NV.run(p, bufs, "sm_90", edit)
def _is_staged(p) -> bool: return NV.is_staged(p)

def _mm(M, K, N, ta=False, tb=False, batch=None, epilogue=False, ints=True, sync=False, tile=None, seed=0):
  rng = np.random.default_rng(seed)
  bs = (batch,) if batch else ()
  mk = (lambda s: rng.integers(-3, 4, s).astype(np.float32)) if ints else (lambda s: rng.standard_normal(s).astype(np.float32))
  a, b, bias = mk(bs + (M, K)), mk(bs + (K, N)), mk((N,))
  p = _program(_ast(M, K, N, ta, tb, batch, epilogue), sync, tile)
  assert _is_staged(p), "the kernel was not staged through shared memory"
  assert not any(u.op is Ops.WMMA for u in p.uops), "fp32 without ALLOW_TF32 must not use tensor cores"
  out = np.zeros(bs + (M, N), np.float16 if epilogue else np.float32)
  mem = [np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a, np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b]
  _run(p, [out] + mem + ([bias] if epilogue else []))
  ref = a.astype(np.float64) @ b.astype(np.float64)
  if epilogue: ref = np.maximum(ref + bias, 0).astype(np.float16)
  return out, ref, p

@pytest.mark.needs_device
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)], ids=["AB", "ABt", "AtB", "AtBt"])
def test_orientations_bit_exact(ta, tb):
  got, ref, p = _mm(128, 64, 128, ta, tb)
  np.testing.assert_array_equal(got, ref.astype(np.float32))
  assert p.local_size[0] >= 64

@pytest.mark.needs_device
@pytest.mark.parametrize("shape", [(200, 72, 136), (96, 40, 260), (130, 9, 68)], ids=lambda s: "x".join(map(str, s)))
def test_sizes_not_tile_multiples_bit_exact(shape):
  """The tails: copies past M, N or K zero-fill, stores past M or N are skipped (N % 4 == 0 keeps 16-byte stores)."""
  got, ref, _ = _mm(*shape)
  np.testing.assert_array_equal(got, ref.astype(np.float32))

@pytest.mark.needs_device
def test_odd_n_stores_scalars_and_stays_exact():
  got, ref, p = _mm(64, 32, 66)
  np.testing.assert_array_equal(got, ref.astype(np.float32))
  assert not any(u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL and isinstance(u.src[0].arg, tuple) for u in p.uops)

TILES = [SimtTile(64, 64, 16, 4, 4, 2), SimtTile(128, 64, 16, 8, 4, 3), SimtTile(64, 128, 16, 4, 8, 4, False), SimtTile(128, 128, 8, 8, 8, 3)]

@pytest.mark.needs_device
@pytest.mark.parametrize("tile", TILES, ids=lambda t: f"{t.bm}x{t.bn}x{t.bk}_t{t.tm}x{t.tn}_s{t.stages}_sw{int(t.swizzle)}")
def test_tiles_bit_exact(tile):
  got, ref, _ = _mm(128, 64, 128, tile=tile, tb=tile.bn == 64)
  np.testing.assert_array_equal(got, ref.astype(np.float32))

@pytest.mark.needs_device
def test_random_inputs_within_fp32_reassociation_tolerance():
  got, ref, _ = _mm(128, 256, 128, ints=False, seed=3)
  # fp32 sums of 256 products in another order than float64's: a few ulps of the sum's magnitude
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)

@pytest.mark.needs_device
def test_batch_and_synchronous_staging():
  got, ref, p = _mm(64, 48, 64, batch=3)
  np.testing.assert_array_equal(got, ref.astype(np.float32))
  got, ref, p = _mm(128, 64, 64, sync=True)   # no cp.async (what a GPU without it declares): one stage, two barriers
  np.testing.assert_array_equal(got, ref.astype(np.float32))
  assert not any(u.op is Ops.BARRIER and u.arg is not None for u in p.uops)

@pytest.mark.needs_device
def test_fused_bias_relu_half_epilogue_one_kernel():
  """matmul + bias + relu + cast to half: one kernel; the epilogue runs on the accumulators, 4 halves per store."""
  sched = (Tensor.empty(128, 64) @ Tensor.empty(64, 128) + Tensor.empty(128)).relu().half().schedule()
  assert len(sched) == 1
  got, ref, p = _mm(128, 64, 128, epilogue=True, seed=2)
  np.testing.assert_array_equal(got, ref)   # integer sums below 2048: exact in fp32 and in half
  got, ref, _ = _mm(128, 64, 128, epilogue=True, ints=False, seed=2)
  # random inputs: the fp32 sum (reassociated, error ~1e-6 for 64 products of N(0,1)) may round to the neighbouring half
  np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=2 ** -10, atol=1e-5)
  vec_st = [u for u in p.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
  assert vec_st and all(u.src[0].arg == ("vec", 4, 8) for u in vec_st)

@pytest.mark.needs_device
def test_emulator_checks_vector_alignment():
  """An aligned vector access (one LDS.128/STG.128 on hardware) whose address isn't a multiple of its size faults
  there; the emulator reports it. Asking for 32-byte alignment makes every other 16-byte read of a panel misaligned."""
  p = _program(_ast(64, 32, 64))
  bufs = [np.zeros((64, 64), np.float32), np.ones((64, 32), np.float32), np.ones((32, 64), np.float32)]
  _run(p, bufs)
  def widen(nodes):
    for n in nodes:
      if n.op is Ops.INDEX and n.arg == ("vec", 4, 16) and n.src[0].op is Ops.DEFINE_LOCAL: n.arg = ("vec", 4, 32)
  with pytest.raises(EmulatorError, match=r"misaligned 16-byte load of local \d+: element \d+ is byte \d+, not a multiple of 32"):
    _run(p, bufs, widen)

@pytest.mark.needs_device
@pytest.mark.parametrize("padding", [0, 1])
def test_fp32_conv_as_implicit_gemm(padding):
  """A float32 conv takes the same staged FMA path (im2col inside the copies: element gathers, zero-filled halo)."""
  rng = np.random.default_rng(7)
  x, w = rng.integers(-3, 4, (2, 8, 10, 10)).astype(np.float32), rng.integers(-3, 4, (16, 8, 3, 3)).astype(np.float32)
  out = Tensor(x).conv2d(Tensor(w), padding=padding)
  ps = [get_program(si.ast, EmulatedRenderer(_renderer(), nv_model("NV", "sm_90"))) for si in out.schedule()]
  assert any(_is_staged(p) for p in ps)
  torch = pytest.importorskip("torch")
  ref = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64), padding=padding).numpy()
  np.testing.assert_array_equal(out.numpy(), ref.astype(np.float32))

# ---- structure

def _quarter_ways(addrs: list[int]) -> int:
  """Bank-group conflicts of one quarter warp's 16-byte reads (word addresses): distinct addresses sharing a group."""
  groups: dict[int, set] = {}
  for a in addrs: groups.setdefault((a * 4 // 16) % 8, set()).add(a)
  return max(len(v) for v in groups.values())

@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)], ids=["AB", "ABt", "AtB", "AtBt"])
def test_shared_reads_are_bank_conflict_free(ta, tb):
  """Every 16-byte shared read of the default kernel, evaluated for each quarter warp of the first warp: one bank
  group per distinct address (broadcasts are free)."""
  from tinycore.uop import UOp
  p = get_program(_ast(128, 64, 256, ta, tb), _renderer())
  reads = [u for u in p.uops if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_LOCAL and u.src[0].arg == ("vec", 4, 16)]
  assert len(reads) == 2 * (8 + 8)   # 2 k blocks of 4 per 8-deep step, 8 reads of A and 8 of B each
  specials = [u for u in p.uops if u.op is Ops.SPECIAL]
  rngs = [u for u in p.uops if u.op is Ops.RANGE]
  for rd in reads:
    for q in range(4):
      addrs = []
      for lane in range(8 * q, 8 * q + 8):
        sub = {s: UOp.const(s.dtype, lane if s.arg[0] == "gidx0" else 0) for s in specials} | {r: UOp.const(r.dtype, 1) for r in rngs}
        addrs.append(rd.src[0].src[1].substitute(sub).simplify().arg)
      assert _quarter_ways(addrs) == 1, (ta, tb, addrs)

needs_nvrtc = pytest.mark.skipif(find_nvrtc() is None or find_ptxas() is None, reason="NVRTC or ptxas not found (no CUDA toolkit)")
needs_sass = pytest.mark.skipif(find_sass_tool() is None,
                                reason="cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")

def _cubin(ta=False, tb=False, epilogue=False, n=4096):
  p = get_program(_ast(n, n, n, ta, tb, epilogue=epilogue), _renderer())
  assert _is_staged(p)
  cubin, log = NV.cubin(p, "sm_90")
  return p, cubin, ptxas_usage(log)

def _full_counts(cubin) -> dict:
  from tinycore_nv.occupancy import sass
  ops = re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_.]*)", sass(cubin), re.M)
  return {o: ops.count(o) for o in set(ops)}

@needs_nvrtc
@pytest.mark.parametrize("ta,tb,epilogue", [(False, False, False), (False, True, False), (True, False, False), (False, False, True)],
                         ids=["AB", "ABt", "AtB", "AB+bias+relu+half"])
def test_ptxas_no_spills_and_two_blocks_per_sm(ta, tb, epilogue):
  p, _, use = _cubin(ta, tb, epilogue)
  assert use["spill_stores"] == 0 and use["spill_loads"] == 0 and use["stack"] == 0, use
  assert use["smem"] == 3 * (64 + 128) * 8 * 4   # 3 stages of 64x8 + 8x128 floats
  threads = p.local_size[0] * p.local_size[1] * p.local_size[2]
  assert blocks_per_sm(use["registers"], use["smem"], threads, H200) >= 2, (use, threads)

@needs_nvrtc
@needs_sass
@pytest.mark.parametrize("epilogue", [False, True], ids=["AB", "AB+bias+relu+half"])
def test_sass_has_vector_copies_shared_reads_stores_and_only_ffma(epilogue):
  _, cubin, _ = _cubin(epilogue=epilogue)
  c = _full_counts(cubin)
  # per 8-deep k step a thread issues 8x8x8 FFMAs, 2 x (8 + 8) 16-byte shared reads (ptxas may split one into two
  # LDS.64), and 3 16-byte cp.async copies (1 of A's 64x8 panel, 2 of B's 8x128); the prologue adds 2 stages of copies
  assert c.get("FFMA", 0) == 512, c
  assert c.get("LDS.128", 0) + c.get("LDS.64", 0) // 2 == 32, c
  assert c.get("LDGSTS.E.BYPASS.128", 0) == 9, c
  assert c.get("STG.E.64" if epilogue else "STG.E.128", 0) == 16, c   # 8 rows x 2 runs of 4 outputs
  assert c.get("FADD", 0) == (64 if epilogue else 0) and c.get("FMUL", 0) == 0, c   # the bias: one add per output

# ---- BEAM searches FMA tiles as actions (timed in the emulator here: that it is correct and cached is what counts)

def test_simt_tiles_are_actions_and_checked():
  from tinycore.codegen.opt import InvalidOpt
  from tinycore.codegen.opt_smem import gemm_actions, tile_from_actions, check_gemm_actions, gemm_candidates
  t = SimtTile(64, 64, 16, 4, 4, 2, False)
  assert tile_from_actions(gemm_actions(t)) == t
  ast = _ast(128, 64, 128)
  from tinycore.codegen import prepare_kernel
  k = prepare_kernel(ast, "NV")
  cands = gemm_candidates(k, _renderer())
  assert cands and cands[0] == SimtTile() and all(isinstance(c, SimtTile) for c in cands)
  assert check_gemm_actions(k, _renderer(), gemm_actions(t)) == t
  for bad in [gemm_actions(t)[:1] + (("WARPS", "simt", (2, 2)),), (("SMEM_TILE", "simt", (64, 64, 16)), ("STAGES", "gemm", 2)),
              gemm_actions(SimtTile(64, 64, 16, 4, 4, 1))]:   # mixed actions; 1 stage with cp.async
    with pytest.raises(InvalidOpt): check_gemm_actions(k, _renderer(), bad)

@pytest.mark.needs_device
def test_beam_searches_simt_tiles_and_caches_them(tmp_path, capsys):
  import glob, json
  from tinycore.engine import run
  import tinycore.codegen.search  # noqa: F401  (defines BEAM_DEBUG/BEAM_TIME_LIMIT, which Context sets only once they exist)
  rng = np.random.default_rng(4)
  a, b = rng.integers(-3, 4, (128, 64)).astype(np.float32), rng.integers(-3, 4, (64, 128)).astype(np.float32)
  run._runners.clear()
  with Context(BEAM=1, IGNORE_BEAM_CACHE=1, CACHEDB=str(tmp_path), BEAM_DEBUG=1, BEAM_TIME_LIMIT=4):
    np.testing.assert_array_equal((Tensor(a, device=DEV) @ Tensor(b, device=DEV)).numpy(), a @ b)
  out = capsys.readouterr().out
  assert "THREAD_TILE" in out and "variants in" in out   # FMA tiles were timed
  (entry,) = glob.glob(str(tmp_path / "beam" / "*" / "*.json"))
  with open(entry) as f: assert isinstance(json.load(f), list)
  run._runners.clear()
  with Context(BEAM=1, IGNORE_BEAM_CACHE=0, CACHEDB=str(tmp_path), BEAM_DEBUG=1):
    np.testing.assert_array_equal((Tensor(a, device=DEV) @ Tensor(b, device=DEV)).numpy(), a @ b)
  assert "variants in" not in capsys.readouterr().out   # the cached winner, no search
