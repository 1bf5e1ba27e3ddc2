"""The shared GPU emulator: one numpy-vectorized UOp interpreter, parameterized by a device's execution model."""
from tinycore.emulator.model import ExecModel, TCLayout, layout, as_model
from tinycore.emulator.device import open_emulated, EmulatedRenderer, EmulatorCompiler, EmulatorProgram, EmuAllocator, emulator_model
from tinycore.emulator.errors import EmulatorError, OutOfBounds, UninitializedRead, MissingBarrier, AsyncCopyPending
