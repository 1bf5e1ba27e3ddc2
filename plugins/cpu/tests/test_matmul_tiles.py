"""The CPU matmul microkernel (tiling.py + the register block in codegen/opt.py): the tile the machine asks for, and the
values it computes at sizes around the vector width (16), the tile (8 rows x 32 columns) and one off each, against
numpy in float64. Each shape runs through the default policy and with the right operand forced into packed panels."""
import numpy as np
import pytest
from tinycore import Tensor, Device, dtypes
from tinycore.codegen import lower_kernel
from tinycore.codegen.opt import heuristic_opts
from tinycore.codegen.split import split_ranges
from tinycore.rewrite import graph_rewrite
from tinycore.symbolic import symbolic
from tinycore.uop import Ops
from tinycore_cpu.tiling import CacheSizes, Tiling, _parse_size, read_caches, tiling_for
pytestmark = pytest.mark.needs_device

def test_tile_from_isa_flags():
  caches = CacheSizes(48 << 10, 2 << 20, 64 << 20)
  assert (tiling_for({"avx2", "fma", "avx512f"}, caches).rows, tiling_for({"avx512f"}, caches).cols) == (8, 32)
  assert (tiling_for({"avx2", "fma"}, caches).rows, tiling_for({"asimd"}, caches).cols) == (4, 16)

def test_panel_width_follows_l2():
  t = Tiling(8, 32, CacheSizes(48 << 10, 2 << 20, 64 << 20))
  assert t.panel_width(1024) == 32 and t.panel_width(8192) == 32   # 32 x 8192 floats = 1 MiB = half of L2
  assert t.panel_width(8193) == 0                                   # a panel that can't stay in L2: don't pack

def test_cache_sizes_from_sysfs(tmp_path):
  for i, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "64K"), ("2", "Unified", "2048K"),
                                           ("3", "Unified", "480M")]):
    d = tmp_path / f"index{i}"
    d.mkdir()
    for name, v in (("level", level), ("type", kind), ("size", size), ("ways_of_associativity", "12")): (d / name).write_text(v + "\n")
  assert read_caches(str(tmp_path)) == CacheSizes(48 << 10, 2 << 20, 480 << 20, 12)
  (tmp_path / "index0" / "ways_of_associativity").unlink()   # no associativity shown: the default's
  assert read_caches(str(tmp_path)) == CacheSizes(48 << 10, 2 << 20, 480 << 20)
  assert read_caches(str(tmp_path / "missing")) == CacheSizes()   # no sysfs: the defaults
  assert [_parse_size(s) for s in ("32K", "1M", "12", "", "K", "-4K", "0K")] == [32 << 10, 1 << 20, 12, None, None, None, None]

def _kernel(out: Tensor):
  return split_ranges(graph_rewrite(lower_kernel(out.schedule()[-1].ast), symbolic))

def test_heuristic_picks_the_register_block(monkeypatch):
  """1024^3 with B in 32-wide panels: 16-lane vectors, widened to 2 per row, 8 rows, the panel loop outermost (one
  panel stays in L2 per thread). Set on the renderer, so it holds on any machine."""
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  monkeypatch.setattr(r, "register_block", (8, 32))
  monkeypatch.setattr(r, "matmul_panels", lambda *a: 32)
  monkeypatch.setattr(r, "matmul_panel_group", lambda *a: 1)
  monkeypatch.setattr(r, "matmul_tile_rows", lambda M, K=0: 0)
  a, b = Tensor.empty(1024, 1024, device="CPU"), Tensor.empty(1024, 1024, device="CPU")
  tile = (("VEC", ("g", 2), 16), ("UPCAST", ("g", 2), 2), ("UPCAST", ("g", 0), 8), ("SWAP", ("g", 0), ("g", 1)))
  for rhs in (b, b.T):
    opts = heuristic_opts(_kernel(a @ rhs), r)
    assert opts == tile, opts
  # where the renderer groups the panels (32 panels of 128 KiB here), the panel loop is split last
  seen = []
  monkeypatch.setattr(r, "matmul_panel_group", lambda nbytes, n: seen.append((nbytes, n)) or 8)
  assert heuristic_opts(_kernel(a @ b), r) == tile + (("GROUP", ("g", 0), 8),) and seen == [(128 << 10, 32)]
  # the renderer's taller tile for 1024 rows: 86 tiles of 12, the last one clamped
  monkeypatch.setattr(r, "matmul_tile_rows", lambda M, K=0: 12 if M == 1024 else 0)
  assert heuristic_opts(_kernel(a @ b), r)[:3] == tile[:2] + (("UPCAST_T", ("g", 0), 12),)
  monkeypatch.setattr(r, "matmul_tile_rows", lambda M, K=0: 0)
  monkeypatch.setattr(r, "register_block", (4, 16))   # 16 registers (AVX2): 4 rows of one vector
  opts = heuristic_opts(_kernel(a @ b), r)
  assert ("UPCAST", ("g", 0), 4) in opts and not any(o[0] == "UPCAST" and o[1] == ("g", 2) for o in opts), opts

SHAPES = [(1, 1, 1), (15, 16, 17), (16, 16, 16), (17, 17, 17), (31, 33, 32), (33, 31, 33), (32, 32, 32), (7, 9, 31),
          (9, 17, 33), (8, 64, 32), (16, 40, 64), (24, 5, 96), (64, 48, 96), (256, 64, 256), (1, 256, 64), (96, 1, 64)]

def _ref(a, b): return a.astype(np.float64) @ b.astype(np.float64)

@pytest.mark.parametrize("packed", [False, True], ids=["default", "panels"])
@pytest.mark.parametrize("M,K,N", SHAPES)
def test_matmul_shapes(M, K, N, packed, monkeypatch):
  r = Device["CPU"].renderer
  if packed: monkeypatch.setattr(r, "matmul_panels", lambda *a: 32)
  rng = np.random.default_rng(M * 10000 + K * 100 + N)
  a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
  tol = 1e-5 * np.sqrt(K) + 1e-5
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=tol, atol=tol)
  bt = np.ascontiguousarray(b.T)   # x @ W.T: the weight stored (N, K)
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(bt, device="CPU").T).numpy(), _ref(a, b), rtol=tol, atol=tol)

EDGES = [1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 255, 257]

@pytest.mark.parametrize("n", EDGES)
def test_sizes_around_the_tile(n):
  """Each size around the vector (16), the tile (8 x 32) and one off each, as M, K and N in turn (the other two 64 or
  96: non-square), through the default policy for a @ b and a @ b.T, and a batch of 3, against numpy in float64."""
  rng = np.random.default_rng(n)
  for M, K, N in ((n, 64, 96), (64, n, 96), (96, 64, n), (n, n, n)):
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    tol = 1e-5 * np.sqrt(K) + 1e-5
    np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=tol, atol=tol)
    bt = np.ascontiguousarray(b.T)
    np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(bt, device="CPU").T).numpy(), _ref(a, b), rtol=tol, atol=tol)
  a, b = rng.standard_normal((3, n, 40)).astype(np.float32), rng.standard_normal((3, 40, 48)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=1e-4, atol=1e-4)

def test_tall_tile_policy():
  """The taller tile (12 rows with AVX-512) where its last tile's repeated rows cost at most 2.5% more than the block's
  rows, and where the L1 ways hold its 12 rows (a 48 KB 12-way L1 at any K; a 32 KB 8-way one not at K = 1024 or
  2048, whose rows share a set); 8 rows clamped where 8 doesn't divide M and no 4-row tile does better; none without
  a taller tile."""
  intel = tiling_for({"avx512f"}, CacheSizes(48 << 10, 2 << 20, 64 << 20, 12))
  assert [intel.tile_rows(m) for m in (1024, 2048, 784, 512, 96, 256, 40, 4096)] == [12, 12, 12, 12, 12, 0, 0, 12]
  assert [intel.tile_rows(m, 1024) for m in (1024, 2048, 4096)] == [12, 12, 12]
  zen4 = tiling_for({"avx512f"}, CacheSizes(32 << 10, 1 << 20, 32 << 20, 8))
  assert [zen4.tile_rows(m, 1024) for m in (1024, 2048, 960, 256)] == [0, 0, 0, 0]
  assert [zen4.tile_rows(m, k) for m, k in ((1024, 1040), (1024, 768), (1024, 512), (1024, 2064))] == [12, 12, 12, 12]
  # rows no 8 divides: 197 in 17 tiles of 12, 196 (4 divides it) in 12s (204 rows), 100 and 50 in 8s clamped
  assert [zen4.tile_rows(m, 768) for m in (197, 196, 100, 50, 25, 17, 15)] == [12, 12, 8, 8, 8, 12, 0]
  assert [zen4.tile_rows(m, 1024) for m in (197, 196, 100, 52)] == [8, 8, 8, 8]
  assert tiling_for({"avx2", "fma"}, intel.caches).tile_rows(1024) == 0
  assert tiling_for({"avx2", "fma"}, intel.caches).tile_rows(20) == 0   # 4 rows divide it

TALL = [12, 13, 14, 15, 23, 24, 25, 27, 28, 29, 41, 43, 57, 85]

@pytest.mark.parametrize("rows", [12, 14])
@pytest.mark.parametrize("n", TALL)
def test_tall_tile_sizes(n, rows, monkeypatch):
  """A taller register tile forced on every matmul (rows x 32, UPCAST_T where `rows` doesn't divide M: the last tile's
  extra rows clamped to the last real one, their stores gated): n as M (and as M, K, N at once), a @ b, a @ b.T with
  the right operand packed and not, a batch of 3, against numpy in float64."""
  r = Device["CPU"].renderer
  if not r.vector_types or r.register_block is None: pytest.skip("the renderer has no register block")
  monkeypatch.setattr(r, "register_block", (8, 32))
  monkeypatch.setattr(r, "matmul_tile_rows", lambda M, K=0: rows)
  rng = np.random.default_rng(n * 100 + rows)
  a0, b0 = Tensor.empty(n, 64, device="CPU"), Tensor.empty(64, 96, device="CPU")
  want = ("UPCAST_T", ("g", 0), rows) if n >= rows else None   # clamped even where it divides (gcc spills a plain UPCAST)
  opts = heuristic_opts(_kernel(a0 @ b0), r)
  assert want is None or want in opts, opts
  for M, K, N in ((n, 64, 96), (n, n, n), (n, 40, 64)):
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    tol = 1e-5 * np.sqrt(K) + 1e-5
    np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=tol, atol=tol)
    bt = np.ascontiguousarray(b.T)
    for panels in (0, 32):
      monkeypatch.setattr(r, "matmul_panels", lambda *_: panels)
      np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(bt, device="CPU").T).numpy(), _ref(a, b), rtol=tol, atol=tol)
    monkeypatch.undo()
    monkeypatch.setattr(r, "register_block", (8, 32))
    monkeypatch.setattr(r, "matmul_tile_rows", lambda M, K=0: rows)
  a, b = rng.standard_normal((3, n, 40)).astype(np.float32), rng.standard_normal((3, 40, 48)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=1e-4, atol=1e-4)

ROWS = [1, 7, 15, 16, 17, 25, 31, 32, 33, 47, 50, 63, 77, 97, 100, 127, 131, 196, 197, 257]

@pytest.mark.parametrize("M", ROWS)
def test_rows_no_block_divides(M):
  """The default policy on rows 8 doesn't divide (a prompt of 197 tokens): a clamped tile of 12 or 8 rows
  (Renderer.matmul_tile_rows) on the row axis instead of columns only or a 4-row tile, where the renderer has one; a @ b
  and a @ b.T, K around the vector width and at a power-of-two row stride, against numpy in float64."""
  r = Device["CPU"].renderer
  if not r.vector_types or r.register_block is None: pytest.skip("the renderer has no register block")
  rng = np.random.default_rng(M)
  for K, N in ((17, 96), (64, 128), (256, 33), (768, 512)):
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    if N % 32 == 0 and (t := r.matmul_tile_rows(M, K)):
      assert ("UPCAST_T", ("g", 0), t) in heuristic_opts(_kernel(Tensor.empty(M, K, device="CPU") @ Tensor.empty(K, N, device="CPU")), r)
    tol = 1e-5 * np.sqrt(K) + 1e-5
    np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=tol, atol=tol)
    bt = np.ascontiguousarray(b.T)
    np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(bt, device="CPU").T).numpy(), _ref(a, b), rtol=tol, atol=tol)

def test_tall_tile_stores_gated():
  """UPCAST_T by 12 on 1030 rows: 86 tiles, the last one's rows 1030 and 1031 past the end. Their stores (2 vectors of
  16 per row) and only theirs are gated: an ungated one would write the recomputed last row again, a right value that
  numerics can't tell from a gated one."""
  from tinycore.codegen.opt import apply_opts
  from tinycore.uop import Ops
  k = _kernel(Tensor.empty(1030, 64, device="CPU") @ Tensor.empty(64, 32, device="CPU"))
  k = apply_opts(k, (("VEC", ("g", 1), 16), ("UPCAST", ("g", 1), 2), ("UPCAST_T", ("g", 0), 12)))
  stores = [u for u in k.src if u.op is Ops.STORE]
  assert len(stores) == 24 and sum(len(st.src[0].src) == 3 for st in stores) == 4

@pytest.mark.slow
@pytest.mark.parametrize("M,K,N", [(1024, 1024, 1024), (1000, 1024, 1056), (2048, 512, 1024)])
def test_big_default_policy(M, K, N):
  """The bench's sizes through the default policy (packed panels visited in groups, the transposed copy in lanes)."""
  rng = np.random.default_rng(M + N)
  a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
  tol = 1e-5 * np.sqrt(K) + 1e-5
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=tol, atol=tol)
  bt = np.ascontiguousarray(b.T)
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(bt, device="CPU").T).numpy(), _ref(a, b), rtol=tol, atol=tol)

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16])
def test_half_inputs(dt, monkeypatch):
  monkeypatch.setattr(Device["CPU"].renderer, "matmul_panels", lambda *a: 32)
  rng = np.random.default_rng(3)
  a, b = rng.standard_normal((33, 64)).astype(np.float32), rng.standard_normal((64, 96)).astype(np.float32)
  ta, tb = Tensor(a, device="CPU").cast(dt), Tensor(b, device="CPU").cast(dt)
  ra, rb = ta.cast(dtypes.float32).numpy(), tb.cast(dtypes.float32).numpy()   # the rounded inputs
  out = (ta @ tb).cast(dtypes.float32).numpy()
  # float32 accumulation, one rounding of the result to the half type
  np.testing.assert_allclose(out, _ref(ra, rb), rtol=1e-2 if dt == dtypes.bfloat16 else 2e-3, atol=3e-2 if dt == dtypes.bfloat16 else 1e-2)

def test_batched_and_big_tile(monkeypatch):
  """A batch of matmuls, and a 256 x 320 x 512 one through the default policy (the 8x32 tile, not divisible by every
  candidate), against numpy."""
  rng = np.random.default_rng(4)
  a, b = rng.standard_normal((3, 40, 24)).astype(np.float32), rng.standard_normal((3, 24, 64)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=1e-4, atol=1e-4)
  a, b = rng.standard_normal((256, 320)).astype(np.float32), rng.standard_normal((320, 512)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=2e-4, atol=2e-4)
  monkeypatch.setattr(Device["CPU"].renderer, "matmul_panels", lambda *a: 32)
  np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b.T.copy(), device="CPU").T).numpy(), _ref(a, b), rtol=2e-4, atol=2e-4)

def test_batched_right_operands_pack(monkeypatch):
  """Attention's q @ k^T: a batch of transposed right operands, each packed into its own panels (the default policy
  packs from 512 rows of q), and a forced packing of an odd-sized batch, against numpy."""
  rng = np.random.default_rng(5)
  q, k = rng.standard_normal((2, 3, 512, 64)).astype(np.float32), rng.standard_normal((2, 3, 512, 64)).astype(np.float32)
  out = Tensor(q, device="CPU") @ Tensor(k, device="CPU").transpose(-1, -2)
  if Device["CPU"].renderer.matmul_panels(512, 64, 512, True):
    assert len([si for si in out.schedule() if not si.is_copy]) == 2   # the panel copy, then the matmul
  np.testing.assert_allclose(out.numpy(), _ref(q, k.swapaxes(-1, -2)), rtol=1e-4, atol=1e-4)
  monkeypatch.setattr(Device["CPU"].renderer, "matmul_panels", lambda *a: 32)
  a, b = rng.standard_normal((3, 17, 40)).astype(np.float32), rng.standard_normal((3, 40, 96)).astype(np.float32)
  out = Tensor(a, device="CPU") @ Tensor(b, device="CPU")
  assert len([si for si in out.schedule() if not si.is_copy]) == 2
  np.testing.assert_allclose(out.numpy(), _ref(a, b), rtol=1e-4, atol=1e-4)

def _np_conv(x, w, pad):
  from numpy.lib.stride_tricks import sliding_window_view
  xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
  return np.einsum("nchwij,ocij->nohw", sliding_window_view(xp, w.shape[2:], axis=(2, 3)), w.astype(np.float64))

@pytest.mark.parametrize("n,ci,h,wd,co", [(2, 8, 12, 16, 16), (1, 3, 9, 56, 8), (2, 16, 14, 24, 32), (1, 4, 7, 17, 5)])
def test_conv_tiles(n, ci, h, wd, co):
  """Convolutions take the register block along output channels x rows x 8/16 lanes of a row (a third output axis
  where the row's lanes can't widen); odd sizes fall back to smaller tiles. Against numpy in float64."""
  rng = np.random.default_rng(n * 1000 + ci * 100 + h + wd + co)
  x, w = rng.standard_normal((n, ci, h, wd)).astype(np.float32), rng.standard_normal((co, ci, 3, 3)).astype(np.float32)
  out = Tensor(x, device="CPU").conv2d(Tensor(w, device="CPU"), padding=1).numpy()
  np.testing.assert_allclose(out, _np_conv(x, w, 1), rtol=1e-4, atol=1e-4)

_ACC16 = """typedef float f16v __attribute__((vector_size(64), aligned(4)));
void k(float* restrict o, const float* restrict a, const float* restrict b, long n) {
  f16v acc[16] = {0};
  for (long i = 0; i < n; i++)
    for (int r = 0; r < 16; r++) acc[r] += a[i * 16 + r] * *(const f16v*)(b + i * 16);
  for (int r = 0; r < 16; r++) *(f16v*)(o + r * 16) = acc[r];
}"""

@pytest.mark.parametrize("cc", ["clang", "clang-19", "gcc"])
def test_512_bit_vectors_stay_whole(cc, tmp_path):
  """The renderer's 16-float vector types compile to zmm registers with the plugin's flags: clang tunes some AVX-512
  parts for 256 bits and split them into ymm pairs (16 accumulators became 32 and spilled; matmul at half speed)."""
  import shutil, subprocess
  from tinycore_cpu.compiler_c import CCompiler
  from tinycore_cpu.probe import probe
  if "avx512f" not in set(probe()["flags"]): pytest.skip("the host has no AVX-512")
  if (path := shutil.which(cc)) is None: pytest.skip(f"{cc} is not installed")
  flags = [f for f in CCompiler(path).flags if f != "-shared"]
  (tmp_path / "k.c").write_text(_ACC16)
  p = subprocess.run([path, *flags, "-S", "-o", str(tmp_path / "k.s"), str(tmp_path / "k.c")], capture_output=True, text=True)
  assert p.returncode == 0, p.stderr
  asm = (tmp_path / "k.s").read_text()
  assert "zmm" in asm and "ymm" not in asm, "512-bit vectors were split"

def test_panel_policy(monkeypatch):
  """Which right operands the C renderer packs, for a 2 MiB L2 and the 8x32 tile: transposed ones from 64 rows of x,
  row-major ones from half of L2 on; never into fewer than 4 panels, nor for a few rows."""
  r = Device["CPU"].renderer
  if not hasattr(r, "tiling"): pytest.skip("not the C renderer")
  monkeypatch.setattr(r, "tiling", Tiling(8, 32, CacheSizes(48 << 10, 2 << 20, 64 << 20)))
  p = r.matmul_panels
  assert p(256, 512, 512, True) == 32 and p(64, 1024, 1024, True) == 32 and p(128, 64, 128, True) == 32
  assert p(256, 784, 512, False) == 32 and p(1024, 1024, 1024, False) == 32 and p(64, 2048, 512, False) == 32
  assert p(256, 512, 512, False) == 32                                      # from half of L2 on (Zen 4: 512 KB of 1 MB)
  assert p(256, 511, 512, False) == 0 and p(2048, 64, 2048, False) == 0     # under half: the plain walk is as fast
  assert p(32, 1024, 1024, True) == 0 and p(1, 4096, 4096, True) == 0       # too few rows to pay for the copy
  assert p(512, 64, 64, True) == 0 and p(512, 4, 512, True) == 0           # 2 panels; a reduce too short
  assert p(256, 10, 512, True) == 32 and p(64, 10, 128, True) == 0         # a short reduce: once the output is big
  assert p(256, 16384, 512, True) == 0                                      # a panel bigger than half of L2

def test_panel_group_policy():
  """How many packed panels a row tile meets in turn (Tiling.panel_group): as many as fit in a quarter of L2, while
  the 8-row tile of the left operand (8 x K floats) fits in L1, else 4; leaving at least 4 groups for the threads."""
  t = Tiling(8, 32, CacheSizes(48 << 10, 2 << 20, 64 << 20))
  panel = lambda K: K * 32 * 4
  assert t.panel_group(panel(1024), 32) == 4      # 4 x 128 KiB = a quarter of L2; the row tile 32 KiB
  assert t.panel_group(panel(256), 32) == 8       # 16 would leave 2 groups
  assert t.panel_group(panel(256), 128) == 16
  assert t.panel_group(panel(1024), 12) == 2      # 12 panels: 6 groups of 2; 3 groups of 4 would be too few
  assert t.panel_group(panel(1024), 6) == 1       # 3 groups of 2: too few
  assert t.panel_group(panel(2048), 64) == 4      # a 64 KiB row tile: from L2 or beyond once per 4 panels
  assert t.panel_group(panel(4096), 12) == 2 and t.panel_group(panel(4096), 6) == 1   # at least 4 groups
  assert Tiling(4, 16, CacheSizes(32 << 10, 256 << 10, 8 << 20)).panel_group(256 * 16 * 4, 64) == 4

@pytest.mark.parametrize("group", [2, 4, 8])
@pytest.mark.parametrize("M,K,N,T", [(64, 96, 256, False), (24, 33, 512, True), (1024, 64, 512, False), (40, 17, 1024, True)])
def test_grouped_panels(M, K, N, T, group, monkeypatch):
  """The panel loop split in groups (GROUP, the inner part innermost) computes the same values: forced on the packed
  matmul at sizes that are not multiples of the row tile, for a @ b and a @ b.T, against numpy in float64."""
  r = Device["CPU"].renderer
  if not r.vector_types or r.register_block is None: pytest.skip("no register block")
  monkeypatch.setattr(r, "matmul_panels", lambda *a: 32)
  monkeypatch.setattr(r, "matmul_panel_group", lambda *a: group)
  rng = np.random.default_rng(M + K + N + group)
  a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
  rhs = Tensor(np.ascontiguousarray(b.T), device="CPU").T if T else Tensor(b, device="CPU")
  out = Tensor(a, device="CPU") @ rhs
  assert ("GROUP", ("g", 0), group) in heuristic_opts(_kernel(out), r)
  tol = 1e-5 * np.sqrt(K) + 1e-5
  np.testing.assert_allclose(out.numpy(), _ref(a, b), rtol=tol, atol=tol)

def test_beam_reaches_the_group():
  """BEAM's action space (codegen/search.py) offers the grouping after the loop swap, so it can find the heuristic's
  kernel: the heuristic's actions are a path through next_actions."""
  from tinycore.codegen.search import next_actions
  from tinycore.codegen.opt import apply_opt
  r = Device["CPU"].renderer
  if not r.vector_types or r.register_block is None: pytest.skip("no register block")
  a, b = Tensor.empty(1024, 1024, device="CPU"), Tensor.empty(1024, 1024, device="CPU")
  k = _kernel(a @ b.T)
  path = (("VEC", ("g", 2), 16), ("UPCAST", ("g", 2), 2), ("UPCAST", ("g", 0), 8), ("SWAP", ("g", 0), ("g", 1)), ("GROUP", ("g", 0), 8))
  for i, o in enumerate(path):
    assert o in next_actions(k, r, path[:i]), (o, next_actions(k, r, path[:i]))
    k = apply_opt(k, o)
  assert not next_actions(k, r, path)

@pytest.mark.parametrize("M", [24, 25, 31, 32, 33, 47, 97, 100, 197, 257])
def test_beam_offers_the_tall_tile(M, monkeypatch):
  """BEAM's action space (codegen/search.py) offers the renderer's taller matmul tile (Renderer.matmul_tall_rows: 12
  rows with AVX-512) on the row axis after the widened vector (UPCAST_T, clamped where it doesn't divide M), so BEAM
  can reach it on shapes the heuristic's policy leaves alone. Every matmul kernel is made the BEAM way (vector, widened, then the
  offered tall tile), packed panels or not, and matches numpy in float64."""
  from tinycore.codegen import opt as O
  from tinycore.codegen.search import next_actions
  r = Device["CPU"].renderer
  if not r.vector_types or r.register_block is None or not r.matmul_tall_rows: pytest.skip("no taller register tile")
  t, heuristic, taken = r.matmul_tall_rows, O._heuristic, []
  def beam_path(k, renderer):
    opts = heuristic(k, renderer)[0]
    # the output's row axis; the panel copy, and a product whose vector axis is the row axis too, keep the heuristic's
    rows = [g for g in O._globals(k) if O._bound(g) == M and g.arg != opts[0][1]] if opts and opts[0][0] == "VEC" else []
    if len(rows) != 1: return heuristic(k, renderer)
    path = opts[:2] if len(opts) > 1 and opts[1] == ("UPCAST", opts[0][1], 2) else opts[:1]   # the vector, widened
    want = ("UPCAST_T", rows[0].arg, t)
    offered = next_actions(O.apply_opts(k, path), renderer, path)
    assert want in offered, (want, offered)
    taken.append(path + (want,))
    return path + (want,), O.apply_opts(k, path + (want,))
  monkeypatch.setattr(O, "_heuristic", beam_path)
  from tinycore.engine import run
  monkeypatch.setattr(run, "_runners", {})   # compiled afresh: a runner of the same product from another test is the heuristic's
  from tinycore.engine import schedule_cache
  schedule_cache.clear()
  rng = np.random.default_rng(M)
  for K, N, panels in ((64, 96, 0), (40, 128, 32), (M, M, 0)):
    monkeypatch.setattr(r, "matmul_panels", lambda *_, p=panels: p if N % 32 == 0 else 0)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    tol = 1e-5 * np.sqrt(K) + 1e-5
    np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), _ref(a, b), rtol=tol, atol=tol)
  assert len(taken) >= 2, taken

def test_dot_form_takes_a_4x4_block():
  """g @ W.T with both operands contiguous along the reduce (a backward pass's input gradient, unpacked): 16-lane
  vectors along the reduce and a 4x4 block of outputs, so each vector load feeds 4 FMAs."""
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  g, w = Tensor.empty(256, 512, device="CPU"), Tensor.empty(512, 512, device="CPU")
  opts = heuristic_opts(_kernel((g.reshape(256, 1, 512) * w.reshape(1, 512, 512)).sum(-1)), r)
  assert opts[0][0] == "VEC_R" and opts[0][2] == 16 and sorted(o[2] for o in opts[1:] if o[0] == "UPCAST") == [4, 4], opts

def _kernels(*ts): return [si for si in Tensor.schedule(*ts) if not si.is_copy]

@pytest.mark.parametrize("M,K,N", [(32, 64, 64), (33, 64, 64), (64, 255, 96), (256, 257, 64), (72, 1025, 33), (256, 784, 512),
                                   (40, 65, 64), (512, 64, 64), (520, 97, 64), (512, 256, 512)])
def test_transposed_left_operand_row_panels(M, K, N):
  """x.T @ g (a weight gradient): a left operand that is a transposed view is copied into 8-row panels where the
  renderer asks (M a multiple of 8, at least 4 panels), and the product matches numpy in float64 either way."""
  r = Device["CPU"].renderer
  rng = np.random.default_rng(M + K + N)
  x, g = rng.standard_normal((K, M)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
  out = Tensor(x, device="CPU").T @ Tensor(g, device="CPU")
  packs = r.matmul_row_panels(M, K, N) != 0
  assert packs == (M % 8 == 0 and M >= 32 and N >= 64) or not hasattr(r, "tiling")
  whole = (p := r.matmul_panels(M, K, N, False)) and N % p == 0
  padded = not whole and bool(getattr(r, "matmul_padded_panels", lambda *a: 0)(M, K, N, False))
  # g's panel copy where it is packed; a padded one also drops the pad columns after the product (one more copy)
  assert len(_kernels(out)) == 1 + packs + (1 if whole else 2 if padded else 0)
  tol = 1e-5 * np.sqrt(K) + 1e-5
  np.testing.assert_allclose(out.numpy(), _ref(x.T, g), rtol=tol, atol=tol)

@pytest.mark.parametrize("M,K,N", [(1, 7, 9), (8, 32, 33), (64, 64, 128), (255, 257, 129), (256, 512, 512), (256, 784, 512),
                                   (33, 1025, 31), (1023, 64, 64)])
def test_matmul_gradients(M, K, N):
  """d/dx and d/dw of x @ w against numpy in float64, at sizes around the tile edges: where the CPU packs an operand
  of a backward product, the backward is two matmuls (g @ w.T, x.T @ g) that take the packed forms."""
  rng = np.random.default_rng(M * 7 + K * 3 + N)
  a, b, g = [rng.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N), (M, N))]
  ta, tb = Tensor(a, device="CPU"), Tensor(b, device="CPU")
  ga, gb = ((ta @ tb) * Tensor(g, device="CPU")).sum().gradient(ta, tb)
  ka, kb = np.sqrt(N) * 1e-5 + 1e-5, np.sqrt(M) * 1e-5 + 1e-5
  np.testing.assert_allclose(ga.numpy(), _ref(g, b.T), rtol=ka, atol=ka)
  np.testing.assert_allclose(gb.numpy(), _ref(a.T, g), rtol=kb, atol=kb)

@pytest.mark.parametrize("M,panels", [(512, 64), (784, 98), (40, 5)])
def test_row_panel_copy_reads_whole_lines(M, panels):
  """The copy of x.T into 8-row panels takes 2 panels a step where their count is even, so each row's read is a whole
  64-byte line (16 floats) instead of two halves fetched by two panels (opt_elementwise._whole_lines)."""
  r = Device["CPU"].renderer
  if not r.vector_types or r.register_block is None: pytest.skip("the CPU's vector renderer only")
  if not r.matmul_row_panels(M, 256, 512): pytest.skip("this renderer doesn't pack the left operand in row panels")
  ks = _kernels(Tensor.empty(256, M, device="CPU").T @ Tensor.empty(256, 512, device="CPU"))
  copy = [si for si in ks if si.ast is not ks[-1].ast]
  assert len(copy) >= 1
  opts = heuristic_opts(_kernel_of(copy[0].ast), r)
  assert (("UPCAST", ("g", 0), 2) in opts) == (panels % 2 == 0), opts

def test_mlp_backward_takes_the_microkernel():
  """The bench's MLP layers: the weight gradient x.T @ g reads x in row panels and g @ W.T reads W.T in column panels,
  both through the 8x32 register block (16 lanes x 2, 8 rows), not the strided broadcast-and-reduce autograd makes."""
  r = Device["CPU"].renderer
  if getattr(r, "register_block", None) != (8, 32): pytest.skip("the 8x32 AVX-512 tile only")
  for K in (784, 512):
    x, w, g = Tensor.empty(256, K, device="CPU"), Tensor.empty(K, 512, device="CPU"), Tensor.empty(256, 512, device="CPU")
    gx, gw = ((x @ w) * g).sum().gradient(x, w)
    # (784 columns of gx don't make whole 32-column panels of W.T: the last panel is padded to 800 columns and the
    # product's kernel is followed by the copy that drops the pad, CRenderer.matmul_padded_panels)
    for t in (gw, gx):
      ks = [k for k in _kernels(t) if any(u.op is Ops.REDUCE_AXIS for u in k.ast.toposort())]
      opts = heuristic_opts(_kernel_of(ks[-1].ast), r)
      assert opts[0][0] == "VEC" and opts[0][2] == 16, opts
      assert len(_kernels(t)) >= 2 and opts[1][0] == "UPCAST" and opts[1][2] == 2 and opts[2][2] in (8, 12), opts

def _kernel_of(ast): return split_ranges(graph_rewrite(lower_kernel(ast), symbolic))

def _opts_of(out: Tensor) -> tuple:
  return heuristic_opts(_kernel(out), Device["CPU"].renderer)

@pytest.mark.parametrize("N", [2, 10, 15])
def test_narrow_head_reads_a_transposed_copy(N):
  """x @ w with fewer columns than a vector (a classifier head): w is copied transposed first (a kernel of its own) and
  the matmul reduces in vector lanes along K, both operands contiguous; forward and gradients as numpy's."""
  r = Device["CPU"].renderer
  if not r.vector_types: pytest.skip("the renderer has no vector types")
  assert r.matmul_narrow_transpose(256, 512, N)
  rng = np.random.default_rng(N)
  xn, wn = rng.standard_normal((256, 512), dtype=np.float32), rng.standard_normal((512, N), dtype=np.float32)
  x, w = Tensor(xn, device="CPU"), Tensor(wn, device="CPU", requires_grad=True)
  out = (x @ w).relu()
  sched = out.schedule()
  assert len(sched) == 2 and sched[0].ast.src[0].shape[-1] != N, "no transposed copy of w ahead of the matmul"
  assert _opts_of(out)[0][0] == "VEC_R", _opts_of(out)
  np.testing.assert_allclose(out.numpy(), np.maximum(_ref(xn, wn), 0), rtol=1e-4, atol=1e-3)
  g = rng.standard_normal((256, N)).astype(np.float32)
  (gw,) = out.gradient(w, gradient=Tensor(g, device="CPU"))
  np.testing.assert_allclose(gw.numpy(), xn.T.astype(np.float64) @ (g * (_ref(xn, wn) > 0)), rtol=1e-4, atol=1e-3)
  # not for a transposed left operand (x.T @ g: its reduce walks rows) nor a vector-wide right one
  assert not any(r.matmul_narrow_transpose(*s) for s in ((256, 512, 16), (256, 512, 1), (64, 96, 10)))
  assert len((Tensor.empty(512, 256, device="CPU").T @ w).schedule()) == 1

def test_sgd_fused_weight_gradient_stores_lanes():
  """w - lr * relu(h).T @ g (an SGD step fused into the head's weight gradient): the old weight, read strided along the
  vector axis outside the reduce, is gathered lane by lane, so the tile stays 16-lane vectors (it fell back to scalar
  accumulators: one core 445 -> 72 us in the MLP bench's step); values as numpy's."""
  r = Device["CPU"].renderer
  if not r.vector_types or r.register_block is None: pytest.skip("the renderer has no vector types")
  rng = np.random.default_rng(1)
  hn, gn, wn = (rng.standard_normal(s, dtype=np.float32) for s in ((256, 512), (256, 10), (512, 10)))
  h, g, w = (Tensor(a, device="CPU") for a in (hn, gn, wn))
  out = w - (h.relu().T @ g) * 0.01
  assert _opts_of(out)[0][0] == "VEC_S", _opts_of(out)
  np.testing.assert_allclose(out.numpy(), wn - 0.01 * (np.maximum(hn, 0).T.astype(np.float64) @ gn), rtol=1e-5, atol=1e-5)

def test_panel_loads_prefetched():
  """The C renderer prefetches a packed panel's rows ahead of the microkernel (its loads step 128 bytes a reduce step):
  both 16-float loads of a 32-wide panel, 2 KiB ahead; a row-major operand's 64-byte steps and fused programs don't."""
  r = Device["CPU"].renderer
  if not hasattr(r, "PREFETCH_AHEAD") or r.register_block != (8, 32): pytest.skip("not the AVX-512 C renderer")
  from tinycore.codegen import get_program
  a, b = Tensor.empty(256, 1024, device="CPU"), Tensor.empty(1024, 1024, device="CPU")
  src = get_program([si for si in (a @ b).schedule() if not si.is_copy][-1].ast, r).src
  assert src.count("__builtin_prefetch(") == 2 and "+512);" in src, src   # 16 steps of 32 floats ahead
  q = Tensor.empty(1, 2, 256, 64, device="CPU")
  for si in q.scaled_dot_product_attention(q, q).schedule():
    if not si.is_copy: assert "__builtin_prefetch(" not in get_program(si.ast, r).src
  v, w = Tensor.empty(1, 512, device="CPU"), Tensor.empty(512, 512, device="CPU")
  assert "__builtin_prefetch(" not in get_program([si for si in (v @ w).schedule() if not si.is_copy][-1].ast, r).src
