"""Reading an HSA code object (AMDGPU ELF): its target, kernel symbols, kernel descriptors and the NT_AMDGPU_METADATA
note (msgpack) that gives each kernel's argument layout, kernarg size, LDS size and wave size.

Enough of ELF64 and msgpack to read what LLVM writes; no dependency on pyelftools or msgpack."""
from __future__ import annotations
import struct
from dataclasses import dataclass, field

EM_AMDGPU, NT_AMDGPU_METADATA = 224, 32
# EF_AMDGPU_MACH_* (low byte of e_flags), for the targets this plugin knows
MACH = {0x36: "gfx1030", 0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x48: "gfx1200", 0x4e: "gfx1201",
        0x3f: "gfx90a", 0x4c: "gfx942", 0x4f: "gfx950"}

def unpackb(b: bytes, i: int = 0):
  """One msgpack value from b[i:] -> (value, next index). Covers every type LLVM's metadata writer uses."""
  t = b[i]; i += 1
  def rd(fmt):
    n = struct.calcsize(fmt); return struct.unpack_from(">" + fmt, b, i)[0], i + n
  def seq(n, i, pairs):
    out = {} if pairs else []
    for _ in range(n):
      if pairs:
        k, i = unpackb(b, i); v, i = unpackb(b, i); out[k] = v
      else:
        v, i = unpackb(b, i); out.append(v)
    return out, i
  if t <= 0x7f: return t, i
  if t >= 0xe0: return t - 0x100, i
  if 0x80 <= t <= 0x8f: return seq(t & 0xf, i, True)
  if 0x90 <= t <= 0x9f: return seq(t & 0xf, i, False)
  if 0xa0 <= t <= 0xbf: n = t & 0x1f; return b[i:i + n].decode(), i + n
  if t in (0xc0, 0xc2, 0xc3): return {0xc0: None, 0xc2: False, 0xc3: True}[t], i
  fixed = {0xca: "f", 0xcb: "d", 0xcc: "B", 0xcd: "H", 0xce: "I", 0xcf: "Q", 0xd0: "b", 0xd1: "h", 0xd2: "i", 0xd3: "q"}
  if t in fixed: return rd(fixed[t])
  if t in (0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb):   # bin / str with a 1, 2 or 4 byte length
    n, i = rd("BHI"[(t - 0xc4) % 3] if t < 0xd0 else "BHI"[t - 0xd9])
    return (b[i:i + n] if t < 0xd0 else b[i:i + n].decode()), i + n
  if t in (0xdc, 0xdd): n, i = rd("H" if t == 0xdc else "I"); return seq(n, i, False)
  if t in (0xde, 0xdf): n, i = rd("H" if t == 0xde else "I"); return seq(n, i, True)
  raise ValueError(f"msgpack: unsupported type byte 0x{t:02x} at {i - 1}")

@dataclass
class Kernel:
  name: str
  kernarg_size: int
  group_segment_size: int       # static LDS bytes
  private_segment_size: int     # scratch bytes per lane
  wavefront_size: int | None = None
  args: list = field(default_factory=list)   # [{'.offset', '.size', '.value_kind', ...}] from the metadata note
  sgprs: int | None = None
  vgprs: int | None = None

@dataclass
class CodeObject:
  arch: str
  linked: bool                  # ET_DYN (loadable) vs ET_REL (an unlinked object)
  symbols: dict[str, int]       # name -> file offset
  metadata: dict
  kernels: dict[str, Kernel]

def read(lib: bytes) -> CodeObject:
  if lib[:4] != b"\x7fELF" or lib[4] != 2: raise ValueError("not an ELF64 file")
  e_type, e_machine = struct.unpack_from("<HH", lib, 16)
  if e_machine != EM_AMDGPU: raise ValueError(f"ELF machine {e_machine} is not AMDGPU ({EM_AMDGPU})")
  e_flags, = struct.unpack_from("<I", lib, 48)
  shoff, = struct.unpack_from("<Q", lib, 40)
  shentsize, shnum = struct.unpack_from("<HH", lib, 58)
  # name,type,flags,addr,off,size,link,info,align,entsize
  secs = [struct.unpack_from("<IIQQQQIIQQ", lib, shoff + k * shentsize) for k in range(shnum)]
  linked = e_type == 3
  meta, symbols = {}, {}
  for s in secs:
    if s[1] == 7:   # SHT_NOTE: namesz, descsz, type, name (4-aligned), desc (4-aligned)
      p, end = s[4], s[4] + s[5]
      while p + 12 <= end:
        nsz, dsz, typ = struct.unpack_from("<III", lib, p)
        d0 = p + 12 + (nsz + 3) // 4 * 4
        if typ == NT_AMDGPU_METADATA and lib[p + 12:p + 12 + nsz].rstrip(b"\0") == b"AMDGPU": meta = unpackb(lib[d0:d0 + dsz])[0]
        p = d0 + (dsz + 3) // 4 * 4
    if s[1] in (2, 11):   # SHT_SYMTAB / SHT_DYNSYM
      strs = secs[s[6]]
      for o in range(s[4], s[4] + s[5], 24):
        st_name, _, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", lib, o)
        if not st_name or shndx == 0 or shndx >= len(secs): continue
        nm = lib[strs[4] + st_name:lib.index(b"\0", strs[4] + st_name)].decode()
        sec = secs[shndx]
        symbols[nm] = sec[4] + value - (sec[3] if linked else 0)
  kernels = {}
  for k in meta.get("amdhsa.kernels", []):
    kd = symbols.get(k.get(".symbol", k[".name"] + ".kd"))
    # the kernel descriptor starts group_segment_fixed_size, private_segment_fixed_size, kernarg_size (u32 each)
    g, p, ka = struct.unpack_from("<III", lib, kd) if kd is not None else \
      (k.get(".group_segment_fixed_size", 0), k.get(".private_segment_fixed_size", 0), k.get(".kernarg_segment_size", 0))
    kernels[k[".name"]] = Kernel(k[".name"], k.get(".kernarg_segment_size", ka), g, p, k.get(".wavefront_size"), k.get(".args", []),
                                 k.get(".sgpr_count"), k.get(".vgpr_count"))
  target = meta.get("amdhsa.target", "")
  return CodeObject(MACH.get(e_flags & 0xff, target.rpartition("--")[2] or f"mach 0x{e_flags & 0xff:x}"), linked, symbols, meta, kernels)
