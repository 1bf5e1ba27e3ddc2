"""LLVM IR -> host object file, in-process with llvmlite: no system compiler or linker needed.

The output is a relocatable object (ELF on Linux); `runtime_llvm.LLVMProgram` loads it with llvmlite's JIT linker,
which also resolves the libm calls (sinf, exp2f, ...) the intrinsics lower to."""
from __future__ import annotations
import functools, hashlib
import llvmlite.binding as llvm
from tinycore.compiler import Compiler, CompileError

@functools.cache
def host_target_machine(opt: int = 2):
  llvm.initialize_native_target()
  llvm.initialize_native_asmprinter()
  triple = llvm.get_process_triple()
  # the host's own ISA (like -march=native); pic so the JIT linker can place it anywhere
  return llvm.Target.from_triple(triple).create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                                                opt=opt, reloc="pic", codemodel="default")

class LLVMCompiler(Compiler):
  def __init__(self, opt: int = 2):
    self.opt, self.tm = opt, host_target_machine(opt)
    feats = hashlib.sha256(llvm.get_host_cpu_features().flatten().encode()).hexdigest()[:12]
    v = ".".join(map(str, llvm.llvm_version_info))
    super().__init__(f"llvm-{v}-{llvm.get_process_triple()}-{llvm.get_host_cpu_name()}-{feats}-O{opt}")
  def optimize(self, src: str):
    try:
      mod = llvm.parse_assembly(src)
      mod.verify()
    except RuntimeError as e: raise CompileError("LLVM rejected the kernel IR", src, str(e)) from None
    mod.triple, mod.data_layout = llvm.get_process_triple(), str(self.tm.target_data)
    # no fast-math anywhere: the standard O2 pipeline keeps IEEE NaN/inf semantics
    pto = llvm.PipelineTuningOptions(speed_level=self.opt)
    pto.loop_vectorization, pto.slp_vectorization = True, True
    pb = llvm.create_pass_builder(self.tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod
  def compile(self, src: str) -> bytes:
    mod = self.optimize(src)
    try: return bytes(self.tm.emit_object(mod))
    except RuntimeError as e: raise CompileError("LLVM failed to generate code for the kernel", src, str(e)) from None
  def disassemble(self, lib: bytes) -> str: return f"<{len(lib)}-byte object>"
  def assembly(self, src: str) -> str:
    """The optimized kernel as host assembly (for DEBUG and benchmarking)."""
    return self.tm.emit_assembly(self.optimize(src))
