"""The matmul tile this CPU wants, from what the machine says about itself: its vector ISA (/proc/cpuinfo flags) and its
cache sizes (/sys/devices/system/cpu/cpu0/cache). The C renderer turns the answer into codegen capabilities.

The microkernel is rows x cols float32 accumulators held in vector registers: each step of the reduce loads cols/16
vectors of the packed right operand, broadcasts `rows` elements of the left one and issues rows*cols/16 FMAs. With
AVX-512 (32 registers of 16 floats) 8x32 keeps 16 accumulators + 2 operand vectors + a broadcast in registers and
issues 16 FMAs per 10 loads (one thread at 1024^3: 146-155 GFLOP per CPU-second against 122-127 for the 8x16 tile over
16-column panels); with 16 registers (AVX2, NEON) 4x16 is the biggest tile that doesn't spill.

Around the microkernel: the right operand is packed in panels as wide as the tile (`panel_width`), the panel loop is
outermost, and each row tile of the left operand meets a group of panels in turn (`panel_group`, codegen/opt.py's
GROUP), so the left operand streams once per group; the C renderer prefetches the panel rows ahead (renderer_c.py).
Matmuls take a taller tile of the same width where it pays (`tall_rows`, 12x32 with AVX-512: 24 accumulators + 2
panel vectors + 1 broadcast of 32 registers): 12 rows needn't divide M, the last row tile's rows past M recompute row
M-1 with their stores gated off (codegen/opt.py's UPCAST_T), so every size runs in one kernel; `tile_rows` takes it
where those repeats are at most 2.5% of the work and the L1 ways hold the tile's rows (not on a 32 KB 8-way L1 at a
power-of-two K), and clamps 8-row tiles where 8 doesn't divide M. The figures below are from an Intel AVX-512 core
(48 KB 12-way L1); on Zen 4 (32 KB 8-way) 12 rows tie with 8 at K = 512, 768, 1040 and lose at 1024 and 2048.
One core, GFLOP per CPU-second (the matmul and its panel copy, runs
interleaved at load 4-6, medians of 4-6): 1024^3 8 rows 207, 10 213, 12 217, 13 214, 14 211; 2048^3 192, 196, 203,
199, 200. (14 rows spilled 12 accumulators until each accumulator update followed its product in the loop body,
codegen/linearize.py; 12 rows = 48 KB of the left operand at K=1024, one L1.) Panel groups with the 12-row tile:
1024^3 216 in groups of 4 (the policy's), 218 of 8, 205 ungrouped; 2048^3 202 ungrouped (the policy's), 205 of 2,
206 of 4, 193 of 8: within the noise, left as is. Other shapes measured: 4x64 on 1024^3 184 against 194 for 8x32 (its
64-wide panels double the L2 traffic per row). K blocking (C tiles accumulated across K blocks, a K block of a panel
in L1) lost in a C model at 1024 and 2048 (the C tiles' read-modify-write, rows 4-8 KB apart)."""
from __future__ import annotations
import functools, os
from dataclasses import dataclass

@dataclass(frozen=True)
class CacheSizes:
  l1d: int = 32 << 10
  l2: int = 1 << 20
  l3: int = 8 << 20
  l1d_ways: int = 8   # L1d associativity: the lines one set holds (rows a power-of-two stride apart share a set)

def _parse_size(text: str) -> int | None:
  """sysfs writes "48K", "2048K", "480M": None for anything else."""
  t = text.strip().upper()
  mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
  digits = t[:-1] if t[-1:] in "KMG" else t
  return int(digits) * mult if digits.isdigit() and int(digits) > 0 else None

def read_caches(root: str = "/sys/devices/system/cpu/cpu0/cache") -> CacheSizes:
  """Data/unified cache sizes by level; a level sysfs doesn't show (containers, non-Linux) keeps the default."""
  found: dict[str, int] = {}
  try: entries = sorted(os.listdir(root))
  except OSError: return CacheSizes()
  for e in entries:
    if not e.startswith("index"): continue
    try:
      with open(os.path.join(root, e, "level")) as f: level = f.read().strip()
      with open(os.path.join(root, e, "type")) as f: kind = f.read().strip()
      with open(os.path.join(root, e, "size")) as f: size = _parse_size(f.read())
    except OSError: continue
    if size is None or kind == "Instruction": continue
    name = {"1": "l1d", "2": "l2", "3": "l3"}.get(level)
    if name: found[name] = size
    if name == "l1d":
      try:
        with open(os.path.join(root, e, "ways_of_associativity")) as f: ways = f.read().strip()
      except OSError: continue
      if ways.isdigit() and int(ways) > 0: found["l1d_ways"] = int(ways)
  return CacheSizes(**found)

@dataclass(frozen=True)
class Tiling:
  rows: int           # output rows per register tile
  cols: int           # output columns per register tile (a multiple of the 16-float vector type codegen emits)
  caches: CacheSizes
  tall_rows: int = 0  # rows of a taller tile of the same width for matmuls, its last tile clamped (0: none)

  def tile_rows(self, M: int, K: int = 0) -> int:
    """The rows of a matmul's register tile of M output rows (reduce K) that needn't divide M (the last tile clamped),
    where it beats the rows that divide M; 0 keeps the block's rows (`rows`, or 4 where they don't divide M).
    Costs: the rows computed (ceil(M/r) * r) over the tile's speed, the tall tile 2.5% ahead of the block's (1024^3 on
    an Intel AVX-512 core, 48 KB 12-way L1: 217 against 207; 1024: 86 tiles of 12, 0.8% repeated, taken; 256 stays at 8:
    3.1%), a 4-row tile at 0.7 of the block's (one core here, 196x768x768: 70 against 99 GFLOP/s for 8 rows clamped).
    The tall tile only where L1 holds its rows: rows of the left operand K floats apart share an L1 set when K * 4 is a
    multiple of the set span (a 32 KB 8-way L1, Zen 4: K = 1024 puts all 12 rows in one set of 8 ways, 102 against 112
    for 8 rows; K = 1040, 111 against 110). M = 197: 17 tiles of 12; M = 50 or 100: 8 rows clamped (94 against 46
    GFLOP/s for 50x512x512 tiled along its columns only, 109 against 81 for 100x512x512's 4 rows)."""
    if M < 2 * self.rows: return 0
    cands = [self.rows] + ([self.tall_rows] if self.tall_rows and self._rows_fit_l1(self.tall_rows, K) else [])
    def cost(r: int) -> float: return -(-M // r) * r / (1.025 if r == self.tall_rows else 1.0)
    best = min(cands, key=cost)
    if M % self.rows and M % 4 == 0 and M / 0.7 < cost(best): return 0   # the 4-row tile that divides M
    return best if best == self.tall_rows or M % best else 0

  def _rows_fit_l1(self, rows: int, K: int) -> bool:
    """The lines `rows` rows K floats apart touch at one k: at most the L1 ways of them in any one set."""
    if K <= 0: return True
    sets = max(1, self.caches.l1d // (64 * self.caches.l1d_ways))
    per_set: dict[int, int] = {}
    for i in range(rows): per_set[i * K * 4 // 64 % sets] = per_set.get(i * K * 4 // 64 % sets, 0) + 1
    return max(per_set.values()) <= self.caches.l1d_ways

  def panel_width(self, K: int) -> int:
    """Columns per packed panel of a matmul's right operand: the tile's width, while one panel (K x cols floats)
    stays in half of L2 next to the left operand's rows streaming past it; 0 (don't pack) past that."""
    return self.cols if K * self.cols * 4 <= self.caches.l2 // 2 else 0

  def panel_group(self, panel_bytes: int, panels: int) -> int:
    """Panels a row tile of the left operand meets before the next one: the most (a power of two) whose panels together
    stay in a quarter of L2 (the rest holds the rows of the left operand streaming past and the output tiles), leaving
    at least 4 groups for the threads to share out. Only while the row tile (rows x K, K =
    panel_bytes / (cols * 4)) fits in L1: then each of its elements comes from memory once per group instead of once
    per panel. A longer row tile streams from L2 or beyond once per group of 4 panels: on an Intel core, 2048^3 no gain
    in groups of 2 or 4, a loss at 8; on Zen 4, one thread, the matmul kernel, GFLOP per CPU-second: x.T @ g with the
    left operand in row panels (Renderer.matmul_row_panels) 2048^3 93 -> 108, 512x4096x4096 100 -> 112, 4096^3 92 ->
    109; a @ b 2048^3 107.5 -> 110.5, 4096^3 108 -> 111."""
    if self.rows * panel_bytes // self.cols > self.caches.l1d:
      return next((g for g in (4, 2) if panels % g == 0 and panels // g >= 4), 1)
    g = 1
    while panels % (2 * g) == 0 and panels // (2 * g) >= 4 and 2 * g * panel_bytes <= self.caches.l2 // 4: g *= 2
    return g

def tiling_for(flags: set[str], caches: CacheSizes) -> Tiling:
  if "avx512f" in flags: return Tiling(8, 32, caches, 12)
  return Tiling(4, 16, caches)

@functools.cache
def host_tiling() -> Tiling:
  from tinycore_cpu.probe import probe
  return tiling_for(set(probe()["flags"]), read_caches())
