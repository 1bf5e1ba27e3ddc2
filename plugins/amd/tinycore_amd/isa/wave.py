"""One wave32: its registers, exec mask and program counter, and how each encoding reads, computes and writes.

Vector registers are a uint32[vgprs, 32] array, so every VALU op is a numpy op over the 32 lanes; scalar registers
are Python ints. The wave runs until s_endpgm or a barrier (the work-group, in dispatch.py, releases barriers).
Besides computing, it checks what real hardware would not forgive silently: a register past the descriptor's count,
an LDS access past the work-group's allocation, and a register read before the s_waitcnt that covers the load
writing it (loads complete at once here, so a missing wait would otherwise go unnoticed)."""
from __future__ import annotations
import numpy as np
from tinycore_amd.isa.decode import Instr, LITERAL, decode, unknown
from tinycore_amd.isa.valu import OPS, BITS, typed, raw, compare
from tinycore_amd.isa import salu

VCC, TTMP, NULL, M0, EXEC, SCC_SRC = 106, 108, 124, 125, 126, 253
LANES = np.arange(32, dtype=np.uint32)
_F32 = {240: 0x3F000000, 241: 0xBF000000, 242: 0x3F800000, 243: 0xBF800000, 244: 0x40000000, 245: 0xC0000000, 246: 0x40800000,
        247: 0xC0800000, 248: 0x3E22F983}
_F16 = {240: 0x3800, 241: 0xB800, 242: 0x3C00, 243: 0xBC00, 244: 0x4000, 245: 0xC000, 246: 0x4400, 247: 0xC400, 248: 0x3118}
_F64 = {240: 0x3FE0000000000000, 241: 0xBFE0000000000000, 242: 0x3FF0000000000000, 243: 0xBFF0000000000000,
        244: 0x4000000000000000, 245: 0xC000000000000000, 246: 0x4010000000000000, 247: 0xC010000000000000, 248: 0x3FC45F306DC9C882}
_MASK = {16: 0xFFFF, 32: 0xFFFFFFFF, 64: (1 << 64) - 1}
_UNP = {16: np.uint16, 32: np.uint32, 64: np.uint64}

class ExecutionError(RuntimeError):
  pass

def _mask_array(m: int) -> np.ndarray: return ((m >> LANES) & 1).astype(bool)

class Wave:
  def __init__(self, group, pc: int, vgprs: int, stats):
    self.g, self.pc, self.stats = group, pc, stats
    self.arch, self.gfx12 = group.arch, group.arch.startswith("gfx12")
    self.s = [0] * 128
    self.v = np.zeros((vgprs, 32), np.uint32)
    self.nv = vgprs
    self.scc = 0
    self.done = self.at_barrier = False
    self.pending: dict[str, list[set]] = {"vm": [], "lgkm": [], "ds": [], "km": []}
    self.waiting: set = set()   # registers a load has written that no s_waitcnt has covered yet
    self.mode = 0
    self._exec_bits, self._exec_arr = 0, _mask_array(0)
    self._loading: str | None = None   # the counter of the load whose results are being written, while they are

  # ---- registers
  @property
  def exec(self) -> np.ndarray:
    if self.s[EXEC] != self._exec_bits: self._exec_bits, self._exec_arr = self.s[EXEC], _mask_array(self.s[EXEC])
    return self._exec_arr
  def _hazard(self, reg):
    raise ExecutionError(f"{self.arch} pc 0x{self.pc:x}: reads {reg} before an s_waitcnt covers the load that writes it")
  def vreg(self, r: int) -> np.ndarray:
    if r >= self.nv: raise ExecutionError(f"pc 0x{self.pc:x} uses v{r} but the kernel descriptor allocates only {self.nv} VGPRs")
    if self.waiting and ("v", r) in self.waiting: self._hazard(f"v{r}")
    return self.v[r]
  def sget(self, code: int, bits: int = 32, lit: int | None = None, ftype: str = "") -> int:
    """A scalar operand (SGPR, special register, inline constant or literal) as an unsigned int of `bits`."""
    if code < 106 or code in (VCC, VCC + 1, M0, EXEC, EXEC + 1) or TTMP <= code < TTMP + 16:
      if self.waiting and ("s", code) in self.waiting: self._hazard(f"s{code}")
      v = self.s[code]
      if bits == 64:
        if self.waiting and ("s", code + 1) in self.waiting: self._hazard(f"s{code + 1}")
        v |= self.s[code + 1] << 32
      return v & _MASK[bits]
    if code == NULL: return 0
    if 128 <= code <= 192: return code - 128
    if 193 <= code <= 208: return (192 - code) & _MASK[bits]   # -1 .. -16
    if 240 <= code <= 248:
      if ftype == "f16" or bits == 16: return _F16[code]
      if bits == 64: return _F64[code]
      return _F32[code]
    if code == LITERAL:
      if lit is None: raise ExecutionError(f"pc 0x{self.pc:x}: literal operand without a literal")
      if bits == 64: return lit << 32 if ftype == "f64" else lit
      return lit & _MASK[bits]
    if code == SCC_SRC: return self.scc
    if code == 251: return int(self.s[VCC] == 0)    # src_vccz
    if code == 252: return int(self.s[EXEC] == 0)   # src_execz
    what = {250: "a DPP16 operand", 233: "a DPP8 operand", 234: "a DPP8 (FI) operand", 254: "an LDS-direct operand"}.get(code, f"operand code {code}")
    raise ExecutionError(f"{self.arch} pc 0x{self.pc:x}: {what} is not emulated")
  def sset(self, code: int, val: int, bits: int = 32):
    if code == NULL: return
    if code >= 128 or (code >= 106 and code not in (VCC, VCC + 1, M0, EXEC, EXEC + 1)):
      raise ExecutionError(f"pc 0x{self.pc:x}: cannot write scalar register {code}")
    self.s[code] = val & 0xFFFFFFFF
    if bits == 64: self.s[code + 1] = (val >> 32) & 0xFFFFFFFF
    if self.waiting:
      self._overwritten(("s", code))
      if bits == 64: self._overwritten(("s", code + 1))
    self.s[EXEC + 1] = 0   # wave32: exec_hi does not exist

  def vsrc(self, code: int, t: str, lit: int | None, hi: bool = False) -> np.ndarray | np.number:
    """A vector operand as raw bits of t's width (array of 32 lanes, or a scalar to broadcast)."""
    bits = BITS[t]
    if code >= 256:
      r = code - 256
      if bits == 64: return self.vreg(r).astype(np.uint64) | (self.vreg(r + 1).astype(np.uint64) << np.uint64(32))
      v = self.vreg(r)
      if bits == 16: return ((v >> 16) if hi else v).astype(np.uint16)
      if bits == 8: return v.astype(np.uint8)
      return v
    if bits == 16 and 240 <= code <= 248 and t not in ("f16", "bf16"):
      return np.uint16(_F16[code] if t == "b16" else _F32[code] & 0xFFFF)
    v = self.sget(code, max(bits, 16) if bits != 16 else 16, lit, t) if bits != 8 else self.sget(code, 32, lit, t) & 0xFF
    if bits == 16 and code < 128 and hi: v = (self.sget(code, 32) >> 16) & 0xFFFF
    return _UNP.get(bits, np.uint8)(v)
  def vdst(self, r: int, val, bits: int, hi: bool = False, mask: np.ndarray | None = None):
    m = self.exec if mask is None else mask
    if r + (2 if bits == 64 else 1) > self.nv:
      raise ExecutionError(f"pc 0x{self.pc:x} writes v{r} but the kernel descriptor allocates only {self.nv} VGPRs")
    if bits == 64:
      val = np.asarray(val, np.uint64)
      np.copyto(self.v[r], val & np.uint64(0xFFFFFFFF), where=m, casting="unsafe")
      np.copyto(self.v[r + 1], val >> np.uint64(32), where=m, casting="unsafe")
    elif bits == 16:
      cur = self.v[r]
      v32 = np.asarray(val).astype(np.uint32)
      np.copyto(cur, (cur & 0x0000FFFF) | (v32 << 16) if hi else (cur & 0xFFFF0000) | v32, where=m)
    else: np.copyto(self.v[r], val, where=m, casting="unsafe")
    if self.waiting:
      self._overwritten(("v", r))
      if bits == 64: self._overwritten(("v", r + 1))

  # ---- the loop
  def run(self, program: dict, limit: int):
    """Execute until s_endpgm or a barrier. `program` caches (decoded instruction, handler) by pc."""
    stats = self.stats
    with np.errstate(all="ignore"):
      while not self.done and not self.at_barrier:
        ent = program.get(self.pc)
        if ent is None:
          ins = decode(self.g.code, self.pc, self.arch)
          handler = _HANDLERS.get(ins.fmt)
          if handler is None: raise unknown(ins.words, self.arch, self.pc, f"{ins.fmt} instructions are not emulated")
          ent = program[self.pc] = (ins, handler)
        ins, handler = ent
        stats.instructions += 1
        stats.opcodes.update(ins.names)
        if stats.instructions > limit: raise ExecutionError(f"more than {limit} instructions executed: a runaway loop? (pc 0x{self.pc:x})")
        nxt = self.pc + ins.size
        target = handler(self, ins)
        self.pc = nxt if target is None else target

  # ---- scalar
  def sop2(self, i: Instr):
    if i.name in ("s_fmac_f32", "s_fmaak_f32", "s_fmamk_f32"):   # RDNA4 scalar FMAs; K is the literal
      a, b = salu.f32(self.sget(i.f["ssrc0"], 32, i.literal)), salu.f32(self.sget(i.f["ssrc1"], 32, i.literal))
      d, k = salu.f32(self.sget(i.f["sdst"])), salu.f32(i.literal or 0)
      x, y, z = {"s_fmac_f32": (a, b, d), "s_fmaak_f32": (a, b, k), "s_fmamk_f32": (a, k, b)}[i.name]
      self.sset(i.f["sdst"], salu.bits32(_fma_t(np.float32(x), np.float32(y), np.float32(z), "f32")))
      return None
    spec = salu.SOP2.get(i.name)
    if spec is None: raise unknown(i.words, self.arch, self.pc, f"{i.name} is not emulated")
    bits, fn = spec
    b_bits = 32 if i.name.startswith(("s_lshl_b64", "s_lshr_b64", "s_ashr_i64", "s_bfe_u64", "s_bfe_i64")) else bits
    res, scc = fn(self.sget(i.f["ssrc0"], bits, i.literal), self.sget(i.f["ssrc1"], b_bits, i.literal), self.scc)
    self.sset(i.f["sdst"], res, bits)
    if scc is not None: self.scc = scc
  def sop1(self, i: Instr):
    n, d, src = i.name, i.f["sdst"], i.f["ssrc0"]
    if "saveexec" in n or "wrexec" in n:
      a, ex = self.sget(src, 32, i.literal), self.s[EXEC]
      new = {"s_and_saveexec_b32": a & ex, "s_or_saveexec_b32": a | ex, "s_xor_saveexec_b32": a ^ ex,
             "s_and_not1_saveexec_b32": a & ~ex, "s_andn2_saveexec_b32": a & ~ex, "s_or_not1_saveexec_b32": a | ~ex,
             "s_orn2_saveexec_b32": a | ~ex, "s_and_not0_saveexec_b32": ~a & ex, "s_or_not0_saveexec_b32": ~a | ex,
             "s_nand_saveexec_b32": ~(a & ex), "s_nor_saveexec_b32": ~(a | ex), "s_xnor_saveexec_b32": ~(a ^ ex),
             "s_and_not0_wrexec_b32": ~a & ex, "s_and_not1_wrexec_b32": a & ~ex}.get(n)
      if new is None: raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
      new &= 0xFFFFFFFF
      self.sset(d, new if "wrexec" in n else ex)
      self.s[EXEC] = new
      self.scc = int(new != 0)
      return None
    if n == "s_getpc_b64": self.sset(d, self.pc + i.size, 64); return None
    if n == "s_barrier_signal":   # RDNA4: signal here, s_barrier_wait is where it waits
      if src != 193: raise unknown(i.words, self.arch, self.pc, "only the work-group barrier (-1) is emulated")
      self.at_barrier = True
      return None
    if n in ("s_setpc_b64", "s_swappc_b64"):
      tgt = self.sget(src, 64)
      if n == "s_swappc_b64": self.sset(d, self.pc + i.size, 64)
      return tgt
    if n.startswith(("s_bitset0_", "s_bitset1_")):   # D.bit[S0] = 0/1, the rest of D kept
      bits = 64 if n.endswith("b64") else 32
      cur, b = self.sget(d, bits), self.sget(src, 32, i.literal) & (bits - 1)
      self.sset(d, cur | 1 << b if n.startswith("s_bitset1") else cur & ~(1 << b), bits)
      return None
    spec = salu.SOP1.get(n)
    if spec is None: raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
    bits, fn = spec
    if fn is None:   # s_cmov
      if self.scc: self.sset(d, self.sget(src, bits, i.literal), bits)
      return None
    res, scc = fn(self.sget(src, bits, i.literal), self.scc)
    self.sset(d, res, 32 if n.startswith("s_bcnt") else bits)
    if scc is not None: self.scc = scc
    return None
  def sopc(self, i: Instr):
    spec = salu.SOPC.get(i.name)
    if spec is None: raise unknown(i.words, self.arch, self.pc, f"{i.name} is not emulated")
    bits, fn = spec
    self.scc = int(fn(self.sget(i.f["ssrc0"], bits, i.literal), self.sget(i.f["ssrc1"], 32 if "bitcmp" in i.name else bits, i.literal)))
  def sopk(self, i: Instr):
    n, d, k = i.name, i.f["sdst"], i.f["simm16"]
    sk = k - 0x10000 if k & 0x8000 else k
    if n == "s_movk_i32": self.sset(d, sk)
    elif n == "s_cmovk_i32":
      if self.scc: self.sset(d, sk)
    elif n.startswith("s_cmpk_"):
      _, fn = salu.SOPC[n]
      self.scc = int(fn(self.sget(d), (sk & 0xFFFFFFFF) if n.endswith("i32") else k))
    elif n == "s_addk_i32" or n == "s_addk_co_i32":
      a = salu.s32(self.sget(d))
      self.scc = int(not -2**31 <= a + sk < 2**31)
      self.sset(d, a + sk)
    elif n == "s_mulk_i32": self.sset(d, salu.s32(self.sget(d)) * sk)
    elif n.startswith("s_waitcnt_"):   # RDNA3 s_waitcnt_vscnt/vmcnt/lgkmcnt/expcnt sreg, imm: the count is sreg + imm
      cnt = self.sget(d) + k if d != NULL else k
      kind = {"s_waitcnt_vmcnt": "vm", "s_waitcnt_lgkmcnt": "lgkm"}.get(n)
      if kind: self._retire(kind, cnt)
    elif n == "s_getreg_b32": self.sset(d, self.mode if (k & 0x3F) == 1 else 0)   # HW_REG_MODE; others read as 0
    elif n == "s_setreg_b32": self.mode = self.sget(d) if (k & 0x3F) == 1 else self.mode
    elif n == "s_setreg_imm32_b32": self.mode = i.literal if (k & 0x3F) == 1 else self.mode
    elif n == "s_call_b64":
      self.sset(d, self.pc + 4, 64)
      return self.pc + 4 + sk * 4
    elif n == "s_version": pass
    else: raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
    return None
  def sopp(self, i: Instr):
    n, k = i.name, i.f["simm16"]
    sk = k - 0x10000 if k & 0x8000 else k
    if n == "s_endpgm": self.done = True; return None
    if n.startswith("s_cbranch_") or n == "s_branch":
      cond = {"s_branch": True, "s_cbranch_scc0": self.scc == 0, "s_cbranch_scc1": self.scc == 1, "s_cbranch_vccz": self.s[VCC] == 0,
              "s_cbranch_vccnz": self.s[VCC] != 0, "s_cbranch_execz": self.s[EXEC] == 0, "s_cbranch_execnz": self.s[EXEC] != 0}.get(n)
      if cond is None: raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
      return self.pc + 4 + sk * 4 if cond else None
    if n == "s_waitcnt":   # RDNA3: vmcnt [15:10], lgkmcnt [9:4], expcnt [2:0]
      self._retire("vm", k >> 10 & 0x3F)
      self._retire("lgkm", k >> 4 & 0x3F)
      return None
    if n.startswith("s_wait_") and n not in ("s_wait_alu", "s_wait_idle", "s_wait_event"):
      kinds = {"loadcnt": "vm", "kmcnt": "km", "dscnt": "ds", "storecnt": None, "samplecnt": None, "bvhcnt": None, "expcnt": None}
      parts = n[len("s_wait_"):].split("_")
      if parts == ["loadcnt", "dscnt"]: self._retire("vm", k >> 8 & 0x3F); self._retire("ds", k & 0x3F); return None
      if parts == ["storecnt", "dscnt"]: self._retire("ds", k & 0x3F); return None
      if len(parts) != 1 or parts[0] not in kinds: raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
      if (kind := kinds[parts[0]]): self._retire(kind, k)
      return None
    if n in ("s_barrier", "s_barrier_signal"):
      self.at_barrier = True
      return None
    if n in ("s_nop", "s_code_end", "s_delay_alu", "s_clause", "s_waitcnt_depctr", "s_wait_alu", "s_wait_idle", "s_sendmsg", "s_setprio",
             "s_sleep", "s_icache_inv", "s_barrier_wait", "s_wait_event", "s_set_inst_prefetch_distance", "s_inst_prefetch", "s_sendmsghalt",
             "s_ttracedata", "s_singleuse_vdst"):
      return None   # timing hints, clause markers and messages: no effect on the values a kernel computes
    raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")

  def _overwritten(self, reg):
    """Writing a register a load still has to fill races with that load: an error, unless the write is itself a load
    counted by the same counter (those return in order, e.g. global_load_d16_b16 then _d16_hi_b16 into one VGPR)."""
    if reg in self.waiting:
      kinds = {k for k, q in self.pending.items() if any(reg in regs for regs in q)}
      if self._loading is None or kinds != {self._loading}:
        raise ExecutionError(f"{self.arch} pc 0x{self.pc:x}: writes {reg[0]}{reg[1]} while a load into it is outstanding (no s_waitcnt before)")
  def _issue(self, kind: str, regs: set):
    self.pending[kind].append(regs)
    self.waiting |= regs
  def _retire(self, kind: str, keep: int):
    q = self.pending[kind]
    if len(q) > keep:
      del q[:len(q) - keep]
      self.waiting = set().union(*(r for qq in self.pending.values() for r in qq))

  # ---- memory
  def smem(self, i: Instr):
    n = i.name
    if n in ("s_dcache_inv", "s_gl1_inv", "s_dcache_wb") or n.startswith("s_prefetch") or n.startswith("s_buffer_prefetch"): return None
    if not n.startswith("s_load_"): raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
    size = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "b256": 32, "b512": 64, "u8": 1, "i8": 1, "u16": 2, "i16": 2}[n.split("_")[-1]]
    f = i.f
    addr = self.sget(f["sbase"], 64) + f["offset"] + (self.sget(f["soffset"]) if f["soffset"] != NULL else 0)
    if size >= 4: addr &= ~3   # the hardware ignores the low two address bits of dword loads
    data = self.g.mem.load(np.array([addr & ((1 << 64) - 1)], np.uint64), size)[0]
    if size < 4:
      v = int.from_bytes(bytes(data), "little", signed=n.endswith(("i8", "i16")))
      self.sset(f["sdata"], v & 0xFFFFFFFF)
      regs = {("s", f["sdata"])}
    else:
      words = np.frombuffer(bytes(data), np.uint32)
      for k, w in enumerate(words): self.sset(f["sdata"] + k, int(w))
      regs = {("s", f["sdata"] + k) for k in range(len(words))}
    self._issue("km" if self.gfx12 else "lgkm", regs)
    return None

  def _vaddr(self, i: Instr, m: np.ndarray) -> np.ndarray:
    f = i.f
    if i.fmt == "SCRATCH": raise ExecutionError(f"pc 0x{self.pc:x}: scratch memory ({i.name}) is not emulated")
    if f["saddr"] != NULL and i.fmt == "GLOBAL":
      base = np.uint64(self.sget(f["saddr"], 64))
      a = base + self.vreg(f["addr"]).astype(np.uint64)
    else:
      a = self.vreg(f["addr"]).astype(np.uint64) | (self.vreg(f["addr"] + 1).astype(np.uint64) << np.uint64(32))
    return (a + np.uint64(f["offset"] & ((1 << 64) - 1)))[m]
  def vmem(self, i: Instr):
    n = i.name
    parts = n.split("_")   # global_load_b32, global_store_d16_hi_b16, global_load_d16_hi_u8, ...
    if parts[1] not in ("load", "store"):
      if parts[1] in ("inv", "wb", "wbinv"): return None
      raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
    m = self.exec
    addrs = self._vaddr(i, m)
    t = parts[-1]
    size = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}[t]
    d16, hi = "d16" in parts, "hi" in parts
    if parts[1] == "store":
      data = self.vreg(i.f["data"])
      if size <= 2:
        src = (data >> 16) if hi else data
        buf = src[m].astype(np.uint16 if size == 2 else np.uint8).view(np.uint8).reshape(-1, size)
      else:
        regs = np.stack([self.vreg(i.f["data"] + k) for k in range(size // 4)], 1)
        buf = regs[m].astype(np.uint32).view(np.uint8).reshape(-1, size)
      if len(addrs): self.g.mem.store(addrs, np.ascontiguousarray(buf))
      return None
    data = self.g.mem.load(addrs, size) if len(addrs) else np.zeros((0, size), np.uint8)
    dst = i.f["vdst"]
    if size <= 2:
      v = data.view(np.uint16 if size == 2 else np.uint8)[:, 0]
      if t.startswith("i"): v = v.view(np.int16 if size == 2 else np.int8).astype(np.int32).view(np.uint32)
      else: v = v.astype(np.uint32)
      full = np.zeros(32, np.uint32)
      full[m] = v
      if d16: self.vdst(dst, full.astype(np.uint16), 16, hi)
      else: self.vdst(dst, full, 32)
      regs = {("v", dst)}
    else:
      words = data.view(np.uint32).reshape(-1, size // 4)
      for k in range(size // 4):
        full = np.zeros(32, np.uint32)
        full[m] = words[:, k]
        self.vdst(dst + k, full, 32)
      regs = {("v", dst + k) for k in range(size // 4)}
    self._issue("vm", regs)
    return None

  def ds(self, i: Instr):
    n, f = i.name, i.f
    lds = self.g.lds
    m = self.exec
    base = self.vreg(f["addr"]).astype(np.int64)
    def check(addr, size):
      a = addr[m]
      if len(a) and (a.min() < 0 or a.max() + size > len(lds)):
        raise ExecutionError(f"{self.arch} pc 0x{self.pc:x}: {n} touches LDS bytes [{a.min()}, {a.max() + size}) but the work-group has {len(lds)}")
      return a
    def read(addr, size):
      a = check(addr, size)
      out = np.zeros((32, size), np.uint8)
      idx = a[:, None] + np.arange(size)
      out[m] = lds[idx]
      return out
    def write(addr, data_u8, size):
      a = check(addr, size)
      lds[a[:, None] + np.arange(size)] = data_u8[m]
    def regs_u8(r, size):
      if size <= 2: return self.vreg(r).astype(np.uint16 if size == 2 else np.uint8).view(np.uint8).reshape(32, size)
      return np.stack([self.vreg(r + k) for k in range(size // 4)], 1).view(np.uint8).reshape(32, size)
    def put(r, data_u8, size, signed=False, hi=False, d16=False):
      if size <= 2:
        v = data_u8.reshape(32, size).view(np.uint16 if size == 2 else np.uint8)[:, 0]
        v = v.view(np.int16 if size == 2 else np.int8).astype(np.int32).view(np.uint32) if signed else v.astype(np.uint32)
        if d16: self.vdst(r, v.astype(np.uint16), 16, hi)
        else: self.vdst(r, v, 32)
        return {("v", r)}
      w = np.ascontiguousarray(data_u8).view(np.uint32).reshape(32, size // 4)
      for k in range(size // 4): self.vdst(r + k, w[:, k], 32)
      return {("v", r + k) for k in range(size // 4)}
    off = f["offset0"] | f["offset1"] << 8
    kind = "ds" if self.gfx12 else "lgkm"
    sizes = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}
    if "2addr" in n:
      size = sizes[n.split("_")[-1]]
      stride = size * (64 if "stride64" in n else 1)
      a0, a1 = base + f["offset0"] * stride, base + f["offset1"] * stride
      if n.startswith("ds_store"):
        write(a0, regs_u8(f["data0"], size), size)
        write(a1, regs_u8(f["data1"], size), size)
      elif n.startswith("ds_load"):
        both = np.concatenate([read(a0, size), read(a1, size)], 1)
        self._issue(kind, put(f["vdst"], both, 2 * size))
      else: raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
      return None
    if n.startswith("ds_store"):
      t = n.split("_")[2]
      size = sizes[t]
      hi = n.endswith("d16_hi")
      src = self.vreg(f["data0"]) >> 16 if hi else None
      data = src.astype(np.uint16 if size == 2 else np.uint8).view(np.uint8).reshape(32, size) if hi else regs_u8(f["data0"], size)
      write(base + off, data, size)
      return None
    if n.startswith("ds_load"):
      t = n.split("_")[2]
      size = sizes[t]
      d16, hi = "d16" in n, n.endswith("_hi")
      self._issue(kind, put(f["vdst"], read(base + off, size), size, signed=t.startswith("i"), hi=hi, d16=d16))
      return None
    if n in ("ds_bpermute_b32", "ds_permute_b32"):
      src = self.vreg(f["data0"])
      lane = ((base + off) >> 2) & 31
      out = np.zeros(32, np.uint32)
      if n == "ds_bpermute_b32": out = src[lane]   # each lane reads the lane it addresses (inactive sources read as they are)
      else:
        for l in np.nonzero(m)[0]: out[lane[l]] = src[l]
      self.vdst(f["vdst"], out, 32)
      self._issue(kind, {("v", f["vdst"])})
      return None
    atomics = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
               "or": np.bitwise_or, "xor": np.bitwise_xor}
    p = n.split("_")   # ds_add_u32, ds_max_rtn_f32, ...
    if p[1] in atomics and p[-1] in ("u32", "i32", "f32", "b32"):
      t = p[-1]
      dt = {"u32": np.uint32, "i32": np.int32, "f32": np.float32, "b32": np.uint32}[t]
      a = check(base + off, 4)
      vals = self.vreg(f["data0"])[m].view(dt)
      old = np.zeros(32, np.uint32)
      view = lds.view(np.uint8)
      for j, (addr, v) in enumerate(zip(a, vals)):   # lanes in order: atomics to one address serialize
        cur = view[addr:addr + 4].view(dt)[0]
        old[np.nonzero(m)[0][j]] = np.array(cur, dt).view(np.uint32)
        view[addr:addr + 4] = np.array(atomics[p[1]](cur, v), dt).view(np.uint8)
      if "rtn" in p:
        self.vdst(f["vdst"], old, 32)
        self._issue(kind, {("v", f["vdst"])})
      return None
    raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")

  def mubuf(self, i: Instr):
    if i.name in ("buffer_gl0_inv", "buffer_gl1_inv"): return None   # cache invalidation: memory here has no caches
    raise unknown(i.words, self.arch, self.pc, f"{i.name}: buffer (MUBUF) memory instructions are not emulated")

  # ---- vector ALU
  def _operand(self, code: int, t: str, lit, hi: bool, absm: bool, negm: bool):
    x = typed(self.vsrc(code, t, lit, hi), t)
    if absm: x = np.abs(x)
    if negm: x = -x
    return x
  def compute(self, i: Instr, name: str, codes: tuple, dst: int, *, abs_=0, neg=0, opsel=0, true16=False, clamp=0, omod=0):
    """(destination vgpr, raw result, bits, hi half) of one VALU op; the caller writes it (VOPD writes both halves after)."""
    spec = OPS.get(name)
    if spec is None: raise unknown(i.words, self.arch, self.pc, f"{name} is not emulated")
    dt, sts, fn = spec
    args = []
    for k, (code, t) in enumerate(zip(codes, sts)):
      hi = bool(opsel >> k & 1)
      if true16 and BITS[t] == 16 and code >= 256: code, hi = 256 + ((code - 256) & 0x7F), bool((code - 256) >> 7)
      isf = t[0] == "f" or t == "bf16"
      args.append(self._operand(code, t, i.literal, hi, isf and bool(abs_ >> k & 1), isf and bool(neg >> k & 1)))
    res = np.asarray(fn(*args))
    if omod and dt[0] == "f": res = res * {1: 2.0, 2: 4.0, 3: 0.5}[omod]
    if clamp and dt[0] == "f": res = np.clip(res, 0, 1)
    bits = BITS[dt]
    hi = bool(opsel >> 3 & 1)
    if true16 and bits == 16: dst, hi = dst & 0x7F, bool(dst >> 7)
    return dst, raw(res.astype(np.float32) if dt == "bf16" else res, dt), bits, hi

  def _special(self, i: Instr, name: str, f: dict, vop3: bool):
    """VALU ops that read or write more than lane values: carries, vcc selects, lane reads. None if `name` is not one."""
    lit = i.literal
    if vop3: s0, s1, s2, dst = f["src0"], f["src1"], f["src2"], f["vdst"]
    else: s0, s1, s2, dst = f["src0"], 256 + f.get("vsrc1", 0), VCC, f.get("vdst", 0)
    sdst = f["sdst"] if vop3 else VCC
    m = self.exec
    def u32(c): return self.vsrc(c, "u32", lit).astype(np.uint64)
    def lanebits(x) -> int: return int(np.packbits(np.asarray(x, bool) & m, bitorder="little").view(np.uint32)[0])
    if name == "v_cndmask_b32":
      cond = _mask_array(self.sget(s2 if vop3 else VCC))
      a, b = self._operand(s0, "f32", lit, False, bool(vop3 and f["abs"] & 1), bool(vop3 and f["neg"] & 1)), \
        self._operand(s1, "f32", lit, False, bool(vop3 and f["abs"] & 2), bool(vop3 and f["neg"] & 2))
      self.vdst(dst, np.where(cond, np.broadcast_to(b, (32,)), a).view(np.uint32), 32)
      return True
    if name in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32"):
      a, b = u32(s0), u32(s1)
      if name == "v_subrev_co_u32": a, b = b, a
      r = a + b if name == "v_add_co_u32" else a - b
      carry = (r >> np.uint64(32)) & np.uint64(1) if name == "v_add_co_u32" else (b > a)
      self.vdst(dst, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), 32)
      self.sset(sdst, lanebits(np.broadcast_to(carry, (32,)) != 0))
      return True
    if name in ("v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32"):
      a, b = u32(s0), u32(s1)
      c = _mask_array(self.sget(s2 if vop3 else VCC)).astype(np.uint64)
      if name == "v_subrev_co_ci_u32": a, b = b, a
      if name == "v_add_co_ci_u32": r = a + b + c; carry = r >> np.uint64(32) != 0
      else: r = a - b - c; carry = b + c > a
      self.vdst(dst, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), 32)
      self.sset(sdst, lanebits(np.broadcast_to(carry, (32,))))
      return True
    if name in ("v_mad_u64_u32", "v_mad_co_u64_u32"):
      a, b, c = u32(s0), u32(s1), self.vsrc(s2, "u64", lit)
      prod = a * b   # < 2^64 always
      r = prod + c
      self.vdst(dst, r, 64)
      self.sset(sdst, lanebits(np.broadcast_to(r < prod, (32,))))
      return True
    if name in ("v_mad_i64_i32", "v_mad_co_i64_i32"):
      a, b = typed(self.vsrc(s0, "i32", lit), "i32").astype(object), typed(self.vsrc(s1, "i32", lit), "i32").astype(object)
      c = typed(self.vsrc(s2, "i64", lit), "i64").astype(object)
      exact = np.broadcast_to(a * b + c, (32,))
      self.vdst(dst, np.array([int(x) & ((1 << 64) - 1) for x in exact], np.uint64), 64)
      self.sset(sdst, lanebits(np.array([not -2**63 <= int(x) < 2**63 for x in exact])))
      return True
    if name == "v_readfirstlane_b32":
      v = np.broadcast_to(self.vsrc(s0, "u32", lit), (32,))
      first = int(np.argmax(m)) if m.any() else 0
      self.sset(dst, int(v[first]))
      return True
    if name == "v_readlane_b32":
      self.sset(dst, int(np.broadcast_to(self.vsrc(s0, "u32", lit), (32,))[self.sget(s1) & 31]))
      return True
    if name == "v_writelane_b32":
      lane = self.sget(s1) & 31
      self.vdst(dst, np.uint32(self.sget(s0, 32, lit)), 32, mask=LANES == lane)
      return True
    if name == "v_cndmask_b16":
      cond = _mask_array(self.sget(s2))
      a, b = self.vsrc(s0, "b16", lit, bool(f["opsel"] & 1)), self.vsrc(s1, "b16", lit, bool(f["opsel"] & 2))
      self.vdst(dst, np.where(cond, np.broadcast_to(b, (32,)), a).astype(np.uint16), 16, bool(f["opsel"] & 8))
      return True
    return None

  def vopc(self, i: Instr, name: str, s0: int, s1: int, sdst: int, *, abs_=0, neg=0, opsel=0, true16=False):
    spec = compare(name)
    if spec is None: raise unknown(i.words, self.arch, self.pc, f"{name} is not emulated")
    t, fn, writes_exec = spec
    def opnd(code, k, tt):
      hi = bool(opsel >> k & 1)
      if true16 and BITS[tt] == 16 and code >= 256: code, hi = 256 + ((code - 256) & 0x7F), bool((code - 256) >> 7)
      return self._operand(code, tt, i.literal, hi, tt[0] == "f" and bool(abs_ >> k & 1), tt[0] == "f" and bool(neg >> k & 1))
    a = opnd(s0, 0, t)
    b = opnd(s1, 1, "u32" if "class" in name else t)
    res = np.broadcast_to(fn(a, b), (32,)) & self.exec
    bits = int(np.packbits(res, bitorder="little").view(np.uint32)[0])
    if writes_exec: self.s[EXEC] = bits
    else: self.sset(sdst, bits)

  def vop1(self, i: Instr):
    f = i.f
    if i.name == "v_nop": return None
    if i.name == "v_readfirstlane_b32":
      self._special(i, i.name, f, False)
      return None
    self.vdst(*self.compute(i, i.name, (f["src0"],), f["vdst"], true16=True))
    return None
  def vop2(self, i: Instr):
    f, n = i.f, i.name
    if self._special(i, n, f, False): return None
    v1 = 256 + f["vsrc1"]
    if n.startswith(("v_fmac_", "v_dot2acc_")): codes = (f["src0"], v1, 256 + f["vdst"])
    elif n.startswith("v_fmamk_"): codes = (f["src0"], LITERAL, v1)
    elif n.startswith("v_fmaak_"): codes = (f["src0"], v1, LITERAL)
    else: codes = (f["src0"], v1)
    self.vdst(*self.compute(i, n, codes, f["vdst"], true16=True))
    return None
  def vopc_e32(self, i: Instr):
    self.vopc(i, i.name, i.f["src0"], 256 + i.f["vsrc1"], VCC, true16=True)
  def vop3(self, i: Instr):
    f, n = i.f, i.name
    if n.startswith("v_cmp"):
      self.vopc(i, n, f["src0"], f["src1"], f["vdst"], abs_=f["abs"], neg=f["neg"], opsel=f["opsel"])
      return None
    if self._special(i, n, f, True): return None
    if n.startswith("v_s_"): return self._pseudo_scalar(i, "v_" + n[4:], f)
    if n in ("v_div_scale_f32", "v_div_scale_f64", "v_div_fmas_f32", "v_div_fmas_f64", "v_div_fixup_f32", "v_div_fixup_f64", "v_div_fixup_f16"):
      return self._division(i, n, f)
    spec = OPS.get(n)
    if spec is None: raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
    nsrc = len(spec[1])
    codes = (f["src0"], f["src1"], f["src2"])[:nsrc]
    if n.startswith(("v_fmac_", "v_dot2acc_")): codes = (f["src0"], f["src1"], 256 + f["vdst"])
    self.vdst(*self.compute(i, n, codes, f["vdst"], abs_=f["abs"], neg=f["neg"], opsel=f["opsel"], clamp=f["clamp"], omod=f["omod"]))
    return None
  def _pseudo_scalar(self, i: Instr, base: str, f: dict):
    """RDNA4 v_s_exp_f32 s0, s1 and kin: a transcendental unit op with a scalar source and an SGPR destination."""
    spec = OPS.get(base)
    if spec is None or len(spec[1]) != 1: raise unknown(i.words, self.arch, self.pc, f"v_s_{base[2:]} is not emulated")
    dt, (st,), fn = spec
    x = typed(np.array([self.sget(f["src0"], 32, i.literal, st) & (0xFFFF if BITS[st] == 16 else 0xFFFFFFFF)]), st)
    if f["abs"] & 1: x = np.abs(x)
    if f["neg"] & 1: x = -x
    res = np.asarray(fn(x))
    if f["clamp"]: res = np.clip(res, 0, 1)
    self.sset(f["vdst"], int(raw(res, dt)[0]))
    return None
  def _division(self, i: Instr, n: str, f: dict):
    """The IEEE division sequence's helpers. Scaling is an exactness trick for denormal/huge operands; values that do
    not need it (all ours: |x| within 2^±96) pass through unscaled, which the fixup step then leaves correct."""
    t = n[-3:]
    a, b, c = (self._operand(f[s], t, i.literal, False, bool(f["abs"] >> k & 1), bool(f["neg"] >> k & 1))
               for k, s in enumerate(("src0", "src1", "src2")))
    if n.startswith("v_div_scale"):
      big = np.finfo(np.float32 if t == "f32" else np.float64).max / 2 ** 32
      small = np.finfo(np.float32 if t == "f32" else np.float64).tiny * 2 ** 32
      need = (np.abs(b) > big) | (np.abs(b) < small) | (np.abs(c) > big) | (np.abs(c) < small)
      needs = np.broadcast_to(need & (b != 0) & (c != 0) & np.isfinite(b) & np.isfinite(c), (32,))
      if (needs & self.exec).any(): raise ExecutionError(f"pc 0x{self.pc:x}: {n} with operands that need scaling is not emulated")
      self.vdst(f["vdst"], raw(np.broadcast_to(a, (32,)), t), BITS[t])
      self.sset(f["sdst"], 0)
      return None
    if n.startswith("v_div_fmas"):
      vcc = _mask_array(self.s[VCC])
      if (vcc & self.exec).any(): raise ExecutionError(f"pc 0x{self.pc:x}: {n} with scaled operands is not emulated")
      self.vdst(f["vdst"], raw(_fma_t(a, b, c, t), t), BITS[t])
      return None
    # v_div_fixup: a = quotient estimate, b = denominator, c = numerator: the special cases IEEE division defines
    sign = np.signbit(b) ^ np.signbit(c)
    q = np.where(np.isinf(b) & np.isfinite(c), np.where(sign, -0.0, 0.0), a)
    q = np.where(((b == 0) & (c != 0)) | (np.isinf(c) & np.isfinite(b)), np.where(sign, -np.inf, np.inf), q)
    q = np.where(np.isnan(b) | np.isnan(c) | ((b == 0) & (c == 0)) | (np.isinf(b) & np.isinf(c)), np.nan, q)
    self.vdst(f["vdst"], raw(np.asarray(q).astype(np.dtype(a.dtype)), t), BITS[t])
    return None
  def vop3p(self, i: Instr):
    n = i.name
    if n.startswith("v_wmma_"):
      from tinycore_amd.isa.wmma import wmma
      wmma(self, i)
      return None
    if n.startswith("v_pk_"): return self._packed(i)
    if n in ("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16"): return self._fma_mix(i)
    raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
  def _fma_mix(self, i: Instr):
    """D = S0 * S1 + S2 with each source float32, or float16 (op_sel_hi bit set; op_sel picks its half); neg_hi is abs."""
    f = i.f
    args = []
    for k, c in enumerate((f["src0"], f["src1"], f["src2"])):
      if f["opsel_hi"] >> k & 1: x = typed(self.vsrc(c, "f16", i.literal, bool(f["opsel"] >> k & 1)), "f16").astype(np.float32)
      else: x = typed(self.vsrc(c, "f32", i.literal), "f32")
      if f["neg_hi"] >> k & 1: x = np.abs(x)
      if f["neg"] >> k & 1: x = -x
      args.append(x)
    res = _fma_t(*args, "f32")
    if f["clamp"]: res = np.clip(res, 0, 1)
    if i.name == "v_fma_mix_f32": self.vdst(f["vdst"], raw(res, "f32"), 32)
    else: self.vdst(f["vdst"], raw(res.astype(np.float16), "f16"), 16, i.name.endswith("hi_f16"))
    return None
  def _packed(self, i: Instr):
    """v_pk_*: two 16-bit lanes per register, op_sel/op_sel_hi choose which half of each source feeds each half."""
    f, n = i.f, i.name
    base = "v_" + n[len("v_pk_"):]
    alias = {"v_mul_lo_u16": "v_mul_lo_u16", "v_fma_f16": "v_fma_f16", "v_add_i16": "v_add_nc_u16", "v_sub_i16": "v_sub_nc_u16",
             "v_add_u16": "v_add_nc_u16", "v_sub_u16": "v_sub_nc_u16", "v_mad_u16": "v_mad_u16", "v_mad_i16": "v_mad_i16"}
    spec = OPS.get(alias.get(base, base))
    if spec is None: raise unknown(i.words, self.arch, self.pc, f"{n} is not emulated")
    dt, sts, fn = spec
    codes = (f["src0"], f["src1"], f["src2"])[:len(sts)]
    halves = []
    for h, (sel, neg) in enumerate(((f["opsel"], f["neg"]), (f["opsel_hi"], f["neg_hi"]))):
      args = [self._operand(c, t, i.literal, bool(sel >> k & 1), False, t[0] == "f" and bool(neg >> k & 1))
              for k, (c, t) in enumerate(zip(codes, sts))]
      halves.append(raw(np.asarray(fn(*args)), dt).astype(np.uint32))
    self.vdst(f["vdst"], halves[0] | halves[1] << 16, 32)
    return None
  def vopd(self, i: Instr):
    f = i.f
    nx, ny = i.op.split("::")
    results = []
    for nm, s0, s1, d in ((nx, f["srcx0"], f["vsrcx1"], f["vdstx"]), (ny, f["srcy0"], f["vsrcy1"], f["vdsty"])):
      v1 = 256 + s1
      if nm == "v_dual_cndmask_b32":
        cond = _mask_array(self.sget(VCC))
        a, b = self.vsrc(s0, "b32", i.literal), self.vsrc(v1, "b32", i.literal)
        results.append((d, np.where(cond, np.broadcast_to(b, (32,)), a), 32, False))
        continue
      if nm.startswith(("v_dual_fmac_", "v_dual_dot2acc_")): codes = (s0, v1, 256 + d)
      elif nm.startswith("v_dual_fmamk_"): codes = (s0, LITERAL, v1)
      elif nm.startswith("v_dual_fmaak_"): codes = (s0, v1, LITERAL)
      else: codes = (s0, v1)[:len(OPS[nm][1]) if nm in OPS else 2]
      results.append(self.compute(i, nm, codes, d))
    for r in results: self.vdst(*r)   # both halves read their sources before either writes
    return None

def _fma_t(a, b, c, t):
  from tinycore_amd.isa.valu import _fma
  return _fma(a, b, c, t)

def _as_load(handler, gfx11_kind: str, gfx12_kind: str):
  """A memory handler whose register writes are the load's own (see Wave._overwritten)."""
  def run(w: Wave, i: Instr):
    w._loading = gfx12_kind if w.gfx12 else gfx11_kind
    try: return handler(w, i)
    finally: w._loading = None
  return run

_HANDLERS = {"SOP2": Wave.sop2, "SOP1": Wave.sop1, "SOPC": Wave.sopc, "SOPK": Wave.sopk, "SOPP": Wave.sopp, "SMEM": _as_load(Wave.smem, "lgkm", "km"),
             "VOP1": Wave.vop1, "VOP2": Wave.vop2, "VOPC": Wave.vopc_e32, "VOP3": Wave.vop3, "VOP3P": Wave.vop3p, "VOPD": Wave.vopd,
             "DS": _as_load(Wave.ds, "lgkm", "ds"), "MUBUF": Wave.mubuf, "GLOBAL": _as_load(Wave.vmem, "vm", "vm"),
             "FLAT": _as_load(Wave.vmem, "vm", "vm"), "SCRATCH": Wave.vmem}
