"""What the AMD tests share: a renderer by kind and arch, and a Tensor realized as machine code on the RDNA ISA
emulator. Each skips with the reason, and what to install, where this machine lacks the tool it needs."""
import pytest
from tinycore_amd.compiler import find_clang, find_lld

def need_lld():
  if find_lld() is None: pytest.skip("no ld.lld: code objects cannot be linked (apt-get install lld-19)")

def renderer(kind: str, arch: str, linked: bool = False):
  """The LLVM renderer (llvmlite) or the HIP one (a clang with the amdgcn target) for `arch`. `linked`: the test
  also needs its code objects linked (ld.lld), as anything that loads or runs them does."""
  if linked: need_lld()
  if kind == "LLVM":
    try: import llvmlite.binding  # noqa: F401
    except ImportError: pytest.skip("llvmlite not installed")
    from tinycore_amd.renderer_llvm import AMDLLVMRenderer
    return AMDLLVMRenderer(arch)
  if find_clang(arch) is None: pytest.skip(f"no clang with the amdgcn target for {arch} (apt-get install clang-19)")
  from tinycore_amd.renderer_hip import HIPRenderer
  return HIPRenderer(arch)

def on_isa(t, r, opts=None):
  """Tensor `t` realized with renderer `r` on the ISA emulator: (the result as numpy, the emulator's report)."""
  need_lld()
  from tinycore_amd.isa.run_tensor import realize_on_isa
  return realize_on_isa(t, r, opts)
