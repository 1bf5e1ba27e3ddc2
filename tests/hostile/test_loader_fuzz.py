"""Fuzzing the loaders (issue 18): hypothesis mutates valid files (byte flips, truncation, inserted and deleted bytes,
integer fields set to edge values, header fields replaced) and each loader must either load data that matches the
mutated file or raise its documented error (CorruptFileError for files, a dropped-and-redone entry for caches) —
never another exception type, a hang or a segfault.

The hypothesis tests run in a child pytest (`-X faulthandler`), started by the `test_fuzz[...]` drivers below, so a
segfault is reported as that driver's failure with the child's traceback instead of killing the whole run.
TINYCORE_FUZZ_EXAMPLES sets the examples per target (default 40; CI-sized); `-m slow` runs a 10x longer pass."""
import io, json, os, struct, subprocess, sys, warnings, zipfile
import numpy as np
import pytest

CHILD = os.getenv("TINYCORE_FUZZ_CHILD") == "1"
EXAMPLES = int(os.getenv("TINYCORE_FUZZ_EXAMPLES", "40"))
TARGETS = ["safetensors", "gguf", "torch", "compile_cache", "beam_cache"]
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

def _drive(target: str, examples: int, tmp_path):
  pytest.importorskip("hypothesis")
  # a private cache directory: the kernels the BEAM target compiles stay out of the user's cache
  env = {**os.environ, "TINYCORE_FUZZ_CHILD": "1", "TINYCORE_FUZZ_EXAMPLES": str(examples), "CACHEDB": str(tmp_path)}
  cmd = [sys.executable, "-X", "faulthandler", "-m", "pytest", "-q", "-x", "-p", "no:randomly", os.path.join(HERE, "test_loader_fuzz.py"),
         "-k", f"fuzz_{target}"]
  r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=1800)
  out = r.stdout[-6000:] + r.stderr[-6000:]
  assert r.returncode >= 0, f"fuzzing {target} crashed the process (signal {-r.returncode}):\n{out}"
  assert r.returncode == 0 and " passed" in r.stdout and "skipped" not in r.stdout, f"fuzzing {target} failed:\n{out}"

@pytest.mark.skipif(CHILD, reason="the child runs the fuzz targets themselves")
@pytest.mark.parametrize("target", TARGETS)
def test_fuzz(target, tmp_path):
  if target == "beam_cache" and not _has_device(): pytest.skip("BEAM fuzzing compiles and runs kernels: needs a device plugin")
  _drive(target, EXAMPLES, tmp_path)

@pytest.mark.slow
@pytest.mark.skipif(CHILD, reason="the child runs the fuzz targets themselves")
@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_long(target, tmp_path):
  if target == "beam_cache" and not _has_device(): pytest.skip("BEAM fuzzing compiles and runs kernels: needs a device plugin")
  _drive(target, EXAMPLES * 10, tmp_path)

def _has_device() -> bool:
  try:
    from tinycore import Device
    Device[Device.DEFAULT]
    return True
  except Exception: return False

# ---- the fuzz targets (collected only in the child)
if CHILD:
  from hypothesis import given, settings, strategies as st, HealthCheck, event
  from tinycore import Tensor
  from tinycore.nn.state import safe_load, gguf_load, torch_load, CorruptFileError
  import _hostile_files as H

  SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=os.getenv("TINYCORE_FUZZ_RANDOM") != "1",
                      suppress_health_check=list(HealthCheck))
  EDGE_INTS = [0, 1, 2, 3, 7, 8, 31, 32, 255, 256, 1 << 15, (1 << 16) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, 1 << 40, 1 << 62, (1 << 63) - 1, 1 << 63,
               (1 << 64) - 1]

  def mutation(header_len: int):
    # aimed at the header, anywhere, or the last 64 bytes (tensor data: the load must then return the changed values)
    pos = st.one_of(st.integers(0, max(header_len - 1, 0)), st.integers(0, 1 << 20), st.integers(-64, -1))
    return st.one_of(
      st.tuples(st.just("flip"), pos, st.integers(0, 255)),
      st.tuples(st.just("truncate"), pos),
      st.tuples(st.just("insert"), pos, st.binary(min_size=1, max_size=16)),
      st.tuples(st.just("delete"), pos, st.integers(1, 16)),
      st.tuples(st.just("int"), pos, st.sampled_from(EDGE_INTS), st.sampled_from([1, 2, 4, 8])))   # a count/length/offset field

  def apply_mutations(data: bytes, muts) -> bytes:
    b = bytearray(data)
    for m in muts:
      if not b: break
      i = m[1] % len(b)
      if m[0] == "flip": b[i] = m[2]
      elif m[0] == "truncate": del b[i:]
      elif m[0] == "insert": b[i:i] = m[2]
      elif m[0] == "delete": del b[i:i + m[2]]
      else: b[i:i + m[3]] = (m[2] % (1 << (8 * m[3]))).to_bytes(m[3], "little")
    return bytes(b)

  # -- safetensors: byte mutations and header field replacements; a load must return exactly the bytes its header names
  VALID_ST, _ = H.valid_safetensors()
  ST_HDR = 8 + struct.unpack_from("<Q", VALID_ST)[0]
  JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.sampled_from(EDGE_INTS + [-1, -(1 << 63)]), st.floats(allow_nan=False),
                                       st.sampled_from(["F32", "F16", "BOOL", "I16", "U64", "F8_E4M3", "Q4_0", "", "f32"])),
                             lambda c: st.lists(c, max_size=4), max_leaves=8)

  def check_safetensors(data: bytes):
    try: sd = safe_load(data)
    except CorruptFileError: return event("refused")
    event("loaded")
    n = struct.unpack_from("<Q", data)[0]
    header, start = json.loads(data[8:8 + n]), 8 + n
    for k, t in sd.items():
      info = header[k]
      raw = data[start + info["data_offsets"][0]:start + info["data_offsets"][1]]
      assert tuple(t.shape) == tuple(info["shape"]), (k, t.shape, info)
      got = t.numpy()
      if info["dtype"] == "BOOL": assert np.array_equal(got.reshape(-1).view(np.uint8) != 0, np.frombuffer(raw, np.uint8) != 0), k
      elif got.dtype.itemsize == H_ITEMSIZE.get(info["dtype"], -1): assert got.tobytes() == raw, k
  H_ITEMSIZE = {"F32": 4, "F16": 2, "I16": 2, "U8": 1, "I8": 1, "I32": 4, "I64": 8, "U16": 2, "U32": 4, "U64": 8, "F64": 8}

  @SETTINGS
  @given(st.lists(mutation(ST_HDR), min_size=1, max_size=4))
  def test_fuzz_safetensors_bytes(muts): check_safetensors(apply_mutations(VALID_ST, muts))

  @SETTINGS
  @given(st.sampled_from(["w", "b", "m", "h", "new"]), st.sampled_from(["dtype", "shape", "data_offsets", "extra"]), JSON_VALUES)
  def test_fuzz_safetensors_header(name, field, value):
    n = struct.unpack_from("<Q", VALID_ST)[0]
    header = json.loads(VALID_ST[8:8 + n])
    header.setdefault(name, {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})[field] = value
    check_safetensors(H.safetensors_bytes(header, VALID_ST[8 + n:]))

  # -- GGUF: a load must agree with the gguf reference reader wherever that reader accepts the file too
  import tempfile
  _tmp = tempfile.mkdtemp()
  H.valid_gguf(os.path.join(_tmp, "v.gguf"))
  VALID_GGUF = open(os.path.join(_tmp, "v.gguf"), "rb").read()

  def reference_gguf(data: bytes):
    try:
      import gguf
      from gguf import quants
    except ImportError: return None
    p = os.path.join(_tmp, "m.gguf")
    open(p, "wb").write(data)
    try:
      r = gguf.GGUFReader(p)
      return {t.name: (np.asarray(quants.dequantize(t.data, t.tensor_type)), tuple(int(d) for d in t.shape)) for t in r.tensors}
    except Exception: return None   # the reference refuses the file (or crashes): nothing to compare against

  @SETTINGS
  @given(st.lists(mutation(VALID_GGUF.index(b"\0" * 16) if b"\0" * 16 in VALID_GGUF else 400), min_size=1, max_size=4))
  def test_fuzz_gguf(muts):
    data = apply_mutations(VALID_GGUF, muts)
    try: kv, ts = gguf_load(data)
    except CorruptFileError: return event("refused")
    event("loaded")
    for k, t in ts.items(): assert int(np.prod(t.shape)) == t.numpy().size
    if (ref := reference_gguf(data)) is None: return
    event("compared with the gguf reader")
    for k, t in ts.items():
      if k not in ref: continue
      want = ref[k][0].astype(np.float32).reshape(-1)
      got = t.numpy().astype(np.float32).reshape(-1)
      assert got.shape == want.shape and np.allclose(got, want, equal_nan=True, rtol=1e-6, atol=0), k

  # -- torch .pth: raw zip bytes, and the pickle / storages mutated then re-zipped (so the CRC doesn't hide them)
  VALID_PTH, PTH_ARRAYS = H.valid_pth()
  with zipfile.ZipFile(io.BytesIO(VALID_PTH)) as z: PTH_MEMBERS = {n: z.read(n) for n in z.namelist()}

  def rezip(members: dict) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
      for n, b in members.items(): z.writestr(n, b)
    return out.getvalue()

  def reference_torch(data: bytes):
    try: import torch
    except ImportError: return None
    try: return torch.load(io.BytesIO(data), weights_only=True)
    except Exception: return None

  def check_pth(data: bytes):
    try: sd = torch_load(data)
    except CorruptFileError: return event("refused")
    event("loaded")
    def walk(x):
      if isinstance(x, Tensor): x.numpy(); return
      if isinstance(x, dict): [walk(v) for v in x.values()]
      elif isinstance(x, (list, tuple)): [walk(v) for v in x]
      else: assert isinstance(x, (str, bytes, int, float, bool, type(None))), type(x)
    walk(sd)
    ref = reference_torch(data)
    if isinstance(ref, dict) and isinstance(sd, dict):
      for k, v in sd.items():
        r = ref.get(k)
        if isinstance(v, Tensor) and type(r).__name__ in ("Tensor", "Parameter") and str(r.dtype) != "torch.bfloat16":
          np.testing.assert_array_equal(v.numpy(), r.numpy(), err_msg=k)
          event("compared with torch.load")

  @SETTINGS
  @given(st.lists(mutation(200), min_size=1, max_size=4))
  def test_fuzz_torch_zip(muts): check_pth(apply_mutations(VALID_PTH, muts))

  @SETTINGS
  @given(st.sampled_from(sorted(PTH_MEMBERS)), st.lists(mutation(64), min_size=1, max_size=4))
  def test_fuzz_torch_members(member, muts):
    check_pth(rezip({**PTH_MEMBERS, member: apply_mutations(PTH_MEMBERS[member], muts)}))

  # -- the compile cache: any mutated entry gives back the right binary (recompiled), never an exception
  from tinycore import Context
  from tinycore.compiler import Compiler

  class Rev(Compiler):
    def compile(self, src: str) -> bytes: return b"REV:" + src[::-1].encode()
  def load_rev(lib: bytes) -> str:
    if not lib.startswith(b"REV:"): raise OSError("not a REV binary")
    return lib[4:].decode("utf-8")[::-1]

  @SETTINGS
  @given(st.lists(mutation(80), min_size=1, max_size=4))
  def test_fuzz_compile_cache(muts):
    d = tempfile.mkdtemp()
    with Context(CACHEDB=d), warnings.catch_warnings():
      warnings.simplefilter("ignore")
      c = Rev("rev-fuzz")
      assert c.load_cached("kernel src", load_rev) == "kernel src"
      p = c.cache_path("kernel src")
      open(p, "wb").write(apply_mutations(open(p, "rb").read(), muts))
      assert Rev("rev-fuzz").load_cached("kernel src", load_rev) == "kernel src"
      assert Rev("rev-fuzz").compile_cached("kernel src") == b"REV:crs lenrek"

  # -- the BEAM cache: a mutated entry is dropped with a warning, or it is valid and the kernel computes the right answer
  def _beam_setup():
    from tinycore import Device
    from tinycore.codegen import lower_kernel
    from tinycore.rewrite import graph_rewrite
    from tinycore.symbolic import symbolic
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 48)).astype(np.float32), rng.standard_normal((48, 64)).astype(np.float32)
    si = (Tensor(a) @ Tensor(b)).schedule()[-1]
    return a, b, si, Device[si.bufs[0].device], graph_rewrite(lower_kernel(si.ast), symbolic)

  def _valid_actions():
    from tinycore.codegen.search import next_actions
    from tinycore.codegen import opt as O
    _, _, _, dev, k0 = BEAM
    first = next_actions(k0, dev.renderer, ())
    return [json.loads(json.dumps(a)) for a in first + [b for a in first[:4] for b in next_actions(O.apply_opts(k0, (a,)), dev.renderer, (a,))]]

  def perturbed_action(valid: list, how: str, x: int):
    a = json.loads(json.dumps(valid))
    if how == "amount": a[2] = x if a[0] != "SWAP" else a[2]
    elif how == "axis": a[1] = [a[1][0], x % 4] if isinstance(a[1], list) else a[1]
    elif how == "kind": a[0] = ["VEC", "UPCAST", "UPCAST_R", "VEC_R", "SWAP"][x % 5]
    return a

  BEAM_SETTINGS = settings(SETTINGS, max_examples=max(EXAMPLES // 2, 5))   # each used entry compiles a kernel

  @BEAM_SETTINGS
  @given(st.data())
  def test_fuzz_beam_cache_actions(data):
    """Chains of real actions, some with a changed amount, axis or kind: each is either refused or computes right."""
    valid = _valid_actions()
    acts = data.draw(st.lists(st.tuples(st.sampled_from(valid), st.sampled_from(["keep", "keep", "amount", "axis", "kind"]),
                                        st.sampled_from([2, 3, 4, 5, 7, 8, 16, 32, 64, 0, -2, 1 << 40])), min_size=1, max_size=3))
    _beam_check([perturbed_action(v, how, x) for v, how, x in acts], [])

  OPT_VALUES = st.one_of(st.sampled_from(["VEC", "UPCAST", "UPCAST_R", "VEC_R", "SWAP", "NOPE", ""]),
                         st.lists(st.one_of(st.sampled_from(["g", "r", "u"]), st.integers(-2, 4)), max_size=4), st.sampled_from(EDGE_INTS + [-4, 0]))

  @BEAM_SETTINGS
  @given(st.lists(st.lists(OPT_VALUES, min_size=0, max_size=4), max_size=3), st.lists(mutation(40), max_size=2))
  def test_fuzz_beam_cache(opts, muts): _beam_check(opts, muts)

  def _beam_check(opts, muts):
    from tinycore.codegen import get_program
    from tinycore.codegen.search import _cached_opts
    a, b, si, dev, k0 = BEAM
    d = tempfile.mkdtemp()
    p = os.path.join(d, "entry.json")
    open(p, "wb").write(apply_mutations(json.dumps(opts).encode(), muts) if muts else json.dumps(opts).encode())
    with warnings.catch_warnings(record=True) as w:
      warnings.simplefilter("always")
      got = _cached_opts(p, k0)
    event("dropped" if got is None else "used")
    if got is None:
      assert any("dropping invalid entry" in str(x.message) for x in w) and not os.path.exists(p)
      return
    prg_spec = get_program(si.ast, dev.renderer, opts=got)
    prg = dev.compiler.load_cached(prg_spec.src, lambda lib: dev.runtime(prg_spec.name, lib))
    for buf in si.bufs: buf.ensure_allocated()
    prg(*[buf._buf for buf in si.bufs], global_size=prg_spec.global_size, local_size=prg_spec.local_size, vals=(), wait=True)
    np.testing.assert_allclose(si.bufs[0].numpy().reshape(32, 64), a @ b, atol=1e-4, rtol=1e-4, err_msg=str(got))

  BEAM = _beam_setup() if _has_device() else None
