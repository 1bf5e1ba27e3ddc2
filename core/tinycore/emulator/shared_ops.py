"""Shared-memory operations beyond plain loads and stores (codegen/opt_smem.py emits them):

- asynchronous copies (NVIDIA cp.async): a STORE with arg "async" is *in flight* from issue until a wait covers it. It
  joins the thread's open group; BARRIER("async_commit") closes the group; BARRIER("async_wait", n) completes every
  group but the newest n. Only then does the data land in shared memory. Reading (or plainly writing) an address with a
  copy in flight is reported (AsyncCopyPending): on hardware the read would see old or torn data. A copy may land any
  time after issue, so at issue it must already be race-free against other threads' reads in the current barrier
  epoch (MissingBarrier, the write-after-read case).
- warp matrix loads (NVIDIA ldmatrix, INDEX arg ("ldmatrix", matrices, trans)): lane 8j+i gives the address of row i of
  8x8 matrix j (16 bytes, 16-byte aligned); lane l receives row l//4, elements 2(l%4) and 2(l%4)+1 of each matrix, or
  with .trans the transposed matrix's (so element (2(l%4)+e, l//4)). The same table as the PTX ISA's "ldmatrix".
  Rows of 8-bit elements (fp8 fragments of mma.m16n8k32) are the same bytes: 16 a row, lane l gets 4(l%4)..4(l%4)+3
  of row l//4; .trans, which swaps 16-bit elements, has no 8-bit form.
- warp shuffles (CUSTOM arg ("warp_xor", mask), NVIDIA shfl.sync.bfly): lane l receives the value of lane l ^ mask of
  its warp; every lane of the warp must take part (a partially active warp is reported)."""
from __future__ import annotations
import numpy as np
from tinycore.emulator.alu import from_mem, reg_np
from tinycore.emulator.errors import EmulatorError, OutOfBounds, UninitializedRead, AsyncCopyPending

def _vec_first(idx: np.ndarray) -> np.ndarray: return idx[:, 0] if idx.ndim == 2 else idx

def check_aligned(it, lanes_idx: np.ndarray, mm: np.ndarray, itemsize: int, align: int, what: str):
  """Every active lane's first element must sit on an `align`-byte boundary (16-byte copies and matrix rows)."""
  first, m = _vec_first(lanes_idx), mm[:, 0] if mm.ndim == 2 else mm
  if (bad := m & ((first * itemsize) % align != 0)).any():
    it._fail(EmulatorError, bad, lambda l: f"misaligned {what}: element {int(first[l])} is byte {int(first[l]) * itemsize}, "
             f"not a multiple of {align}")

def issue_copy(it, u, region, idx, mm, val_bits, label: str):
  """An async STORE: checks now (bounds were checked by _addr), lands at the covering wait."""
  if region is None: raise EmulatorError(f"{it.name}: an asynchronous copy must write shared (local) memory")
  n = idx.shape[1] if idx.ndim == 2 else 1
  check_aligned(it, idx - (it.grp[:, None] if idx.ndim == 2 else it.grp) * region.size, mm, region.data.itemsize, n * region.data.itemsize,
                f"{n * region.data.itemsize}-byte async copy into {label}")
  src = it._addr(u.src[1])   # the global side: the same alignment rule
  check_aligned(it, src[1], src[2], src[3].itemsize, n * src[3].itemsize, f"{n * src[3].itemsize}-byte async copy from {src[4]}")
  a = idx[mm]
  t = np.broadcast_to(it.lane[:, None] if idx.ndim == 2 else it.lane, idx.shape)[mm]
  if (busy := region.pending[a] > 0).any():
    i = int(np.flatnonzero(busy)[0])
    it._fail(AsyncCopyPending, it.lane == t[i], lambda l: f"async copy into {label} index {int(a[i]) % region.size} while an earlier copy "
             f"to it is still in flight")
  it._check_race(region, a, t, write=True, label=label)
  region.pending[a] += 1
  it.async_open.append((region, a, t, val_bits[mm]))

def commit(it):
  it.async_groups.append(it.async_open)
  it.async_open = []

def wait(it, keep: int):
  """Complete all committed groups but the newest `keep`: their data lands now, written in the current epoch."""
  n = max(0, len(it.async_groups) - keep)
  done, it.async_groups = it.async_groups[:n], it.async_groups[n:]
  for grp in done:
    for region, a, t, bits in grp:
      region.pending[a] -= 1
      region.data[a], region.init[a], region.w_tid[a], region.w_ep[a] = bits, True, t, it.epoch

def check_not_pending(it, region, a, t, label: str, what: str):
  if (busy := region.pending[a] > 0).any():
    i = int(np.flatnonzero(busy)[0])
    it._fail(AsyncCopyPending, it.lane == t[i], lambda l: f"{what} {label} index {int(a[i]) % region.size} while an async copy into it "
             f"is in flight (no cp.async wait_group covers it)")

def ldmatrix(it, u) -> np.ndarray:
  ind = u.src[0]
  _, mats, trans = ind.arg
  pos = it.pos[id(ind.src[0])]
  region, label = it.locals[pos], f"local {pos}"
  dt = ind.src[0].dtype.base
  per_row, per_lane = 16 // dt.itemsize, 4 // dt.itemsize   # elements in a 16-byte row, and in a lane's 4 bytes of it
  if trans and dt.itemsize != 2: raise EmulatorError(f"{it.name}: ldmatrix .trans moves 16-bit elements, not {dt}")
  row = np.broadcast_to(it.v[it.pos[id(ind.src[1])]], (it.N,)).astype(np.int64)
  m = it._mask()
  W = it.N // 32
  if it.L % 32: raise EmulatorError(f"{it.name}: ldmatrix needs workgroups of whole warps, got {it.L} threads")
  if (part := (mw := m.reshape(W, 32)).any(1) & ~mw.all(1)).any():
    it._fail(EmulatorError, np.repeat(part, 32) & ~m, lambda l: "ldmatrix with inactive lanes in the warp")
  prov = np.zeros((W, 32), bool)
  prov[:, :8 * mats] = True
  prov = prov.reshape(-1) & m   # the lanes whose addresses are read
  check_aligned(it, row, prov, dt.itemsize, 16, f"ldmatrix row address into {label}")
  if (oob := prov & ((row < 0) | (row + per_row > region.size))).any():
    it._fail(OutOfBounds, oob, lambda l: f"out-of-bounds ldmatrix row of {label} at index {int(row[l])}..{int(row[l]) + per_row - 1} "
             f"(size {region.size})")
  addr = (row + it.grp * region.size)[:, None] + np.arange(per_row)   # (N, per_row): each providing lane's row
  a, t = addr[prov].reshape(-1), np.repeat(it.lane[prov], per_row)
  check_not_pending(it, region, a, t, label, "ldmatrix read of")
  if (bad := ~region.init[a]).any():
    i = int(np.flatnonzero(bad)[0])
    it._fail(UninitializedRead, it.lane == t[i], lambda l: f"ldmatrix read of uninitialized {label} at index {int(a[i]) % region.size}")
  it._check_race(region, a, t, write=False, label=label)
  rows = from_mem(region.data[addr.reshape(-1)], dt).reshape(W, 32, per_row)   # [warp, providing lane, element]
  lane = np.arange(32)
  out = np.zeros((W, 32, per_lane * mats), rows.dtype)
  for j in range(mats):
    for e in range(per_lane):
      if trans: out[:, :, per_lane * j + e] = rows[:, 8 * j + 2 * (lane % 4) + e, lane // 4]
      else: out[:, :, per_lane * j + e] = rows[:, 8 * j + lane // 4, per_lane * (lane % 4) + e]
  return out.reshape(it.N, per_lane * mats).astype(reg_np(u.dtype))

def warp_xor(it, u) -> np.ndarray:
  mask, ws = int(u.arg[1]), it.model.warp_size
  if it.L % ws or not 0 < mask < ws: raise EmulatorError(f"{it.name}: warp shuffle xor {mask} with warps of {ws} in workgroups of {it.L}")
  m = it._mask().reshape(-1, ws)
  if (part := m.any(1) & ~m.all(1)).any():
    it._fail(EmulatorError, np.repeat(part, ws) & ~it._mask(), lambda l: "warp shuffle with inactive lanes in the warp")
  x = np.broadcast_to(it.v[it.pos[id(u.src[0])]], (it.N,))
  return x.reshape(-1, ws)[:, np.arange(ws) ^ mask].reshape(it.N).astype(reg_np(u.dtype))
