"""Compilers to HSA code objects: HIP C++ through a system clang, AMDGPU LLVM IR through llvmlite (no toolchain).

Both make a relocatable amdgcn object and link it with ld.lld into the shared object (ET_DYN) the HSA/KFD loader
takes. Without ld.lld the unlinked object is returned (it still carries the kernel descriptors and metadata note,
so it can be inspected, but a loader needs it linked). clang is driven with -cc1 so that no ROCm install, HIP
headers, device libraries or offload bundler are needed."""
from __future__ import annotations
import functools, os, shutil, subprocess, tempfile
from tinycore.compiler import Compiler, CompileError

_VERSIONS = range(22, 13, -1)

@functools.cache
def clang_cpus(clang: str) -> frozenset[str]:
  """The amdgcn processors this clang knows (Debian's clang 14 stops at gfx1036: no RDNA3)."""
  try: out = subprocess.run([clang, "-cc1", "-triple", "amdgcn-amd-amdhsa", "-target-cpu", "help"], input=b"", capture_output=True, timeout=30)
  except (OSError, subprocess.TimeoutExpired): return frozenset()
  return frozenset(w.strip(",") for w in (out.stdout + out.stderr).decode(errors="replace").split() if w.startswith("gfx"))

def find_clang(arch: str | None = None) -> str | None:
  """The newest clang on PATH (clang-22 .. clang-14, then clang) with the amdgcn target (and `arch`, if given)."""
  for c in [f"clang-{v}" for v in _VERSIONS] + ["clang"]:
    if (p := shutil.which(c)) and (cpus := clang_cpus(p)) and (arch is None or arch in cpus): return p
  return None

@functools.cache
def find_lld() -> str | None:
  for c in [f"ld.lld-{v}" for v in _VERSIONS] + ["ld.lld"]:   # newest first: an old lld rejects new code-object ABIs
    if (p := shutil.which(c)): return p
  return None

def link(obj: bytes, what: str) -> bytes:
  """ld.lld -shared: relocatable object -> loadable code object. Without ld.lld, the object as it is."""
  if (lld := find_lld()) is None: return obj
  with tempfile.TemporaryDirectory(prefix="tinycore-amd-") as d:
    o, so = os.path.join(d, "k.o"), os.path.join(d, "k.hsaco")
    with open(o, "wb") as f: f.write(obj)
    r = subprocess.run([lld, "-shared", "--no-undefined", o, "-o", so], capture_output=True)
    if r.returncode: raise CompileError(f"ld.lld could not link the {what} object", None, r.stderr.decode(errors="replace"))
    with open(so, "rb") as f: return f.read()

class HIPCompiler(Compiler):
  def __init__(self, arch: str = "gfx1100", clang: str | None = None):
    self.arch, self.clang = arch, clang or find_clang(arch)
    ver = os.path.basename(self.clang) if self.clang else "none"
    super().__init__(f"amd-hip-{ver}-{arch}-{bool(find_lld())}")
  def compile(self, src: str) -> bytes:
    if self.clang is None:
      raise CompileError(f"no clang with the amdgcn target for {self.arch} on PATH (Debian: apt-get install clang-19 lld-19)", src)
    with tempfile.TemporaryDirectory(prefix="tinycore-amd-") as d:
      s, o = os.path.join(d, "k.hip"), os.path.join(d, "k.o")
      with open(s, "w") as f: f.write(src)
      r = subprocess.run([self.clang, "-cc1", "-triple", "amdgcn-amd-amdhsa", "-target-cpu", self.arch, "-x", "hip", "-fcuda-is-device",
                          "-std=c++17", "-O3", "-ffp-contract=fast", "-emit-obj", s, "-o", o], capture_output=True)
      if r.returncode: raise CompileError(f"{os.path.basename(self.clang)} failed to compile for {self.arch}", src, r.stderr.decode(errors="replace"))
      with open(o, "rb") as f: obj = f.read()
    return link(obj, "HIP")
  def disassemble(self, lib: bytes) -> str: return disassemble(lib, self.arch)

@functools.cache
def _llvm():
  import llvmlite.binding as llvm
  llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
  return llvm

class AMDLLVMCompiler(Compiler):
  """AMDGPU LLVM IR -> code object with llvmlite's bundled LLVM: O3 module passes, then the amdgcn backend."""
  def __init__(self, arch: str = "gfx1100"):
    import llvmlite
    self.arch = arch
    super().__init__(f"amd-llvmlite-{llvmlite.__version__}-{arch}-{bool(find_lld())}")
  def _tm(self):
    return _llvm().Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu=self.arch, opt=3, reloc="pic")
  def _optimized(self, src: str):
    """(the module after the O3 passes, the target machine)."""
    llvm = _llvm()
    try:
      mod = llvm.parse_assembly(src); mod.verify()
    except RuntimeError as e: raise CompileError(f"LLVM rejected the AMDGPU IR for {self.arch}", src, str(e)) from None
    tm = self._tm()
    mod.data_layout = str(tm.target_data)   # AMDGPU's address-space sizes, before the passes see the module
    pb = llvm.create_pass_builder(tm, llvm.PipelineTuningOptions(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    return mod, tm
  def compile(self, src: str) -> bytes:
    mod, tm = self._optimized(src)
    try: obj = bytes(tm.emit_object(mod))
    except RuntimeError as e: raise CompileError(f"LLVM failed to generate amdgcn code for {self.arch}", src, str(e)) from None
    return link(obj, "LLVM")
  def to_asm(self, src: str) -> str:
    """The amdgcn assembly of what compile() builds (the same passes), with its kernel descriptor and metadata."""
    mod, tm = self._optimized(src)
    return tm.emit_assembly(mod)
  def disassemble(self, lib: bytes) -> str: return disassemble(lib, self.arch)

def disassemble(lib: bytes, arch: str) -> str:
  """llvm-objdump when there is one, else the code object's kernel table."""
  for c in ["llvm-objdump"] + [f"llvm-objdump-{v}" for v in _VERSIONS]:
    if (p := shutil.which(c)):
      with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
        f.write(lib); f.flush()
        r = subprocess.run([p, "-d", f"--mcpu={arch}", f.name], capture_output=True)
        if r.returncode == 0: return r.stdout.decode(errors="replace")
  from tinycore_amd.codeobject import read
  co = read(lib)
  return "\n".join(f"{k.name}: kernarg {k.kernarg_size} B, LDS {k.group_segment_size} B, scratch {k.private_segment_size} B, "
                   f"wave{k.wavefront_size}, {k.sgprs} sgprs, {k.vgprs} vgprs" for k in co.kernels.values())
