"""pytest plugin: `-p tinycore_amd.isa.pytest_kit` with `--device=EMU+AMD[:LLVM|:HIP][:gfx1100|:gfx1201]` runs each test's
kernels as AMD machine code on the ISA emulator (hostdev.use_isa) instead of the UOp interpreter."""
import pytest

@pytest.fixture(autouse=True)
def _isa_machine_code():
  from tinycore.device import Device
  from tinycore_amd.isa.hostdev import use_isa
  use_isa(Device.DEFAULT)
  yield
