"""NVIDIA's execution model for the shared emulator (`DEV=EMU+NV`): warps of 32, the arch's shared memory per block
(opting in to dynamic shared memory: 227 KB on sm_90, shared_memory.py), 1024 threads per block, and the mma.m16n8k16 fragment layouts of sm_80+.
The CUDA renderer drives codegen (so its choices are NV's); the interpreter runs the linearized program."""
from __future__ import annotations

def model(device: str, arch: str | None = None):
  from tinycore.emulator import ExecModel
  from tinycore_nv.renderer_cuda import parse_arch
  from tinycore_nv.tensor_cores import layouts
  arch = parse_arch(arch)
  from tinycore_nv.shared_memory import block_limit
  return ExecModel(name=f"{device.lower()}-{arch}", warp_size=32, local_mem=block_limit(arch), max_workgroup=1024, tensor_cores=layouts(arch))
