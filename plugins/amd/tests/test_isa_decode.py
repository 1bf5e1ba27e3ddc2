"""The emulator's decoder against LLVM's disassembler (llvm-objdump-19, the test oracle): every instruction of every
kernel our renderers compile for the kit's kernel table (tinycore.testing.kernel_cases), for RDNA3 and RDNA4, must
decode to the same operation and length. Also checks how many of the operations emitted the emulator executes."""
import re
import shutil
import subprocess
import tempfile
import pytest
from tinycore.testing.kernel_cases import kernel_cases
from _amd_tools import renderer

pytestmark = pytest.mark.needs_device
D = "EMU+AMD"
ARCHS = ("gfx1100", "gfx1201")
OBJDUMP = shutil.which("llvm-objdump-19")
needs_objdump = pytest.mark.skipif(OBJDUMP is None, reason="no llvm-objdump-19 (apt-get install llvm-19)")

@pytest.fixture(autouse=True)
def _emu_default(registry):
  from tinycore.helpers import DEV as DEV_VAR
  DEV_VAR.value = D

def objdump(lib: bytes, arch: str) -> dict[int, tuple[str, int]]:
  """address -> (LLVM's text of the instruction, its length in bytes)."""
  # gfx11 code from LLVM 22 (llvmlite) uses true16 registers (v1.h); LLVM 19 needs +real-true16 to print most of them
  attrs = ["--mattr=+real-true16"] if arch.startswith("gfx11") else []
  with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
    f.write(lib); f.flush()
    out = subprocess.run([OBJDUMP, "-d", f"--mcpu={arch}", *attrs, f.name], capture_output=True, text=True, check=True).stdout
  res = {}
  for ln in out.splitlines():
    m = re.match(r"\s+(\S.*?)\s*// ([0-9A-F]{12}): ((?:[0-9A-F]{8} ?)+)", ln)
    if m: res[int(m.group(2), 16)] = (m.group(1), len(m.group(3).split()) * 4)
  return res

def _true16_hi(ins) -> bool:
  """A VOP1/VOP2/VOPC 16-bit op naming a high half (register field bit 7): LLVM 19 prints some of these as .long."""
  f = ins.f
  return ins.fmt in ("VOP1", "VOP2", "VOPC") and ("16" in ins.name) and \
    bool((f.get("vdst", 0) >> 7) | ((f.get("src0", 0) - 256) >> 7 if f.get("src0", 0) >= 256 else 0) | (f.get("vsrc1", 0) >> 7))

def check_decode(lib: bytes, arch: str) -> tuple[int, int, set]:
  """(instructions compared, ones LLVM 19 cannot print, mnemonics emitted)."""
  from tinycore_amd.isa import load, decode
  from tinycore_amd.codeobject import read
  img, ref = load(lib), objdump(lib, arch)
  co = read(lib)
  n = unprintable = 0
  emitted = set()
  for k in img.kernels.values():
    delta = co.symbols[k.name] - k.entry   # objdump prints file offsets for a shared object's .text
    pc = k.entry
    while True:
      ins = decode(img.memory, pc, arch)
      text, size = ref[pc + delta] if (pc + delta) in ref else ref[pc]
      names = [p.strip().split()[0] for p in text.split("::")]
      if names[0] == ".long":
        assert _true16_hi(ins), f"{arch} 0x{pc:x}: LLVM cannot print {ins.words} but it is not a true16 high-half op ({ins.op})"
        unprintable += 1
      else:
        assert ins.size == size, f"{arch} 0x{pc:x} {text}: decoded {ins.size} bytes, LLVM {size}"
        mine = [ins.op] if len(names) == 1 else ins.op.split("::")
        assert [m.removesuffix("_e32").removesuffix("_e64") for m in mine] == [x.removesuffix("_e32").removesuffix("_e64") for x in names], \
          f"{arch} 0x{pc:x}: decoded {ins.op}, LLVM says {text}"
      n += 1
      emitted.update(ins.names)
      if ins.name == "s_endpgm" and all(ref.get(p, ("s_code_end",))[0].startswith("s_code_end") for p in (pc + ins.size + delta, pc + ins.size)):
        break
      pc += ins.size
  return n, unprintable, emitted

CASES = kernel_cases(D)

def decode_cases(kind: str, arch: str, names) -> int:
  from tinycore.codegen import get_program
  r = renderer(kind, arch, linked=True)
  total = 0
  for case in names:
    if kind == "LLVM" and case == "fp8": continue   # the LLVM renderer refuses fp8 (use HIP)
    p = get_program(CASES[case]().schedule()[-1].ast, r)
    total += check_decode(r.compiler.compile(p.src), arch)[0]
  return total

@needs_objdump
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["LLVM", "HIP"])
def test_decode_matches_llvm_objdump(kind, arch):
  assert decode_cases(kind, arch, ("half", "int64_shift", "transcendental")) > 60

@needs_objdump
@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["LLVM", "HIP"])
def test_decode_matches_llvm_objdump_every_kit_kernel(kind, arch):
  assert decode_cases(kind, arch, CASES) > 500
