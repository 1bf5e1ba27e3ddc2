"""The opcodes a set of code objects contains, by llvm-objdump's disassembly (the test oracle the ISA emulator's
decoder is checked against): the denominator of the mock GPU's instruction coverage."""
from __future__ import annotations
import re, shutil, subprocess, tempfile

_LINE = re.compile(r"^\s+([a-z_][a-z0-9_]*)\b(.*)//\s*[0-9A-Fa-f]+:", re.M)
_DUAL = re.compile(r"::\s*([a-z_][a-z0-9_]*)")   # a VOPD pair prints as 'v_dual_x ... :: v_dual_y ...': two opcodes
_SUFFIX = re.compile(r"_e(32|64)$|_(dpp|sdwa)$")

def normalize(op: str) -> list[str]:
  """v_add_f32_e32 and v_add_f32_e64 are one opcode in two encodings; 'v_dual_x::v_dual_y' is two."""
  return [_SUFFIX.sub("", o.strip().lower()) for o in op.split("::") if o.strip()]

def objdump() -> str | None:
  return next((p for c in ("llvm-objdump-19", "llvm-objdump-20", "llvm-objdump-18", "llvm-objdump") if (p := shutil.which(c))), None)

def emitted_opcodes(libs: list[bytes], arch: str) -> set[str]:
  """Distinct opcodes in the .text of `libs` (empty when there is no llvm-objdump)."""
  if not libs or (tool := objdump()) is None: return set()
  out: set[str] = set()
  with tempfile.TemporaryDirectory(prefix="tinycore-disasm-") as d:
    paths = []
    for i, lib in enumerate(libs):
      paths.append(p := f"{d}/{i}.hsaco")
      with open(p, "wb") as f: f.write(lib)
    for k in range(0, len(paths), 64):
      r = subprocess.run([tool, "-d", f"--mcpu={arch}", *paths[k:k + 64]], capture_output=True, text=True)
      for first, rest in _LINE.findall(r.stdout):
        if first != "s_code_end": out.update(normalize("::".join([first, *_DUAL.findall(rest)])))   # s_code_end pads after the kernel
  return out
