"""OpenCL C -> the device's program binary, built by the driver (clBuildProgram) and kept in tinycore's compile cache.

A binary only loads on the device (and driver) that built it, so those name the cache key."""
from __future__ import annotations
import contextlib, os, warnings
import pyopencl as cl
from tinycore.compiler import Compiler, CompileError
from tinycore.helpers import cache_dir
from tinycore_opencl.platforms import describe

class CLCompiler(Compiler):
  def __init__(self, ctx, dev):
    self.ctx, self.dev = ctx, dev
    info = describe(dev)
    # IEEE-exact float division and sqrt where the device offers them (OpenCL 1.2 otherwise allows 2.5 ulp / 3 ulp)
    self.options = ["-cl-fp32-correctly-rounded-divide-sqrt"] if info["fp32_correct_div"] else []
    super().__init__(f"opencl-{info['platform']}-{info['name']}-{info['driver']}-{' '.join(self.options)}")
  def compile(self, src: str) -> bytes:
    prg = cl.Program(self.ctx, src)
    try:
      with quiet_driver(): prg.build(options=self.options, devices=[self.dev], cache_dir=os.path.join(cache_dir(), "pyopencl"))
    except cl.Error as e: raise CompileError(f"CL: {describe(self.dev)['name']} did not build the kernel", src, str(e)) from None
    (binary,) = prg.get_info(cl.program_info.BINARIES)
    if not binary: raise CompileError(f"CL: {describe(self.dev)['name']} built the kernel but returned no binary", src)
    return bytes(binary)

@contextlib.contextmanager
def quiet_driver():
  """pyopencl warns whenever a build that succeeded logged anything; the kernels are generated, so a driver's style
  warnings (a constant operand of ||) are nothing a user can act on. Failed builds still raise with the full log."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", cl.CompilerWarning)
    yield
