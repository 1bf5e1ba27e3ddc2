"""Loading a linked HSA code object (ELF64 ET_DYN) into GPU memory: its PT_LOAD segments at their virtual addresses
from the allocation's base, R_AMDGPU_RELATIVE64 relocations applied, kernel descriptors found by symbol.

The ELF file itself is copied after the image (at `file_offset(image_size)`): the hardware never reads it, but it lets a
debugger or the mock driver (MOCKGPU=1), which only sees GPU memory and a kernel-descriptor address, recover the
code object and the kernel's name. Every size and offset is checked against the file before it is used."""
from __future__ import annotations
import struct
from dataclasses import dataclass

PT_LOAD, PT_DYNAMIC = 1, 2
SHT_RELA, SHT_SYMTAB, SHT_DYNSYM = 4, 2, 11
R_AMDGPU_NONE, R_AMDGPU_RELATIVE64 = 0, 13
EM_AMDGPU, ET_DYN = 224, 3
MAX_IMAGE = 64 << 20          # far beyond any kernel's code object; a header claiming more is refused, not allocated

class CodeObjectError(ValueError):
  """A code object this loader cannot place in GPU memory (not linked, malformed, an unsupported relocation)."""

@dataclass
class Image:
  size: int                                   # bytes from the base to the end of the last segment
  segments: list[tuple[int, int, int, int]]   # (vaddr, file offset, file size, memory size)
  relocs: list[tuple[int, int]]               # R_AMDGPU_RELATIVE64: (vaddr to patch, addend); the value is base + addend
  descriptors: dict[str, int]                 # kernel name -> vaddr of its 64-byte kernel descriptor

def _need(lib: bytes, off: int, n: int, what: str):
  if off < 0 or n < 0 or off + n > len(lib): raise CodeObjectError(f"code object truncated: {what} at {off}+{n} is past its {len(lib)} bytes")

def parse(lib: bytes) -> Image:
  _need(lib, 0, 64, "the ELF header")
  if lib[:4] != b"\x7fELF" or lib[4] != 2 or lib[5] != 1: raise CodeObjectError("not a little-endian ELF64 file")
  e_type, e_machine = struct.unpack_from("<HH", lib, 16)
  if e_machine != EM_AMDGPU: raise CodeObjectError(f"ELF machine {e_machine} is not AMDGPU")
  if e_type != ET_DYN: raise CodeObjectError("the code object is not linked (ET_DYN): install ld.lld so the compiler can link it")
  phoff, shoff = struct.unpack_from("<QQ", lib, 32)
  phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", lib, 54)
  if phentsize < 56 or shentsize < 64: raise CodeObjectError(f"ELF header entry sizes {phentsize}/{shentsize} are too small for ELF64")
  _need(lib, phoff, phnum * phentsize, "program headers"); _need(lib, shoff, shnum * shentsize, "section headers")
  segs = []
  for i in range(phnum):
    p_type, _, off, vaddr, _, filesz, memsz, _ = struct.unpack_from("<IIQQQQQQ", lib, phoff + i * phentsize)
    if p_type != PT_LOAD: continue
    _need(lib, off, filesz, f"segment {i}")
    if memsz < filesz or vaddr + memsz > MAX_IMAGE:
      raise CodeObjectError(f"segment {i}: memory size {memsz} at 0x{vaddr:x} is out of range (an image is at most {MAX_IMAGE >> 20} MiB)")
    segs.append((vaddr, off, filesz, memsz))
  if not segs: raise CodeObjectError("the code object has no loadable segment")
  size = max(v + m for v, _, _, m in segs)
  secs = [struct.unpack_from("<IIQQQQIIQQ", lib, shoff + k * shentsize) for k in range(shnum)]
  relocs, kds = [], {}
  for _, typ, _, _, off, sz, link, _, _, _ in secs:
    if typ == SHT_RELA:
      _need(lib, off, sz, "a relocation section")
      for o in range(off, off + sz - 23, 24):
        r_off, info, addend = struct.unpack_from("<QQq", lib, o)
        if (t := info & 0xffffffff) == R_AMDGPU_NONE: continue
        if t != R_AMDGPU_RELATIVE64: raise CodeObjectError(f"relocation type {t} at 0x{r_off:x} is not supported (only R_AMDGPU_RELATIVE64)")
        if r_off + 8 > size: raise CodeObjectError(f"relocation at 0x{r_off:x} is outside the image")
        relocs.append((r_off, addend))
    if typ in (SHT_SYMTAB, SHT_DYNSYM) and link < len(secs):
      _need(lib, off, sz, "a symbol table")
      stroff, strsz = secs[link][4], secs[link][5]
      _need(lib, stroff, strsz, "a string table")
      for o in range(off, off + sz - 23, 24):
        st_name, _, _, shndx, value, st_size = struct.unpack_from("<IBBHQQ", lib, o)
        if not st_name or not shndx or st_name >= strsz: continue
        end = lib.find(b"\0", stroff + st_name, stroff + strsz)
        nm = lib[stroff + st_name:end if end >= 0 else stroff + strsz].decode(errors="replace")
        if nm.endswith(".kd") and value + 64 <= size: kds[nm[:-3]] = value
  return Image(size, segs, relocs, kds)

def file_offset(image_size: int) -> int: return (image_size + 255) // 256 * 256

def layout(lib: bytes, base: int) -> tuple[bytes, Image]:
  """What to write at GPU address `base`: the image with relocations applied, then the file."""
  img = parse(lib)
  out = bytearray(file_offset(img.size) + len(lib))
  for vaddr, off, filesz, _ in img.segments: out[vaddr:vaddr + filesz] = lib[off:off + filesz]
  for where, addend in img.relocs: struct.pack_into("<Q", out, where, (base + addend) & (2**64 - 1))
  out[file_offset(img.size):] = lib
  return bytes(out), img

def loaded_file(blob: bytes) -> bytes:
  """The ELF file `layout` put after the image in an allocation's bytes `blob`."""
  _need(blob, 0, 64, "the loaded image's ELF header")
  if blob[:4] != b"\x7fELF": raise CodeObjectError("the allocation does not start with a loaded code object")
  phoff, = struct.unpack_from("<Q", blob, 32)
  phentsize, phnum = struct.unpack_from("<HH", blob, 54)
  _need(blob, phoff, phnum * phentsize, "the loaded image's program headers")
  # p_type, then p_vaddr at 16 and p_memsz at 40 of each program header
  size = max((v + m for t, v, m in (struct.unpack_from("<I12xQ16xQ", blob, phoff + i * phentsize) for i in range(phnum)) if t == PT_LOAD),
             default=0)
  lib = blob[file_offset(size):]
  if lib[:4] != b"\x7fELF" or len(lib) < 64: raise CodeObjectError("no code object follows the loaded image (not loaded by tinycore's KFD loader)")
  shoff, = struct.unpack_from("<Q", lib, 40)
  shentsize, shnum = struct.unpack_from("<HH", lib, 58)
  return lib[:max(shoff + shentsize * shnum, 64)]   # the allocation's page padding is not part of the file

def kernel_at(lib: bytes, kd_offset: int) -> str:
  """The name of the kernel whose descriptor is at `kd_offset` from the load base."""
  for name, va in parse(lib).descriptors.items():
    if va == kd_offset: return name
  raise CodeObjectError(f"no kernel descriptor at offset 0x{kd_offset:x} of the loaded code object")
