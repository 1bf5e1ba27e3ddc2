"""Fixtures of the NV tests: `nv`, the harness of _nv_harness.py (which a test module may also import by name), and
`emu_nv`, EMU+NV as the default device for one test."""
import os, sys
import pytest
sys.path.insert(0, os.path.dirname(__file__))   # _nv_harness.py
from _nv_harness import NVHarness

@pytest.fixture(scope="session")
def nv() -> NVHarness: return NVHarness()

@pytest.fixture
def emu_nv(registry) -> None:
  """EMU+NV (the emulator with NVIDIA's execution model) as the default device for one test (`registry` restores it)."""
  from tinycore.helpers import DEV
  DEV.value = "EMU+NV"
