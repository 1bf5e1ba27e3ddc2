"""`python -m tinycore_amd.isa.measure [arch ...]`: runs the kit's kernel table (tinycore.testing.kernel_cases) through
both AMD renderers on the ISA emulator and prints, per arch and renderer, instruction coverage (distinct operations
executed / emitted) and emulator speed (instructions per second, compile time excluded). Inputs are random bytes:
this measures the machine code, not the numbers (tests/test_isa.py checks those against numpy)."""
from __future__ import annotations
import sys
import numpy as np

def emitted_ops(lib: bytes, arch: str) -> set[str]:
  """Every operation in the code object's kernels, decoded statically from entry to s_endpgm + s_code_end padding."""
  from tinycore_amd.isa import load, decode
  img = load(lib)
  ops: set[str] = set()
  for k in img.kernels.values():
    pc = k.entry
    while pc + 4 <= len(img.memory):
      ins = decode(img.memory, pc, arch)
      if ins.name == "s_code_end": break
      ops.update(ins.names)
      pc += ins.size
  return ops

def measure(arch: str, kind: str) -> dict:
  from tinycore.testing.kernel_cases import kernel_cases
  from tinycore_amd.isa.run_tensor import realize_on_isa
  if kind == "LLVM":
    from tinycore_amd.renderer_llvm import AMDLLVMRenderer as R
  else:
    from tinycore_amd.renderer_hip import HIPRenderer as R   # type: ignore[assignment]
  r = R(arch)
  executed: set[str] = set()
  emitted: set[str] = set()
  insts, secs, failed = 0, 0.0, []
  rng = np.random.default_rng(0)
  for name, build in kernel_cases("EMU+AMD", skip=("fp8",) if kind == "LLVM" else ()).items():
    try:
      _, rep = realize_on_isa(build(), r, fill=lambda n: rng.integers(1, 120, n, dtype=np.uint8))
    except Exception as e:   # noqa: BLE001 - reported, the measurement goes on
      failed.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
      continue
    executed |= rep.stats.opcodes
    for lib in rep.libs: emitted |= emitted_ops(lib, arch)
    insts += rep.stats.instructions
    secs += rep.seconds
  return {"arch": arch, "renderer": kind, "executed": executed, "emitted": emitted, "instructions": insts, "seconds": secs, "failed": failed}

def main(argv: list[str]) -> int:
  from tinycore.helpers import DEV
  DEV.value = "EMU+AMD"
  bad = 0
  for arch in argv or ["gfx1100", "gfx1201"]:
    for kind in ("LLVM", "HIP"):
      m = measure(arch, kind)
      cov = len(m["executed"] & m["emitted"])
      print(f"{arch} {kind:4}: {cov}/{len(m['emitted'])} emitted operations executed, {m['instructions']} instructions in "
            f"{m['seconds']:.2f}s = {m['instructions'] / max(m['seconds'], 1e-9):,.0f} instructions/s")
      if (never := sorted(m["emitted"] - m["executed"])): print(f"  emitted but not executed (branches not taken): {', '.join(never)}")
      for f in m["failed"]: print(f"  FAILED {f}")
      bad += len(m["failed"])
  return 1 if bad else 0

if __name__ == "__main__": sys.exit(main(sys.argv[1:]))
