"""A mock amdgpu/KFD kernel driver (MOCKGPU=1): it stands in for the syscalls the KFD runtime makes, keeps the GPU's
memory, and runs each AQL kernel-dispatch packet on the RDNA ISA emulator (tinycore_amd.isa), instruction by
instruction. driver.py answers the ioctls and mmaps, memory.py is the GPU virtual memory, cp.py the command processor,
topology.py the /sys/class/kfd tree it presents."""
