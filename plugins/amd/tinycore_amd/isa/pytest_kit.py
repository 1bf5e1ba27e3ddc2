"""pytest plugin: `-p tinycore_amd.isa.pytest_kit` with `--device=EMU+AMD[:LLVM|:HIP][:gfx1100|:gfx1201]` runs each test's
kernels as AMD machine code on the ISA emulator (hostdev.use_isa) instead of the UOp interpreter."""
import pytest

@pytest.fixture(autouse=True)
def _isa_machine_code():
  from tinycore.device import Device
  from tinycore_amd.isa.hostdev import use_isa
  use_isa(Device.DEFAULT)
  yield

def pytest_terminal_summary(terminalreporter):
  """Coverage and speed of this run (per process: run without -n for whole-kit numbers)."""
  from tinycore_amd.isa.hostdev import ISAProgram
  t = ISAProgram.totals
  if not t.instructions: return
  cov = len(t.opcodes & ISAProgram.emitted)
  terminalreporter.write_line(f"ISA emulator: {t.instructions} instructions in {ISAProgram.seconds:.1f}s "
                              f"({t.instructions / max(ISAProgram.seconds, 1e-9):,.0f}/s), {t.waves} waves; "
                              f"{cov}/{len(ISAProgram.emitted)} emitted operations executed")
