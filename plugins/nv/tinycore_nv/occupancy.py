"""What ptxas and the SASS say about a compiled kernel, without a GPU: registers, spills and shared memory from
`ptxas -v`, blocks per SM from the device's limits, and instruction counts from `cuobjdump -sass` (the
nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels, or a toolkit's)."""
from __future__ import annotations
import collections, functools, os, re, shutil, subprocess, tempfile
from dataclasses import dataclass

@dataclass(frozen=True)
class SMLimits:
  registers: int = 65536          # 32-bit registers per SM
  reg_unit: int = 256             # registers are allocated per warp in units of this many
  smem: int = 228 * 1024          # shared memory per SM
  smem_reserved: int = 1024       # the runtime's per-block reservation
  threads: int = 2048
  blocks: int = 32

H200 = SMLimits()   # sm_90 (GH100): the same per-SM limits as the H100
ADA = SMLimits(smem=100 * 1024, threads=1536, blocks=24)   # sm_89 (AD102/AD104: L4, L40S, RTX 40xx)

def ptxas_usage(log: str) -> dict[str, int]:
  """Registers, shared bytes, stack and spill bytes of the (last) kernel in a `ptxas -v` log."""
  def last(pat: str) -> int:
    m = re.findall(pat, log)
    if not m: raise ValueError(f"ptxas -v output has no {pat!r}:\n{log}")
    return int(m[-1])
  smem = re.findall(r"Used \d+ registers.*?(\d+) bytes smem", log)
  return {"registers": last(r"Used (\d+) registers"), "smem": int(smem[-1]) if smem else 0,
          "stack": last(r"(\d+) bytes stack frame"), "spill_stores": last(r"(\d+) bytes spill stores"),
          "spill_loads": last(r"(\d+) bytes spill loads")}

def blocks_per_sm(registers: int, smem: int, threads: int, sm: SMLimits = H200) -> int:
  """Resident blocks of a kernel on one SM: the smallest of the register, shared-memory, thread and block limits."""
  warps = -(-threads // 32)
  per_warp = -(-max(registers, 1) * 32 // sm.reg_unit) * sm.reg_unit
  by_regs = (sm.registers // per_warp) // warps
  by_smem = sm.smem // (smem + sm.smem_reserved) if smem else sm.blocks
  return min(by_regs, by_smem, sm.threads // threads, sm.blocks)

@functools.cache
def find_sass_tool() -> str | None:
  """cuobjdump, where nvdisasm (which it runs) is found too: a toolkit's bin, or the pip wheels' nvidia/cu13/bin."""
  dirs = [os.path.join(r, "bin") for r in (os.getenv("CUDA_PATH"), os.getenv("CUDA_HOME"), "/usr/local/cuda") if r]
  try:
    import nvidia
    dirs += [os.path.join(p, sub, "bin") for p in nvidia.__path__ for sub in ("cu13", "cuda_cuobjdump", "cuda_nvdisasm")]
  except ImportError: pass
  for d in dirs:
    if os.access(os.path.join(d, "cuobjdump"), os.X_OK) and (os.access(os.path.join(d, "nvdisasm"), os.X_OK) or shutil.which("nvdisasm")):
      return os.path.join(d, "cuobjdump")
  return shutil.which("cuobjdump") if shutil.which("nvdisasm") else None

def sass(cubin: bytes) -> str:
  exe = find_sass_tool()
  if exe is None: raise FileNotFoundError("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
  with tempfile.TemporaryDirectory() as d:
    with open(path := os.path.join(d, "k.cubin"), "wb") as f: f.write(cubin)
    env = {**os.environ, "PATH": os.path.dirname(exe) + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run([exe, "-sass", path], capture_output=True, text=True, check=True, env=env).stdout

def sass_counts(cubin: bytes) -> collections.Counter:
  """Opcode (without modifiers) -> how many times it appears in the SASS."""
  ops = re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)", sass(cubin), re.M)
  return collections.Counter(ops)
