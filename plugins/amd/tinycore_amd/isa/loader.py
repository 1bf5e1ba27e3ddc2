"""An HSA code object as the GPU sees it: its allocated sections laid out at their virtual addresses, and each kernel's
64-byte kernel descriptor (`<kernel>.kd`) decoded into what a dispatch needs.

Descriptor layout: LLVM's AMDGPUUsage "Kernel Descriptor" table (code object v4/v5). Everything is bounds-checked:
a code object is a file a user may hand us."""
from __future__ import annotations
import struct
from dataclasses import dataclass
from tinycore_amd.codeobject import EM_AMDGPU, MACH

class BadCodeObject(ValueError):
  pass

@dataclass(frozen=True)
class KernelDescriptor:
  name: str
  entry: int              # virtual address of the first instruction
  lds_size: int           # group_segment_fixed_size
  scratch_size: int       # private_segment_fixed_size, bytes per lane
  kernarg_size: int
  vgprs: int              # registers per lane the hardware would allocate
  sgprs: int
  user_sgprs: int         # USER_SGPR_COUNT: where the system SGPRs (work-group ids) start
  private_segment_buffer: bool
  dispatch_ptr: bool
  queue_ptr: bool
  kernarg_ptr: bool
  dispatch_id: bool
  flat_scratch_init: bool
  private_segment_size: bool
  wave32: bool
  workgroup_id: tuple[bool, bool, bool]
  workgroup_info: bool
  workitem_id_dims: int   # 1, 2 or 3: how many of x, y, z the kernel reads from v0
  scratch_wave_offset: bool

@dataclass
class Image:
  arch: str
  memory: bytes           # allocated sections at their virtual addresses
  kernels: dict[str, KernelDescriptor]

def _u(fmt: str, b: bytes, off: int):
  if off < 0 or off + struct.calcsize(fmt) > len(b): raise BadCodeObject(f"code object truncated: {struct.calcsize(fmt)} bytes at {off} of {len(b)}")
  return struct.unpack_from("<" + fmt, b, off)

def _descriptor(name: str, kd: bytes, kd_addr: int, arch: str) -> KernelDescriptor:
  lds, scratch, kernarg = _u("III", kd, 0)
  entry_off, = _u("q", kd, 16)
  rsrc1, rsrc2 = _u("II", kd, 48)
  props, = _u("H", kd, 56)
  wave32 = bool(props >> 10 & 1)
  # VGPR granule: 8 registers in wave32 on RDNA3/4 (4 in wave64; gfx1100 allocates in blocks of 8/16, the encoding is 8/4)
  vgprs = ((rsrc1 & 0x3F) + 1) * (8 if wave32 else 4)
  sgprs = 106   # RDNA ignores the SGPR granule field: every wave gets 106 plus vcc
  bit = lambda v, i: bool(v >> i & 1)  # noqa: E731
  return KernelDescriptor(name, kd_addr + entry_off, lds, scratch, kernarg, vgprs, sgprs, rsrc2 >> 1 & 0x1F,
                          bit(props, 0), bit(props, 1), bit(props, 2), bit(props, 3), bit(props, 4), bit(props, 5), bit(props, 6),
                          wave32, (bit(rsrc2, 7), bit(rsrc2, 8), bit(rsrc2, 9)), bit(rsrc2, 10), (rsrc2 >> 11 & 3) + 1, bit(rsrc2, 0))

def load(lib: bytes) -> Image:
  if lib[:4] != b"\x7fELF" or len(lib) < 64 or lib[4] != 2 or lib[5] != 1: raise BadCodeObject("not a little-endian ELF64 file")
  etype, machine = _u("HH", lib, 16)
  if machine != EM_AMDGPU: raise BadCodeObject(f"ELF machine {machine} is not AMDGPU ({EM_AMDGPU})")
  if etype != 3: raise BadCodeObject("the code object is not linked (ELF type %d, not ET_DYN): link it with ld.lld first" % etype)
  flags, = _u("I", lib, 48)
  arch = MACH.get(flags & 0xFF, f"mach 0x{flags & 0xFF:x}")
  shoff, = _u("Q", lib, 40)
  shentsize, shnum = _u("HH", lib, 58)
  if shentsize != 64 or shnum > 4096: raise BadCodeObject(f"unexpected section table ({shnum} entries of {shentsize} bytes)")
  secs = [_u("IIQQQQIIQQ", lib, shoff + k * 64) for k in range(shnum)]
  alloc = [s for s in secs if s[2] & 2]   # SHF_ALLOC
  top = max((s[3] + s[5] for s in alloc), default=0)
  if top > 1 << 28: raise BadCodeObject(f"code object asks for {top} bytes of address space")
  mem = bytearray(top)
  for s in alloc:
    if s[1] != 8:   # SHT_NOBITS stays zero
      if s[4] + s[5] > len(lib): raise BadCodeObject("a section runs past the end of the file")
      mem[s[3]:s[3] + s[5]] = lib[s[4]:s[4] + s[5]]
  syms = {}
  for s in secs:
    if s[1] not in (2, 11) or s[6] >= len(secs): continue   # SHT_SYMTAB / SHT_DYNSYM
    strs = secs[s[6]]
    for o in range(s[4], s[4] + s[5], 24):
      st_name, _, _, shndx, value, _ = _u("IBBHQQ", lib, o)
      if not st_name or shndx == 0 or shndx >= len(secs): continue
      start = strs[4] + st_name
      end = lib.find(b"\0", start)
      if end < 0: raise BadCodeObject("unterminated symbol name")
      syms[lib[start:end].decode(errors="replace")] = value
  kernels = {}
  for nm, addr in syms.items():
    if nm.endswith(".kd"):
      if addr + 64 > len(mem): raise BadCodeObject(f"kernel descriptor {nm} lies outside the loaded sections")
      k = _descriptor(nm[:-3], bytes(mem[addr:addr + 64]), addr, arch)
      if not 0 <= k.entry < len(mem): raise BadCodeObject(f"{k.name}: entry point 0x{k.entry:x} lies outside the code object")
      kernels[k.name] = k
  return Image(arch, bytes(mem), kernels)
