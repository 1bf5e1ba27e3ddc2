"""RDNA3/RDNA4 machine words -> Instr: which encoding, which opcode (by mnemonic), its fields and its literal.

Field positions follow AMD's RDNA3 and RDNA4 ISA guides ("Microcode formats"); the opcode numbers come from
opcodes.py. A word this decoder cannot name raises UnknownInstruction with its encoding and, where LLVM's
disassembler is installed, what LLVM makes of it."""
from __future__ import annotations
import functools, shutil, subprocess
from dataclasses import dataclass, field
from tinycore_amd.isa.opcodes import OPCODES

LITERAL = 255
# VOPD: the X and Y halves of a dual-issue pair (RDNA3 guide 7.6; RDNA4 keeps the table)
VOPD_X = ("v_dual_fmac_f32", "v_dual_fmaak_f32", "v_dual_fmamk_f32", "v_dual_mul_f32", "v_dual_add_f32", "v_dual_sub_f32",
          "v_dual_subrev_f32", "v_dual_mul_dx9_zero_f32", "v_dual_mov_b32", "v_dual_cndmask_b32", "v_dual_max_f32",
          "v_dual_min_f32", "v_dual_dot2acc_f32_f16", "v_dual_dot2acc_f32_bf16")
VOPD_Y = VOPD_X + ("", "", "v_dual_add_nc_u32", "v_dual_lshlrev_b32", "v_dual_and_b32")
# opcodes that carry a 32-bit constant after their words whatever their sources say
_ALWAYS_LITERAL = {"v_fmamk_f32", "v_fmaak_f32", "v_fmamk_f16", "v_fmaak_f16", "v_dual_fmamk_f32", "v_dual_fmaak_f32", "s_fmamk_f32",
                   "s_fmaak_f32"}

class UnknownInstruction(NotImplementedError):
  pass

@dataclass
class Instr:
  fmt: str                 # encoding: SOP2, VOP3, GLOBAL, ...
  op: str                  # LLVM's mnemonic (VOP3 forms keep their _e64 suffix off; see `name`)
  size: int                # bytes, literal included
  f: dict = field(default_factory=dict)   # the encoding's fields
  literal: int | None = None
  words: tuple = ()
  def __post_init__(self):
    self.name = self.op[:-4] if self.op.endswith(("_e32", "_e64")) else self.op   # the operation, without LLVM's encoding suffix
    self.names = tuple(self.name.split("::"))   # a VOPD pair counts as its two operations

def _bits(w: int, hi: int, lo: int) -> int: return (w >> lo) & ((1 << (hi - lo + 1)) - 1)
def _sext(v: int, bits: int) -> int: return v - (1 << bits) if v >> (bits - 1) & 1 else v

def _fields(fmt: str, w0: int, w1: int, gfx12: bool) -> tuple[int, dict]:
  """(opcode, fields) of one encoding."""
  b = _bits
  if fmt == "SOP2": return b(w0, 29, 23), {"sdst": b(w0, 22, 16), "ssrc0": b(w0, 7, 0), "ssrc1": b(w0, 15, 8)}
  if fmt == "SOPK": return b(w0, 27, 23), {"sdst": b(w0, 22, 16), "simm16": b(w0, 15, 0)}
  if fmt == "SOP1": return b(w0, 15, 8), {"sdst": b(w0, 22, 16), "ssrc0": b(w0, 7, 0)}
  if fmt == "SOPC": return b(w0, 22, 16), {"ssrc0": b(w0, 7, 0), "ssrc1": b(w0, 15, 8)}
  if fmt == "SOPP": return b(w0, 22, 16), {"simm16": b(w0, 15, 0)}
  if fmt == "SMEM":
    if gfx12: return b(w0, 18, 13), {"sbase": b(w0, 5, 0) * 2, "sdata": b(w0, 12, 6), "offset": _sext(b(w1, 23, 0), 24), "soffset": b(w1, 31, 25)}
    return b(w0, 25, 18), {"sbase": b(w0, 5, 0) * 2, "sdata": b(w0, 12, 6), "offset": _sext(b(w1, 20, 0), 21), "soffset": b(w1, 31, 25)}
  if fmt == "VOP1": return b(w0, 16, 9), {"vdst": b(w0, 24, 17), "src0": b(w0, 8, 0)}
  if fmt == "VOP2": return b(w0, 30, 25), {"vdst": b(w0, 24, 17), "src0": b(w0, 8, 0), "vsrc1": b(w0, 16, 9)}
  if fmt == "VOPC": return b(w0, 24, 17), {"src0": b(w0, 8, 0), "vsrc1": b(w0, 16, 9)}
  if fmt == "VOP3":
    return b(w0, 25, 16), {"vdst": b(w0, 7, 0), "abs": b(w0, 10, 8), "sdst": b(w0, 14, 8), "opsel": b(w0, 14, 11), "clamp": b(w0, 15, 15),
                           "src0": b(w1, 8, 0), "src1": b(w1, 17, 9), "src2": b(w1, 26, 18), "omod": b(w1, 28, 27), "neg": b(w1, 31, 29)}
  if fmt == "VOP3P":
    return b(w0, 22, 16), {"vdst": b(w0, 7, 0), "neg_hi": b(w0, 10, 8), "opsel": b(w0, 13, 11), "opsel_hi": b(w1, 28, 27) | b(w0, 14, 14) << 2,
                           "clamp": b(w0, 15, 15), "src0": b(w1, 8, 0), "src1": b(w1, 17, 9), "src2": b(w1, 26, 18), "neg": b(w1, 31, 29)}
  if fmt == "VOPD":
    return 0, {"opx": b(w0, 25, 22), "opy": b(w0, 21, 17), "srcx0": b(w0, 8, 0), "vsrcx1": b(w0, 16, 9), "srcy0": b(w1, 8, 0),
               "vsrcy1": b(w1, 16, 9), "vdstx": b(w1, 31, 24), "vdsty": b(w1, 23, 17) << 1 | (~b(w1, 31, 24) & 1)}
  if fmt == "MUBUF": return b(w0, 25, 18), {}
  if fmt == "DS":
    return b(w0, 25, 18), {"offset0": b(w0, 7, 0), "offset1": b(w0, 15, 8), "addr": b(w1, 7, 0), "data0": b(w1, 15, 8),
                           "data1": b(w1, 23, 16), "vdst": b(w1, 31, 24)}
  raise AssertionError(fmt)

def _format(w0: int, gfx12: bool) -> tuple[str, int]:
  """(encoding, size in bytes without a literal)."""
  top = w0 >> 23
  if top == 0x17D: return "SOP1", 4
  if top == 0x17E: return "SOPC", 4
  if top == 0x17F: return "SOPP", 4
  if w0 >> 28 == 0xB: return "SOPK", 4
  if w0 >> 30 == 0b10: return "SOP2", 4
  if w0 >> 25 == 0x3F: return "VOP1", 4
  if w0 >> 25 == 0x3E: return "VOPC", 4
  if w0 >> 31 == 0: return "VOP2", 4
  six = w0 >> 26
  if six == 0x3D: return "SMEM", 8
  if six == 0x35: return "VOP3", 8
  if w0 >> 24 == 0xCC: return "VOP3P", 8
  if six == 0x32: return "VOPD", 8
  if six == 0x36: return "DS", 8
  if not gfx12 and six == 0x38: return "MUBUF", 8
  if not gfx12 and six == 0x37: return ("FLAT", "SCRATCH", "GLOBAL", "?")[(w0 >> 16) & 3], 8
  if gfx12 and six == 0x3B: return ("FLAT", "SCRATCH", "GLOBAL", "?")[(w0 >> 24) & 3], 12
  return "?", 4

def _sources(fmt: str, f: dict) -> tuple[int, ...]:
  if fmt in ("SOP2", "SOPC"): return (f["ssrc0"], f["ssrc1"])
  if fmt == "SOP1": return (f["ssrc0"],)
  if fmt in ("VOP1", "VOP2", "VOPC"): return (f["src0"],)
  if fmt in ("VOP3", "VOP3P"): return (f["src0"], f["src1"], f["src2"])
  if fmt == "VOPD": return (f["srcx0"], f["srcy0"])
  return ()

def decode(code: bytes, pc: int, arch: str) -> Instr:
  """The instruction at byte offset pc of code."""
  gfx12 = arch.startswith("gfx12")
  table = OPCODES["gfx1201" if gfx12 else "gfx1100"]
  if pc + 4 > len(code): raise UnknownInstruction(f"pc 0x{pc:x} runs past the end of the code ({len(code)} bytes)")
  w0 = int.from_bytes(code[pc:pc + 4], "little")
  fmt, size = _format(w0, gfx12)
  words = [int.from_bytes(code[pc + i:pc + i + 4], "little") for i in range(0, min(size + 4, len(code) - pc), 4)]
  if fmt == "?" or pc + size > len(code): raise unknown(words[:size // 4 or 1], arch, pc, "no RDNA encoding matches")
  w1 = words[1] if size >= 8 else 0
  if fmt in ("FLAT", "SCRATCH", "GLOBAL"):
    if gfx12:
      w2 = words[2]
      opc = _bits(w0, 21, 14)
      f = {"saddr": _bits(w0, 6, 0), "vdst": _bits(w1, 7, 0), "data": _bits(w1, 30, 23), "addr": _bits(w2, 7, 0),
           "offset": _sext(_bits(w2, 31, 8), 24), "sve": _bits(w1, 17, 17)}
    else:
      opc = _bits(w0, 24, 18)
      f = {"offset": _sext(_bits(w0, 12, 0), 13), "sve": _bits(w0, 13, 13), "addr": _bits(w1, 7, 0), "data": _bits(w1, 15, 8),
           "saddr": _bits(w1, 22, 16), "vdst": _bits(w1, 31, 24)}
  else:
    opc, f = _fields(fmt, w0, w1, gfx12)
  if fmt == "VOPD":
    ox, oy = f["opx"], f["opy"]
    if ox >= len(VOPD_X) or oy >= len(VOPD_Y) or not VOPD_Y[oy]: raise unknown(words[:2], arch, pc, f"VOPD opx {ox} opy {oy}")
    op = VOPD_X[ox] + "::" + VOPD_Y[oy]
  elif (op := table.get(fmt, {}).get(opc)) is None:
    raise unknown(words[:size // 4], arch, pc, f"{fmt} opcode {opc} is not in the {'RDNA4' if gfx12 else 'RDNA3'} table")
  lit = None
  names = op.split("::")
  if any(s == LITERAL for s in _sources(fmt, f)) or any(n.removesuffix("_e32") in _ALWAYS_LITERAL for n in names):
    if pc + size + 4 > len(code): raise unknown(words, arch, pc, "literal runs past the end of the code")
    lit = int.from_bytes(code[pc + size:pc + size + 4], "little")
    size += 4
  return Instr(fmt, op, size, f, lit, tuple(words[:size // 4]))

@functools.cache
def _llvm_mc() -> str | None:
  return next((p for c in ("llvm-mc-19", "llvm-mc") if (p := shutil.which(c))), None)

def disassemble_words(words, arch: str) -> str:
  """LLVM's reading of these words (the error message's second opinion), or a note that LLVM is not installed."""
  if (mc := _llvm_mc()) is None: return "(llvm-mc not installed: no disassembly)"
  hexes = " ".join(f"0x{b:02x}" for w in words for b in int(w).to_bytes(4, "little"))
  try: r = subprocess.run([mc, "-disassemble", "-arch=amdgcn", f"-mcpu={arch}"], input=hexes + "\n", capture_output=True, text=True, timeout=20)
  except (OSError, subprocess.TimeoutExpired) as e: return f"(llvm-mc failed: {e})"
  out = [ln.strip() for ln in r.stdout.splitlines() if ln.strip() and not ln.strip().startswith(".")]
  return "; ".join(out) or "(LLVM cannot decode it either)"

def unknown(words, arch: str, pc: int, why: str) -> UnknownInstruction:
  enc = " ".join(f"{int(w):08X}" for w in words)
  return UnknownInstruction(f"{arch} pc 0x{pc:x}: cannot execute [{enc}] ({why}); LLVM reads it as: {disassemble_words(words, arch)}")
