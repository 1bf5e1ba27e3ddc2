"""Hashing built from uint64 elementwise ops: Keccak-f[1600] sponges (SHA-3 / SHAKE) and a 16-byte tree hash of a tensor.

The state is a (batch, 5, 5) uint64 tensor; every step of a round is a few whole-state ops (pi is a skew done with
reshapes), so a round is one small kernel whose elements compute only their own lane."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.tensor_base import TensorBase, tensor_type

def _keccak_tables():
  """Rotation offsets (rho) and round constants (iota) computed as the Keccak reference defines them."""
  rot, (x, y) = [0] * 25, (1, 0)
  for t in range(24): rot[x + 5 * y], (x, y) = ((t + 1) * (t + 2) // 2) % 64, (y, (2 * x + 3 * y) % 5)
  def rc_bit(t):   # LFSR x^8 + x^6 + x^5 + x^4 + 1
    r = 1
    for _ in range(t % 255):
      r <<= 1
      if r & 0x100: r ^= 0x171
    return r & 1
  rcs = [sum(rc_bit(j + 7 * i) << ((1 << j) - 1) for j in range(7)) for i in range(24)]
  return rot, rcs
_ROT, _RC = _keccak_tables()

# name -> (rate in bytes, domain-separation byte); digest length is the capacity's half, (200 - rate) // 2, as in tinygrad
_KECCAK_CFGS = {"sha3_224": (144, 0x06), "sha3_256": (136, 0x06), "sha3_384": (104, 0x06), "sha3_512": (72, 0x06),
                "shake_128": (168, 0x1F), "keccak_256": (136, 0x01)}

_consts: dict = {}
def _keccak_consts(device):
  """Per-lane rotations and the round constants as (5,5) buffers, not graph constants: all 24 rounds compile to one kernel."""
  Tensor = tensor_type()
  if device not in _consts:
    rot = Tensor([[_ROT[x + 5 * y] for x in range(5)] for y in range(5)], dtype=dtypes.uint64, device=device).realize()
    rcs = [Tensor([[rc] + [0] * 4] + [[0] * 5] * 4, dtype=dtypes.uint64, device=device).realize() for rc in _RC]
    _consts[device] = (rot, rcs)
  return _consts[device]

def _shift(t, k: int):
  """t[..., (i + k) % 5] along the last axis of size 5."""
  return t.cat(t, dim=-1)[..., k:k + 5]

def _f1600(st):
  """The Keccak-f[1600] permutation on a (batch, 5, 5) uint64 state indexed [y][x]."""
  bs = st.shape[0]
  rot, rcs = _keccak_consts(st.device)
  for rc in rcs:
    c = st[:, 0] ^ st[:, 1] ^ st[:, 2] ^ st[:, 3] ^ st[:, 4]                              # theta: column parities
    c1 = _shift(c, 1)
    st = st ^ (_shift(c, 4) ^ (c1 << 1) ^ (c1 >> 63)).unsqueeze(1)
    st = (st << rot) | ((st >> 1) >> (63 - rot))                                         # rho; two shifts: >> 64 is undefined in C
    # pi: B[y'][x'] = A[x'][(x' + 3y') % 5]; row r read from offset r with stride 3 out of 4 copies of itself: a skew by reshape
    t = st.cat(st, st, st, dim=-1).reshape(bs, 100).pad(((0, 0), (0, 5))).reshape(bs, 5, 21)[:, :, :15]
    st = t.reshape(bs, 5, 5, 3)[..., 0].transpose(1, 2)
    st = (st ^ (~_shift(st, 1) & _shift(st, 2))) ^ rc                                       # chi, iota
    st = st.contiguous()   # a kernel boundary per round keeps each kernel small
  return st

def _row_views(t) -> list:
  """Each t[k] of a realized tensor as a view of its buffer, not a shrink: every block's absorb is then the same kernel."""
  Tensor = tensor_type()
  from tinycore.uop import UOp, Ops
  buf, n = t._buffer(), prod(t.shape[1:])
  return [Tensor(UOp(Ops.BUFFER, t.dtype, (), buf.view(n, t.dtype, k * n * t.dtype.itemsize)).reshape(t.shape[1:])) for k in range(t.shape[0])]

def _as_bytes(t):
  """The little-endian bytes of each element along a new last axis merged into the old one: (..., n) -> (..., n*itemsize)."""
  Tensor = tensor_type()
  if t.dtype == dtypes.bool: t = t.cast(dtypes.uint8)
  s = t.dtype.itemsize
  if s == 1: return t.bitcast(dtypes.uint8)
  u = t.bitcast({2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[s])
  parts = [((u >> (8 * i)) & 0xFF).cast(dtypes.uint8) for i in range(s)]
  return Tensor.stack(*parts, dim=-1).reshape(*t.shape[:-1], t.shape[-1] * s)

class HashMixin(TensorBase):
  __slots__ = ()

  def keccak(self, cfg: str | tuple[int, int] = "sha3_256"):
    """Keccak sponge over the bytes of the last dimension: shape (..., n) -> (..., digest) uint8.
    cfg: "sha3_224", "sha3_256" (default), "sha3_384", "sha3_512", "shake_128" (16-byte digest), "keccak_256", or
    (rate_bytes, domain_byte)."""
    Tensor = tensor_type()
    if isinstance(cfg, str):
      if cfg not in _KECCAK_CFGS: raise ValueError(f"unknown keccak cfg {cfg!r}, expected one of {sorted(_KECCAK_CFGS)} or (rate, dsbyte)")
      rate, ds = _KECCAK_CFGS[cfg]
    else: rate, ds = cfg
    obytes = (200 - rate) // 2
    if not (0 < rate < 200 and rate % 8 == 0 and obytes <= rate and 0 <= ds < 0x80):
      raise ValueError(f"keccak rate must be a multiple of 8 in (0, 200) with (200-rate)//2 <= rate, and dsbyte < 0x80; got {cfg!r}")
    if self.ndim == 0: raise ValueError("keccak hashes along the last dimension: it needs at least one dimension, got a 0-d tensor")
    if not all(isinstance(s, int) for s in self.shape): raise ValueError(f"keccak needs a concrete shape, got {self.shape}")
    lead = self.shape[:-1]
    data = _as_bytes(self).reshape(bs := prod(lead), -1)
    n = data.shape[-1]
    # pad10*1 with the domain bits: ds after the message, 0x80 on the block's last byte (both in one byte when only one fits)
    npad = rate - n % rate
    pad = [ds | 0x80] if npad == 1 else [ds] + [0] * (npad - 2) + [0x80]
    pad_t = Tensor(pad, dtype=dtypes.uint8, device=self.device).reshape(1, npad).expand(bs, npad)
    data = (data.cat(pad_t, dim=1) if n else pad_t).reshape(bs, -1, rate // 8, 8).cast(dtypes.uint64)
    # 8 bytes -> one little-endian lane: the shifted bytes don't overlap, so a sum is an or
    shifts = Tensor([1 << (8 * i) for i in range(8)], dtype=dtypes.uint64, device=self.device)
    blocks = (data * shifts).sum(-1).pad(((0, 0), (0, 0), (0, 25 - rate // 8))).permute(1, 0, 2).contiguous().realize()
    st = Tensor.zeros(bs, 5, 5, dtype=dtypes.uint64, device=self.device)
    for blk in _row_views(blocks): st = _f1600(st ^ blk.reshape(bs, 5, 5))
    out = _as_bytes(st.reshape(bs, 25)[:, :(obytes + 7) // 8])[:, :obytes]
    return out.reshape(*lead, obytes)

  def hash(self):
    """A 16-byte tree hash of the whole tensor: 1 MiB chunks of its bytes, each hashed as 256 shake_128 digests of 4 KiB
    pieces hashed again, levels repeated until one chunk's digest is left (the same tree as tinygrad's Tensor.hash)."""
    if not all(isinstance(s, int) for s in self.shape): raise ValueError(f"hash needs a concrete shape, got {self.shape}")
    mb = 1 << 20
    data = _as_bytes(self.reshape(-1) if self.ndim else self.reshape(1)).reshape(-1)
    def hash_chunks(d, chunks):
      d = d.pad(((0, chunks * mb - d.shape[0]),)).reshape(chunks * 256, 4096).keccak("shake_128")
      return d.reshape(chunks, 4096).keccak("shake_128").reshape(-1)
    chunks = -(-data.shape[0] // mb)
    while chunks > 1: data, chunks = hash_chunks(data, chunks), -(-chunks // (mb // 16))
    return hash_chunks(data, 1)
