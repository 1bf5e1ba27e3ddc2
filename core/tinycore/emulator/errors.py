"""What the emulator reports that real GPUs don't tell you."""
class EmulatorError(RuntimeError):
  """A kernel did something undefined; the message names the kernel, the buffer/address and the thread."""
class OutOfBounds(EmulatorError): pass
class UninitializedRead(EmulatorError): pass
class MissingBarrier(EmulatorError):
  """Two threads of a workgroup touched the same local address with no barrier between (a data race)."""
class AsyncCopyPending(EmulatorError):
  """Shared memory touched while an asynchronous copy into it is in flight (a cp.async with no wait_group covering it)."""
