"""DEV=AMD's HIP runtime (tinycore_amd/hip.py, device.py) against a fake libamdhip64 (fake_hip/fake_amdhip64.c, built
here with the system C compiler): opening, the arch from the properties struct, copies, the OOM path, errors, and
real code objects launched with their kernarg buffer checked byte for byte. No AMD GPU is needed (or used)."""
import ctypes, os, shutil, struct, subprocess
import numpy as np
import pytest
from tinycore import Tensor, Variable, dtypes
from tinycore.codegen import get_program
from tinycore.device import Buffer, Device, DeviceUnavailable
from tinycore_amd import device as amd_device, hip

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_hip", "fake_amdhip64.c")
CC = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)

@pytest.fixture(scope="session")
def fake_so(tmp_path_factory):
  if CC is None: pytest.skip("no C compiler (cc/gcc/clang) to build the fake libamdhip64")
  so = str(tmp_path_factory.mktemp("fake_hip") / "libamdhip64_fake.so")
  r = subprocess.run([CC, "-shared", "-fPIC", "-O1", "-o", so, SRC], capture_output=True, text=True)
  if r.returncode: pytest.fail(f"building the fake libamdhip64 failed:\n{r.stderr}")
  return so

def _forget():
  hip.libhip.cache_clear(); amd_device._contexts.clear(); Device.reset()

@pytest.fixture
def fake(fake_so, registry, monkeypatch):
  """The fake library, loaded as tinycore-amd's libamdhip64 and reset to one gfx1100 with 4 GiB."""
  monkeypatch.setenv("TINYCORE_LIBAMDHIP64", fake_so)
  _forget()
  lib = ctypes.CDLL(fake_so)   # the same handle hip.py gets: its globals are what the runtime changed
  lib.fake_set_arch(b"gfx1100"); lib.fake_set_devices(1); lib.fake_set_capacity(ctypes.c_size_t(1 << 32)); lib.fake_fail_next_launch(0)
  lib.fake_last_function.restype, lib.fake_used.restype = ctypes.c_char_p, ctypes.c_size_t
  lib.fake_last_kernargs.restype = ctypes.c_size_t
  yield lib
  _forget()

def last_launch(lib):
  g, b, sh = (ctypes.c_uint * 3)(), (ctypes.c_uint * 3)(), ctypes.c_uint()
  lib.fake_last_launch(g, b, ctypes.byref(sh))
  out = ctypes.create_string_buffer(4096)
  n = lib.fake_last_kernargs(out, 4096)
  return tuple(g), tuple(b), sh.value, out.raw[:n]

def test_opens_with_the_arch_from_the_properties(fake):
  d = Device["AMD"]
  assert type(d).__name__ == "HIPDevice" and d.ctx.name == "Fake Radeon" and d.renderer.arch == "gfx1100" and d.renderer.name == "LLVM"
  assert hip.device_count() == 1 and hip.mem_info(0)[1] == 1 << 32
  d.synchronize()
  assert fake.fake_syncs() >= 1

def test_arch_target_features_are_dropped(fake):
  fake.fake_set_arch(b"gfx942:sramecc+:xnack-")
  assert hip.gcn_arch(0) == "gfx942" and Device["AMD"].renderer.arch == "gfx942"

def test_arch_falls_back_to_the_kfd_topology(fake, monkeypatch):
  from tinycore_amd import topology
  fake.fake_set_arch(b"")                # properties without a gcnArchName
  monkeypatch.setattr(topology, "kfd_nodes", lambda: [])
  with pytest.raises(DeviceUnavailable, match="could not tell the arch of Fake Radeon.*DEV=AMD::gfx1100"): Device["AMD"]
  _forget()
  monkeypatch.setattr(topology, "kfd_nodes", lambda: [{"node": 0}, {"node": 1, "gfx": "gfx1030"}])
  assert Device["AMD"].renderer.arch == "gfx1030"

def test_dev_arch_overrides_and_hip_renderer(fake, monkeypatch):
  from tinycore.helpers import DEV
  DEV.value = "AMD:HIP:gfx1201"
  d = Device["AMD"]
  assert d.renderer.name == "HIP" and d.renderer.arch == "gfx1201" and d.ctx.arch == "gfx1100"

def test_copy_round_trip(fake):
  x = np.arange(1000, dtype=np.float32) * 0.5 - 7
  b = Buffer("AMD", x.size, dtypes.float32).copyin(memoryview(x))
  assert fake.fake_last_memcpy_kind() == hip.HTOD
  np.testing.assert_array_equal(b.numpy(), x)
  assert fake.fake_last_memcpy_kind() == hip.DTOH
  v = b.view(10, dtypes.float32, 40)   # sub-buffers are pointer offsets
  np.testing.assert_array_equal(v.numpy(), x[10:20])
  # read-only source
  np.testing.assert_array_equal(Buffer("AMD", 4, dtypes.int32).copyin(memoryview(bytes(range(16)))).numpy().view(np.uint8), np.arange(16))

def test_out_of_memory_is_memoryerror_and_lru_retries(fake):
  alloc = Device["AMD"].allocator
  with pytest.raises(MemoryError, match="out of memory"): alloc.alloc(1 << 40)
  live = fake.fake_live_allocs()       # (earlier tests' buffers may still be alive)
  fake.fake_set_capacity(ctypes.c_size_t(fake.fake_used() + 3000))
  a = alloc.alloc(2000)
  alloc.free(a, 2000)                   # kept in the LRU cache: the fake still counts it as used
  assert fake.fake_live_allocs() == live + 1
  b = alloc.alloc(1500)                 # OOM, the LRU frees its cache, the retry fits
  assert fake.fake_live_allocs() == live + 1 and b and not alloc.cache

def test_hip_error_names_the_call_and_the_error(fake):
  alloc = Device["AMD"].allocator
  with pytest.raises(hip.HIPError, match=r"hipMemcpy\(HtoD\) failed: hipErrorInvalidMemcpyDirection \(21\)"):
    hip.check(hip.libhip().hipMemcpy(alloc.alloc(4), b"abcd", 4, 9), "hipMemcpy(HtoD)")
  with pytest.raises(hip.HIPError, match=r"hipModuleLoadData\(k\) failed: hipErrorInvalidImage \(200\)"):
    hip.check(hip.libhip().hipModuleLoadData(ctypes.byref(ctypes.c_void_p()), b"not an elf"), "hipModuleLoadData(k)")

def test_missing_library_is_unavailable(registry, monkeypatch, tmp_path):
  monkeypatch.setenv("TINYCORE_LIBAMDHIP64", str(tmp_path / "no_such_libamdhip64.so"))
  _forget()
  try:
    with pytest.raises(DeviceUnavailable, match="TINYCORE_LIBAMDHIP64=.*no_such_libamdhip64.so could not be loaded") as e: Device["AMD"]
    assert "not available on this machine" in str(e.value)
    from tinycore_amd.plugin import HIP
    assert HIP().count() == 0 and "no_such_libamdhip64" in HIP().unavailable_reason()
  finally: _forget()

def test_no_gpu_is_unavailable(fake):
  fake.fake_set_devices(0)
  with pytest.raises(DeviceUnavailable, match="sees no AMD GPU"): Device["AMD"]

def test_probe_only_interfaces_explain(fake, monkeypatch):
  monkeypatch.delenv("MOCKGPU", raising=False)
  if not os.path.exists("/dev/kfd"):   # KFD+AMD is a runtime now (kfd/, tested in test_kfd.py): here it says what is missing
    with pytest.raises(DeviceUnavailable, match="no /dev/kfd.*MOCKGPU=1"): Device["KFD+AMD"]
  with pytest.raises(DeviceUnavailable, match="PCI\\+AMD only probes"): Device["PCI+AMD"]
  from tinycore_amd.plugin import HIP
  assert HIP().count() == 1 and HIP().unavailable_reason() is None and HIP().probe()[0]["arch"] == "gfx1100"

# ---- real code objects from the LLVM (and HIP) renderers, launched through the fake
def _ast(mk):
  from tinycore.helpers import DEV
  old, DEV.value = DEV.value, "EMU+AMD"
  try: return mk().schedule()[-1].ast
  finally: DEV.value = old

def _kernel(renderer):
  """A kernel with two buffers and one int variable: out[i] = in[i] + 1 for i < n."""
  v = Variable("n", 1, 64)
  p = get_program(_ast(lambda: Tensor.empty(64, device="EMU+AMD")[:v.bind(5)] + 1), renderer)
  return p, renderer.compiler.compile(p.src)

try: import llvmlite.binding  # noqa: F401
except ImportError: llvmlite = None
@pytest.mark.skipif(llvmlite is None, reason="llvmlite not installed")
def test_launch_packs_kernargs_from_the_metadata(fake):
  from tinycore_amd.codeobject import read
  from tinycore_amd.compiler import find_lld
  if find_lld() is None: pytest.skip("no ld.lld: the code object stays unlinked and HIP could not load it")
  d = Device["AMD"]
  p, lib = _kernel(d.renderer)
  prg, n0, u0 = d.runtime(p.name, lib), fake.fake_launches(), fake.fake_unloads()
  a, b = d.allocator.alloc(256), d.allocator.alloc(256)
  assert prg(a, b, global_size=(5, 1, 1), local_size=(1, 1, 1), vals=(5,)) is None
  grid, block, shared, args = last_launch(fake)
  assert fake.fake_launches() == n0 + 1 and fake.fake_last_function() == p.name.encode()
  assert grid == (5, 1, 1) and block == (1, 1, 1) and shared == 0
  meta = [x for x in read(lib).kernels[p.name].args if not x[".value_kind"].startswith("hidden_")]
  assert [x[".value_kind"] for x in meta] == ["global_buffer", "global_buffer", "by_value"] and len(args) == meta[-1][".offset"] + meta[-1][".size"]
  assert [struct.unpack_from("<Q", args, x[".offset"])[0] for x in meta[:2]] == [a, b]
  assert struct.unpack_from("<i", args, meta[2][".offset"])[0] == 5
  # timed launch: the fake's kernels take 1.25 ms; a wrong argument count is a clear error
  assert prg(a, b, global_size=(2, 3, 4), local_size=(32, 2, 1), vals=(-3,), wait=True) == pytest.approx(1.25e-3)
  grid, block, _, args = last_launch(fake)
  assert grid == (2, 3, 4) and block == (32, 2, 1) and struct.unpack_from("<i", args, meta[2][".offset"])[0] == -3
  with pytest.raises(RuntimeError, match="takes 3 explicit arguments but was given 2 buffers and 0 values"): prg(a, b)
  fake.fake_fail_next_launch(719)
  with pytest.raises(hip.HIPError,
                     match=rf"hipModuleLaunchKernel\({p.name}, grid=\(1, 1, 1\), block=\(1, 1, 1\)\) failed: hipErrorLaunchFailure \(719\)"):
    prg(a, b, vals=(1,))
  del prg
  assert fake.fake_unloads() == u0 + 1

@pytest.mark.skipif(llvmlite is None, reason="llvmlite not installed")
def test_unknown_kernel_name_and_unlinked_object(fake, monkeypatch):
  from tinycore_amd import compiler
  d = Device["AMD"]
  p, lib = _kernel(d.renderer)
  n0 = fake.fake_launches()
  with pytest.raises(RuntimeError, match="no kernel of that name"): d.runtime("not_" + p.name, lib)
  monkeypatch.setattr(compiler, "find_lld", lambda: None)   # as on a machine without ld.lld
  with pytest.raises(RuntimeError, match="not linked .no ld.lld"): d.runtime(p.name, d.renderer.compiler.compile(p.src))
  assert fake.fake_launches() == n0

def test_hidden_args_are_left_to_hip(fake):
  """clang's HIP kernels that read the workgroup size get hidden_* arguments after the explicit ones: not packed."""
  from tinycore_amd.compiler import HIPCompiler, find_clang, find_lld
  if not find_clang("gfx1100") or not find_lld(): pytest.skip("no clang with gfx1100 and ld.lld")
  from tinycore_amd.codeobject import read
  lib = HIPCompiler("gfx1100").compile('extern "C" __attribute__((global)) void k(float* a, int n, int m) { a[n] = m * '
                                       '__builtin_amdgcn_workgroup_size_x(); }')
  kinds = [x[".value_kind"] for x in read(lib).kernels["k"].args]
  assert kinds[:3] == ["global_buffer", "by_value", "by_value"] and any(k.startswith("hidden_") for k in kinds[3:])
  prg = Device["AMD"].runtime("k", lib)
  assert prg.kernarg_size == 16
  prg(0x1122334455667788, vals=(7, -1), global_size=(3, 1, 1), local_size=(64, 1, 1))
  assert last_launch(fake)[3] == struct.pack("<Qii", 0x1122334455667788, 7, -1)
