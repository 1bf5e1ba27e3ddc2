"""The KFD runtime (tinycore_amd/kfd) against the mock KFD driver (tinycore_amd/mockgpu), with a stand-in for the ISA
emulator that runs kernels by name: the blit copy and a few hand-written kernels, reading their kernarg segments from
GPU memory exactly as the emulator would. What it checks: the ioctl ABI against the system's kfd_ioctl.h, the loader,
copies of every size through the staging buffer, kernarg layout (explicit and hidden), the AQL ring and signal pool
wrapping, in-order execution, errors and faults surfacing in the user's terms, and the mock refusing what KFD refuses.
The real emulator runs in test_kfd_emulated.py and the conformance lane (.ci/lanes/amd-kfd.sh)."""
import ctypes, errno, os, shutil, struct, subprocess
import numpy as np
import pytest
from tinycore_amd.codeobject import read
from tinycore_amd.compiler import AMDLLVMCompiler, find_clang, find_lld, HIPCompiler
from tinycore_amd.kfd import blit, device as kfd_device, ioctl as kio, loader
from tinycore_amd.kfd.device import KFDAllocator, KFDGPU, KFDProgram, gpu_nodes
from tinycore_amd.kfd.syscalls import KFDError, PROT_NONE, MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE
from tinycore_amd.mockgpu.cp import MockGPUError
from tinycore_amd.mockgpu.driver import MockKFD
from tinycore_amd.mockgpu.memory import GPUMemoryFault, MockGPUMemory, Region

pytestmark = pytest.mark.skipif(find_lld() is None, reason="no ld.lld: the compilers cannot link loadable code objects")

SCALE = """target triple = "amdgcn-amd-amdhsa"
define amdgpu_kernel void @scale(ptr addrspace(1) %dst, ptr addrspace(1) %src, i32 %k, i32 %n) #0 {
entry:
  ret void
}
attributes #0 = { nounwind "amdgpu-no-implicitarg-ptr" }
!llvm.module.flags = !{!0}
!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}
"""

class Fake:
  """Runs kernels by name on the mock's GPU memory; records every dispatch."""
  def __init__(self): self.log, self.fail = [], None
  def __call__(self, lib, name, arch, grid, block, kernarg, mem):
    k = read(lib).kernels[name]
    args = {a[".name"] if ".name" in a else a[".value_kind"]: int.from_bytes(mem.read(kernarg + a[".offset"], a[".size"]), "little")
            for a in k.args}
    self.log.append((name, arch, grid, block, args))
    if self.fail: raise RuntimeError(self.fail)
    if name == blit.NAME:
      if args["n"]: mem.store(np.array([args["dst"]], np.uint64), mem.load(np.array([args["src"]], np.uint64), args["n"]))
    elif name == "scale":
      n = args["n"]
      x = mem.load(args["src"] + 4 * np.arange(n, dtype=np.uint64), 4).view(np.int32)
      mem.store(args["dst"] + 4 * np.arange(n, dtype=np.uint64), (x * np.uint32(args["k"]).view(np.int32)).view(np.uint8))
    else: raise NotImplementedError(f"the stand-in runs {blit.NAME} and scale only, not {name}")   # never a silent no-op

@pytest.fixture
def gpu():
  fake = Fake()
  m = MockKFD(("gfx1100",), dispatch=fake)
  g = KFDGPU(m, gpu_nodes(m)[0])
  g.fake, g.mock = fake, m
  yield g
  g.queue.synchronize()

# ***** the ABI

def test_ioctl_abi_matches_the_system_header(tmp_path):
  """Request numbers and structure sizes against the C compiler's view of <linux/kfd_ioctl.h>."""
  cc = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
  if cc is None or not os.path.exists("/usr/include/linux/kfd_ioctl.h"): pytest.skip("no C compiler or no <linux/kfd_ioctl.h> to compare with")
  names = ["GET_VERSION", "CREATE_QUEUE", "DESTROY_QUEUE", "CREATE_EVENT", "DESTROY_EVENT", "WAIT_EVENTS", "GET_PROCESS_APERTURES_NEW",
           "ACQUIRE_VM", "ALLOC_MEMORY_OF_GPU", "FREE_MEMORY_OF_GPU", "MAP_MEMORY_TO_GPU", "UNMAP_MEMORY_FROM_GPU"]
  src = tmp_path / "abi.c"
  src.write_text("#include <stdio.h>\n#include <linux/kfd_ioctl.h>\nint main(void){\n" +
                 "".join(f'printf("{n} %lu\\n", (unsigned long)AMDKFD_IOC_{n});\n' for n in names) +
                 'printf("EVENT_DATA %zu\\n", sizeof(struct kfd_event_data));\n'
                 'printf("APERTURES %zu\\n", sizeof(struct kfd_process_device_apertures));\n'
                 'printf("MEM_FLAGS %u %u %u\\n", KFD_IOC_ALLOC_MEM_FLAGS_VRAM, KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED);\n'
                 "return 0;}\n")
  # the header includes <drm/drm.h> only for the kernel's integer types; libdrm's headers may be absent
  (tmp_path / "drm").mkdir()
  (tmp_path / "drm" / "drm.h").write_text("#include <linux/types.h>\n#include <linux/ioctl.h>\n")
  r = subprocess.run([cc, "-idirafter", str(tmp_path), str(src), "-o", str(tmp_path / "abi")], capture_output=True, text=True)
  assert r.returncode == 0, r.stderr
  got = dict(line.split(" ", 1) for line in subprocess.run([str(tmp_path / "abi")], capture_output=True, text=True).stdout.splitlines())
  for n in names: assert int(got[n]) == getattr(kio, n), n
  assert int(got["EVENT_DATA"]) == ctypes.sizeof(kio.EventData) and int(got["APERTURES"]) == ctypes.sizeof(kio.DeviceApertures)
  assert got["MEM_FLAGS"].split() == [str(kio.MEM_VRAM), str(kio.MEM_GTT), str(kio.MEM_UNCACHED)]

# ***** the loader

def test_loader_places_segments_at_their_addresses():
  lib = AMDLLVMCompiler("gfx1100").compile(blit.SOURCE)
  img = loader.parse(lib)
  assert blit.NAME in img.descriptors and img.size >= max(v + m for v, _, _, m in img.segments)
  blob, _ = loader.layout(lib, 0x7000_0000)
  for vaddr, off, filesz, _ in img.segments: assert blob[vaddr:vaddr + filesz] == lib[off:off + filesz]
  kd = img.descriptors[blit.NAME]
  # the descriptor's kernel_code_entry_byte_offset (at 16) points into an executable segment of the image
  entry = kd + struct.unpack_from("<q", blob, kd + 16)[0]
  assert any(v <= entry < v + f for v, _, f, _ in img.segments[1:])
  assert loader.kernel_at(loader.loaded_file(blob + bytes(4096)), kd) == blit.NAME

def test_loader_rejects_what_it_cannot_place():
  lib = AMDLLVMCompiler("gfx1100").compile(blit.SOURCE)
  with pytest.raises(loader.CodeObjectError, match="truncated"): loader.parse(lib[:200])
  with pytest.raises(loader.CodeObjectError, match="ELF64"): loader.parse(b"\0" * 128)
  with pytest.raises(loader.CodeObjectError, match="no kernel descriptor"): loader.kernel_at(lib, 3)
  phoff, = struct.unpack_from("<Q", lib, 32)
  huge = bytearray(lib)
  for i in range(struct.unpack_from("<H", lib, 56)[0]):   # every PT_LOAD claims 1 GiB of memory
    if struct.unpack_from("<I", lib, phoff + 56 * i)[0] == loader.PT_LOAD: struct.pack_into("<Q", huge, phoff + 56 * i + 40, 1 << 30)
  with pytest.raises(loader.CodeObjectError, match="out of range"): loader.parse(bytes(huge))
  bad = bytearray(lib); struct.pack_into("<H", bad, 54, 8)   # e_phentsize too small to hold a program header
  with pytest.raises(loader.CodeObjectError, match="too small"): loader.parse(bytes(bad))

# ***** copies, kernels, the queue

@pytest.mark.needs_device
@pytest.mark.parametrize("n", [1, 15, 16, 17, 4096 + 3, 100_000])
def test_copies_round_trip(gpu, n):
  al = KFDAllocator(gpu)
  x = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
  p = al.alloc(n)
  al._copyin(p, memoryview(x.tobytes()))      # read-only source
  al._copyin(p + 0, memoryview(x))            # writable source
  out = np.zeros(n, np.uint8)
  gpu.queue.synchronize()
  al._copyout(memoryview(out), p)
  np.testing.assert_array_equal(out, x)
  assert all(name == blit.NAME for name, *_ in gpu.fake.log)

@pytest.mark.needs_device
def test_copies_larger_than_the_staging_buffer(gpu, monkeypatch):
  monkeypatch.setattr(kfd_device, "STAGING_BYTES", 4096)   # chunks of one page through the same 8 MiB staging allocation
  al = KFDAllocator(gpu)
  x = np.arange(5000, dtype=np.float32)
  p = al.alloc(x.nbytes)
  al._copyin(p, memoryview(x))
  out = np.zeros_like(x)
  al._copyout(memoryview(out), p)
  np.testing.assert_array_equal(out, x)
  assert sum(name == blit.NAME for name, *_ in gpu.fake.log) == 2 * 5  # 20000 bytes = 5 chunks each way

@pytest.mark.needs_device
def test_kernel_gets_its_kernargs_grid_and_block(gpu):
  al = KFDAllocator(gpu)
  x = np.arange(-10, 54, dtype=np.int32)
  src, dst = al.alloc(x.nbytes), al.alloc(x.nbytes)
  al._copyin(src, memoryview(x))
  prg = KFDProgram(gpu, "scale", AMDLLVMCompiler("gfx1100").compile(SCALE))
  prg(dst, src, global_size=(2, 3), local_size=(32,), vals=(-3, len(x)))
  out = np.zeros_like(x)
  gpu.queue.synchronize()
  al._copyout(memoryview(out), dst)
  np.testing.assert_array_equal(out, x * -3)
  name, arch, grid, block, args = gpu.fake.log[-2]
  assert (name, arch, grid, block) == ("scale", "gfx1100", (2, 3, 1), (32, 1, 1))
  assert args == {"dst": dst, "src": src, "k": (-3) & 0xffffffff, "n": len(x)}
  with pytest.raises(RuntimeError, match="takes 4 explicit arguments"): prg(dst, src, vals=(1,))
  with pytest.raises(ValueError, match="work-group size"): prg(dst, src, local_size=(2048,), vals=(1, 1))

@pytest.mark.needs_device
@pytest.mark.skipif(find_clang("gfx1100") is None, reason="no clang with the amdgcn target")
def test_hidden_kernargs_are_filled_for_hip_code_objects(gpu):
  src = 'extern "C" __attribute__((global)) void k(int* a) { a[__builtin_amdgcn_workgroup_id_x()] = __builtin_amdgcn_workgroup_size_x(); }'
  lib = HIPCompiler("gfx1100").compile(src)
  kinds = {a[".value_kind"] for a in read(lib).kernels["k"].args}
  if "hidden_group_size_x" not in kinds: pytest.skip(f"this clang's code object declares no hidden group size ({sorted(kinds)})")
  KFDProgram(gpu, "k", lib)(0x1000, global_size=(5, 2, 1), local_size=(64, 1, 1))
  gpu.queue.synchronize()
  args = gpu.fake.log[-1][4]
  assert args["hidden_block_count_x"] == 5 and args["hidden_block_count_y"] == 2 and args["hidden_block_count_z"] == 1
  assert args["hidden_group_size_x"] == 64 and args["hidden_group_size_y"] == 1
  assert args["hidden_grid_dims"] == 3 and args["hidden_remainder_x"] == 0 and args["hidden_global_offset_x"] == 0

@pytest.mark.needs_device
def test_ring_and_signals_wrap_in_order(gpu):
  prg = KFDProgram(gpu, "scale", AMDLLVMCompiler("gfx1100").compile(SCALE))
  al = KFDAllocator(gpu)
  p = al.alloc(64)
  n = 2600   # > the 1024-packet ring and the 1024-signal pool, twice
  for i in range(n): prg(p, p, vals=(i, 0))
  gpu.queue.synchronize()
  ks = [args["k"] for name, *_, args in gpu.fake.log if name == "scale"]
  assert ks == list(range(n))
  assert gpu.queue.complete(n - 1) and gpu.queue.next == n

@pytest.mark.needs_device
def test_kernarg_ring_wraps_without_overwriting_queued_arguments(monkeypatch):
  monkeypatch.setattr(kfd_device, "KERNARG_BYTES", 64 * 10)   # ten dispatches' worth of kernel arguments
  fake = Fake()
  m = MockKFD(("gfx1100",), dispatch=fake)
  g = KFDGPU(m, gpu_nodes(m)[0])
  prg = KFDProgram(g, "scale", AMDLLVMCompiler("gfx1100").compile(SCALE))
  for i in range(95): prg(0x1000, 0x1000, vals=(i, 0))   # nothing runs until the host waits: wrapping must wait first
  g.queue.synchronize()
  assert [args["k"] for name, *_, args in fake.log] == list(range(95))

@pytest.mark.needs_device
def test_wait_returns_the_elapsed_time(gpu):
  prg = KFDProgram(gpu, "scale", AMDLLVMCompiler("gfx1100").compile(SCALE))
  t = prg(0x1000, 0x1000, vals=(1, 0), wait=True)
  assert isinstance(t, float) and 0 <= t < 60

@pytest.mark.needs_device
def test_a_failing_kernel_is_reported_and_the_queue_goes_on(gpu):
  prg = KFDProgram(gpu, "scale", AMDLLVMCompiler("gfx1100").compile(SCALE))
  gpu.fake.fail = "v_bogus_b32 is not implemented"
  prg(0x1000, 0x1000, vals=(1, 0))
  with pytest.raises(MockGPUError, match="v_bogus_b32 is not implemented"): gpu.queue.synchronize()
  gpu.fake.fail = None
  prg(0x1000, 0x1000, vals=(2, 0))
  gpu.queue.synchronize()
  assert gpu.fake.log[-1][4]["k"] == 2

@pytest.mark.needs_device
def test_a_kernel_touching_freed_memory_faults(gpu):
  al = KFDAllocator(gpu)
  a, b = al.alloc(256), al.alloc(256)
  prg = KFDProgram(gpu, "scale", AMDLLVMCompiler("gfx1100").compile(SCALE))
  # code object, kernarg ring and signals in place first: an allocation made after the free could reuse b's addresses
  prg(a, a, vals=(1, 4))
  gpu.queue.synchronize()
  al._free(b, 256)
  prg(a, b, vals=(1, 4))
  with pytest.raises(MockGPUError, match=f"unmapped address 0x{b:x}"): gpu.queue.synchronize()

# ***** the mock's memory and its refusals

def test_mock_memory_gathers_and_scatters_across_regions():
  m = MockGPUMemory()
  a, b = Region(0x10000, 4096, True, 1), Region(0x30000, 8192, True, 2)
  for r in (a, b): m.add(r); r.mapped = True
  addrs = np.array([0x10000, 0x30010, 0x10ffc, 0x31ff0], np.uint64)
  m.store(addrs, np.arange(16, dtype=np.uint8).reshape(4, 4))
  np.testing.assert_array_equal(m.load(addrs[::-1], 4), np.arange(16, dtype=np.uint8).reshape(4, 4)[::-1])
  with pytest.raises(GPUMemoryFault, match="0x10ffd"): m.load(np.array([0x10ffd], np.uint64), 4)   # crosses the end
  with pytest.raises(GPUMemoryFault, match="0x20000"): m.load(np.array([0x10000, 0x20000], np.uint64), 1)
  with pytest.raises(GPUMemoryFault, match="0xfff"): m.store(np.array([0xfff], np.uint64), np.zeros((1, 1), np.uint8))
  with pytest.raises(ValueError, match="overlaps"): m.add(Region(0x30000 + 4096, 4096, True, 3))

def test_mock_refuses_what_kfd_refuses(gpu):
  m, kfd = gpu.mock, gpu.kfd
  gid = gpu.node["gpu_id"]
  loose = m.mmap(0, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
  with pytest.raises(KFDError, match="not in an address range this process reserved"):
    m.ioctl(kfd, kio.ALLOC_MEMORY_OF_GPU, kio.AllocMemory(va_addr=0x1000, size=4096, gpu_id=gid, flags=kio.MEM_VRAM))
  with pytest.raises(KFDError, match="flags"):
    m.ioctl(kfd, kio.ALLOC_MEMORY_OF_GPU, kio.AllocMemory(va_addr=loose, size=4096, gpu_id=gid, flags=kio.MEM_VRAM | kio.MEM_GTT))
  with pytest.raises(KFDError, match="no GPU with id"):
    m.ioctl(kfd, kio.ALLOC_MEMORY_OF_GPU, kio.AllocMemory(va_addr=loose, size=4096, gpu_id=gid + 99, flags=kio.MEM_VRAM))
  with pytest.raises(KFDError, match="request encodes"): m.ioctl(kfd, kio.ALLOC_MEMORY_OF_GPU, kio.FreeMemory(handle=1))
  with pytest.raises(KFDError) as e: m.ioctl(kfd, 0xc0084bff, kio.GetVersion())
  assert e.value.errno == errno.ENOTTY
  with pytest.raises(KFDError, match="still holds"): m.munmap(gpu.staging.va, gpu.staging.size)
  with pytest.raises(KFDError, match="no host-mappable"): m.mmap(loose, 4096, 3, 0x11, gpu.drm, 12345 << 32)
  with pytest.raises(FileNotFoundError): m.open("/dev/dri/renderD200")
  with pytest.raises(KFDError, match="already set"):   # one event page per process
    m.ioctl(kfd, kio.CREATE_EVENT, kio.CreateEvent(event_page_offset=gpu.staging.handle, event_type=kio.EVENT_SIGNAL))
  m.munmap(loose, 8192)

def test_vram_is_not_host_mapped(gpu):
  with pytest.raises(ValueError, match="large BAR"): gpu.mem.alloc(4096, vram=True, cpu=True)

# ***** through Device and Tensor

@pytest.fixture
def mockenv(registry, monkeypatch):
  from tinycore.device import Device
  from tinycore_amd.mockgpu import driver
  monkeypatch.setenv("MOCKGPU", "1")
  fake = Fake()
  monkeypatch.setattr(driver.shared_mock().cp, "dispatch", fake)
  yield fake
  Device.reset()

@pytest.mark.needs_device
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_device_opens_on_the_mock_and_copies(mockenv, arch):
  from tinycore import Tensor
  from tinycore.device import Device
  d = Device[f"KFD+AMD::{arch}"]
  assert type(d).__name__ == "KFDDevice" and d.gpu.arch == arch and d.renderer.arch == arch
  x = np.linspace(-1, 1, 77, dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x, device=f"KFD+AMD::{arch}").numpy(), x)
  assert {a for _, a, *_ in mockenv.log} == {arch}

@pytest.mark.needs_device
def test_bare_amd_opens_kfd_under_the_mock(mockenv):
  from tinycore.device import Device
  from tinycore_amd.plugin import HIP, KFD
  assert KFD().default and not HIP().default
  assert type(Device["AMD"]).__name__ == "KFDDevice" and Device["AMD"].spec.iface == "KFD"

def test_without_mock_or_driver_it_says_why(registry, monkeypatch):
  from tinycore.device import Device, DeviceUnavailable
  monkeypatch.delenv("MOCKGPU", raising=False)
  if os.path.exists("/dev/kfd"): pytest.skip("this machine has /dev/kfd")
  with pytest.raises(DeviceUnavailable, match="no /dev/kfd.*MOCKGPU=1"): Device["KFD+AMD"]

# ***** coverage bookkeeping

def test_opcode_names_normalize_encodings_and_dual_issue():
  from tinycore_amd.mockgpu.disasm import normalize
  assert normalize("V_ADD_F32_E64") == ["v_add_f32"] and normalize("v_cndmask_b32_e32") == ["v_cndmask_b32"]
  assert normalize("v_dual_add_f32::v_dual_mov_b32") == ["v_dual_add_f32", "v_dual_mov_b32"]

@pytest.mark.needs_device
def test_coverage_is_written_per_process(gpu, tmp_path):
  from types import SimpleNamespace
  from tinycore_amd.mockgpu.disasm import objdump
  import json
  al = KFDAllocator(gpu)
  p = al.alloc(64)
  al._copyin(p, memoryview(bytes(range(64))))
  gpu.queue.synchronize()
  cov = gpu.mock.cp.coverage
  cov.add("gfx1100", b"not a code object", SimpleNamespace(instructions=7, opcodes={"S_ENDPGM", "v_dual_mul_f32::v_dual_mov_b32"}), 0.5)
  cov.dump(str(tmp_path))
  (f,) = tmp_path.glob("mockgpu-*.json")
  s = json.loads(f.read_text())
  assert s["dispatches"] == 2 and s["instructions"] == 7
  a = s["archs"]["gfx1100"]
  assert a["code_objects"] == 2 and a["executed"] == ["s_endpgm", "v_dual_mov_b32", "v_dual_mul_f32"]
  if objdump(): assert {"global_load_b128", "global_store_b128", "s_endpgm"} <= set(a["emitted"]) and "s_code_end" not in a["emitted"]

def test_a_dead_drivers_kfd_entry_dies_with_it():
  """KFDGPU keeps one /dev/kfd per syscall layer. Keyed by id(), the entry outlived its driver, and a new mock driver
  allocated at the dead one's address inherited it and was never opened (an ioctl on an fd it never handed out: the
  order-dependent KFD failures of a full test run)."""
  import gc
  gc.collect()   # earlier tests' dead drivers leave first
  from tinycore_amd.kfd import queue
  before, events = len(kfd_device._kfd_fds), len(queue._events)
  m = MockKFD(("gfx1100",), dispatch=Fake())
  g = KFDGPU(m, gpu_nodes(m)[0])
  assert m.fds[g.kfd] == "/dev/kfd" and len(kfd_device._kfd_fds) == before + 1 and len(queue._events) == events + 1
  del m, g
  gc.collect()
  assert len(kfd_device._kfd_fds) == before and len(queue._events) == events   # the process's signal event too

def test_one_syscall_layer_per_process(monkeypatch):
  """The real kernel's syscall layer is one object per process, as the mock's is: the /dev/kfd fd and the signal event
  are kept per layer, so a new layer for each GPU opened would open /dev/kfd again and ask KFD for a second event page
  (EINVAL on a real machine: one per process)."""
  from tinycore_amd.kfd.syscalls import LinuxSyscalls
  monkeypatch.delenv("MOCKGPU", raising=False)
  real = kfd_device.syscalls()
  assert isinstance(real, LinuxSyscalls) and kfd_device.syscalls() is real
  monkeypatch.setenv("MOCKGPU", "1")
  assert isinstance(kfd_device.syscalls(), MockKFD) and kfd_device.syscalls() is kfd_device.syscalls()
