"""The NV GEMM tests' shared harness (NVHarness): compile a kernel for the emulator with NVIDIA's execution model and
run it, or compile it with NVRTC + ptxas for its `ptxas -v` report and SASS. The parts that need a tool this machine
lacks (NVRTC, ptxas, cuobjdump) skip with the reason."""
from __future__ import annotations
import dataclasses
import pytest

class NVHarness:
  @staticmethod
  def renderer(sync: bool = False, arch: str = "sm_90"):
    """A CUDARenderer for `arch`; `sync` takes away cp.async and ldmatrix, as a GPU without them (AMD LDS, Metal)
    declares: copies between two barriers, fragments gathered element by element."""
    from tinycore_nv.renderer_cuda import CUDARenderer
    r = CUDARenderer(arch)
    if sync: r.async_copy, r.matrix_load = 0, False
    return r

  @staticmethod
  def program(ast, arch: str = "sm_90", tile=None, renderer=None, env: str = "GEMM_TILE"):
    """The kernel as codegen makes it for EMU+NV on `arch` (`renderer`: a CUDARenderer with edited capabilities);
    `tile` (a GemmTile or SimtTile, its fields in order) is forced through `env`."""
    from tinycore.helpers import Context
    from tinycore.codegen import get_program
    from tinycore.emulator import EmulatedRenderer
    from tinycore_nv.renderer_cuda import CUDARenderer
    from tinycore_nv.emulator import model
    # GEMM_TILE holds the 7 action fields; a tile's wave is the arch's, not an action
    tile_env = ",".join(str(int(x)) for x in dataclasses.astuple(tile)[:7]) if tile is not None else ""
    with Context(**{env: tile_env}):
      return get_program(ast, EmulatedRenderer(renderer or CUDARenderer(arch), model("NV", arch)))

  @staticmethod
  def run(p, bufs, arch: str = "sm_90", edit=None):
    """Run program `p` on numpy buffers in the emulator; `edit(nodes)` may break the decoded program first."""
    from tinycore.emulator import serialize
    from tinycore.emulator.interp import Interpreter
    from tinycore_nv.emulator import model
    name, nodes = serialize.decode(serialize.decode_bytes(p.src))
    if edit: edit(nodes)
    Interpreter(nodes, model("NV", arch), name).run(tuple(bufs), p.global_size, p.local_size, ())

  @staticmethod
  def run_nodes(name: str, nodes: list, bufs, local: tuple, arch: str = "sm_90"):
    """Run a hand-built flat UOp program (one workgroup of `local` threads), through the same serialization."""
    from tinycore.emulator import serialize
    from tinycore.emulator.interp import Interpreter
    from tinycore_nv.emulator import model
    name, decoded = serialize.decode(serialize.decode_bytes(serialize.encode(name, nodes)))
    Interpreter(decoded, model("NV", arch), name).run(tuple(bufs), (1, 1, 1), local, ())

  @staticmethod
  def drop(pred):
    """An `edit` for run(): every decoded node matching `pred` becomes a NOOP (a kernel with, say, a barrier removed);
    finding none fails, so a test can't pass by removing nothing."""
    from tinycore.uop import Ops
    def edit(nodes):
      hit = [n for n in nodes if pred(n)]
      assert hit, "nothing to remove"
      for n in hit: n.op = Ops.NOOP
    return edit

  @staticmethod
  def is_staged(p) -> bool: return any(u.op.name == "DEFINE_LOCAL" for u in p.uops)

  @staticmethod
  def cubin(p, arch: str = "sm_90") -> tuple[bytes, str]:
    """(cubin, ptxas -v log) of a CUDA-rendered program: NVRTC to PTX, then ptxas."""
    from tinycore_nv.nvrtc import find_nvrtc, NVRTCCompiler
    from tinycore_nv.ptxas import find_ptxas, ptxas_with_log
    if find_nvrtc() is None or find_ptxas() is None: pytest.skip("NVRTC or ptxas not found (no CUDA toolkit)")
    return ptxas_with_log(NVRTCCompiler(arch).to_ptx(p.src), arch)

  @staticmethod
  def sass_text(cubin: bytes) -> str:
    from tinycore_nv.occupancy import find_sass_tool, sass
    if find_sass_tool() is None: pytest.skip("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    return sass(cubin)
