"""'Compiling' WGSL is validating it: wgpu's create_shader_module runs naga and raises on an invalid shader.
The library is the WGSL text itself; the runtime builds (and caches) the pipeline from it."""
from __future__ import annotations
from tinycore.compiler import Compiler, CompileError

class WGSLCompiler(Compiler):
  def __init__(self, dev):
    self.dev = dev
    super().__init__(None)   # no disk cache: validation is cheap, and a cached entry would skip it
  def compile(self, src: str) -> bytes:
    try: self.dev.create_shader_module(code=src)
    except Exception as e: raise CompileError("wgpu (naga) rejected the WGSL kernel", src, str(e)) from None
    return src.encode()
