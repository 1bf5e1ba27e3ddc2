"""Files users load (issue 18): every size, offset, stride, dtype and count in a safetensors, GGUF or torch file is
checked against the file before memory is touched, with checks that survive `python -O`; a bad file is a
CorruptFileError (a ValueError) naming the file and the field, never a segfault, a wrong answer or a deep exception."""
import os, struct, subprocess, sys, textwrap, threading
from collections import OrderedDict
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.nn.state import safe_load, safe_save, torch_load, gguf_load, CorruptFileError, UnsupportedFileError
import _hostile_files as H

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def run_py(code: str, *flags: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, *flags, "-X", "faulthandler", "-c", textwrap.dedent(code)], capture_output=True, text=True,
                        timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})

# ---- safetensors
F32_2x2 = np.arange(4, dtype=np.float32).tobytes()

@pytest.mark.parametrize("entry, match", [
  ({"dtype": "F32", "shape": [-2, -1], "data_offsets": [0, 8]}, r"shape \[-2, -1\]"),        # used to load and sum to 0.0
  ({"dtype": "F32", "shape": [2, 2.5], "data_offsets": [0, 16]}, "shape"),
  ({"dtype": "F32", "shape": [True, 4], "data_offsets": [0, 16]}, "shape"),
  ({"dtype": "F32", "shape": "22", "data_offsets": [0, 16]}, "shape"),
  ({"dtype": "F7", "shape": [2, 2], "data_offsets": [0, 16]}, "dtype 'F7'"),
  ({"dtype": ["F32"], "shape": [2, 2], "data_offsets": [0, 16]}, "dtype"),
  ({"shape": [2, 2], "data_offsets": [0, 16]}, "dtype None"),
  ({"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 1 << 40]}, "run past the data"),
  ({"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 0]}, "end before they begin"),
  ({"dtype": "F32", "shape": [2, 2], "data_offsets": [-16, 0]}, "data_offsets"),
  ({"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}, "needs 16"),
  ({"dtype": "F32", "shape": [2, 2], "data_offsets": [0.0, 16.0]}, "data_offsets"),
  ({"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8, 16]}, "data_offsets"),
  ({"dtype": "F32", "shape": [1 << 62, 1 << 62], "data_offsets": [0, 16]}, "needs"),
  ([1, 2, 3], "not an object"),
])
def test_safetensors_bad_entry(tmp_path, entry, match):
  p = tmp_path / "bad.safetensors"
  p.write_bytes(H.safetensors_bytes({"t": entry}, F32_2x2))
  with pytest.raises(CorruptFileError, match=match) as e: safe_load(p)
  assert "bad.safetensors" in str(e.value) and "'t'" in str(e.value)

def test_safetensors_overlapping_tensors(tmp_path):
  hdr = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
  with pytest.raises(CorruptFileError, match=r"'a'.*'b'.*share bytes"): safe_load(H.safetensors_bytes(hdr, F32_2x2))
  # touching, not overlapping, is fine; so are empty tensors anywhere
  hdr = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
         "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]}}
  sd = safe_load(H.safetensors_bytes(hdr, F32_2x2))
  np.testing.assert_array_equal(sd["b"].numpy(), [2, 3]) and sd["e"].shape == (0, 3)

def test_safetensors_deep_json_header():
  deep = b"[" * 100_000 + b"]" * 100_000   # json.loads -> RecursionError before
  with pytest.raises(CorruptFileError, match="nests too deeply"): safe_load(struct.pack("<Q", len(deep)) + deep)
  deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
  with pytest.raises(CorruptFileError): safe_load(struct.pack("<Q", len(deep)) + deep)

def test_safetensors_huge_json_number():
  hdr = b'{"t":{"dtype":"F32","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,4]}}'   # int() refuses over 4300 digits
  with pytest.raises(CorruptFileError, match="not valid JSON"): safe_load(struct.pack("<Q", len(hdr)) + hdr + bytes(4))

def test_safetensors_header_length_and_metadata():
  with pytest.raises(CorruptFileError, match="header length"): safe_load(struct.pack("<Q", (1 << 64) - 1) + b"{}")
  with pytest.raises(CorruptFileError, match="__metadata__"): safe_load(H.safetensors_bytes({"__metadata__": [1]}, b""))
  assert safe_load(H.safetensors_bytes({"__metadata__": {"format": "pt"}}, b"")) == {}

def test_safetensors_valid_file_still_loads():
  data, want = H.valid_safetensors()
  sd = safe_load(data)
  for k, v in want.items(): np.testing.assert_array_equal(sd[k].numpy(), v)

def test_tensor_from_bytes_checks_sizes_under_python_O():
  """The size check used to be an assert: with -O it vanished and copyin read past the source (segfault)."""
  r = run_py("""
    from tinycore.nn.state import tensor_from_bytes
    from tinycore import dtypes
    for data, shape in ((b"\\0" * 4, (1 << 20,)), (b"\\0" * 16, (-1, -4)), (b"\\0" * 16, (2, 2.0))):
      try: tensor_from_bytes(data, dtypes.float32, shape); print("LOADED", shape)
      except ValueError as e: print("ValueError:", e)
    print(tensor_from_bytes(b"\\0\\0\\x80?" * 4, dtypes.float32, (2, 2)).numpy().sum())
  """, "-O")
  assert r.returncode == 0, r.stderr
  assert r.stdout.count("ValueError:") == 3 and "LOADED" not in r.stdout and r.stdout.strip().endswith("4.0"), r.stdout

def test_buffer_copy_sizes_checked_under_python_O():
  """Buffer.copyin/copyout/view guarded raw memcpys with asserts: gone under -O, a short source read past its end."""
  r = run_py("""
    from tinycore.device import Buffer, Device
    from tinycore import dtypes
    b = Buffer(Device.DEFAULT, 1 << 16, dtypes.float32).allocate()
    for f in (lambda: b.copyin(memoryview(bytearray(4))), lambda: b.copyout(memoryview(bytearray(4))), lambda: b.view(1 << 17, dtypes.float32, 0)):
      try: f(); print("COPIED")
      except ValueError as e: print("ValueError:", e)
  """, "-O")
  assert r.returncode == 0 and r.stdout.count("ValueError:") == 3 and "COPIED" not in r.stdout, (r.stdout, r.stderr)

def test_safetensors_fifo_does_not_hang(tmp_path):
  fifo = tmp_path / "model.safetensors"
  os.mkfifo(fifo)
  box = {}
  th = threading.Thread(target=lambda: box.setdefault("e", pytest.raises(CorruptFileError, safe_load, fifo)), daemon=True)
  th.start(); th.join(20)
  assert not th.is_alive(), "safe_load on a FIFO hung"
  assert "not a regular file" in str(box["e"].value)

# ---- safe_save: atomic
def test_safe_save_failing_midway_keeps_the_old_checkpoint(tmp_path):
  """RLIMIT_FSIZE stops the write part-way (like a full disk): the previous checkpoint must survive whole."""
  p = tmp_path / "ckpt.safetensors"
  safe_save({"w": Tensor(np.arange(16, dtype=np.float32))}, p)
  before = p.read_bytes()
  r = run_py(f"""
    import resource, signal
    import numpy as np
    from tinycore import Tensor
    from tinycore.nn.state import safe_save
    big = Tensor(np.ones(1 << 20, np.float32))   # 4 MB: over the limit set below
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails with EFBIG instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    try: safe_save({{"w": big}}, {str(p)!r}); print("SAVED")
    except OSError as e: print("OSError", e.errno)
  """)
  assert r.returncode == 0, r.stderr
  assert "OSError" in r.stdout and "SAVED" not in r.stdout, r.stdout
  assert p.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.safetensors"]   # old file intact, no temp file left
  np.testing.assert_array_equal(safe_load(p)["w"].numpy(), np.arange(16, dtype=np.float32))

def test_safe_save_replaces_and_keeps_mode(tmp_path):
  p = tmp_path / "c.safetensors"
  safe_save({"a": Tensor([1.0])}, p)
  os.chmod(p, 0o600)
  safe_save({"a": Tensor([2.0, 3.0])}, p)
  assert (os.stat(p).st_mode & 0o777) == 0o600 and safe_load(p)["a"].numpy().tolist() == [2.0, 3.0]

# ---- GGUF
def _gguf_header(kv: list[tuple[str, int, bytes]], n_tensors: int = 0, tensors: bytes = b"") -> bytes:
  body = b"".join(struct.pack("<Q", len(k)) + k.encode() + struct.pack("<I", t) + v for k, t, v in kv)
  return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kv)) + body + tensors

def _u32(x): return struct.pack("<I", x)
def _tensor_info(name: str, dims: list[int], ttype: int, off: int) -> bytes:
  return (struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
          + struct.pack("<IQ", ttype, off))

@pytest.mark.parametrize("align", [0, 3, 1 << 40])
def test_gguf_bad_alignment(align):
  """general.alignment = 0 was a ZeroDivisionError."""
  f = _gguf_header([("general.alignment", 10, struct.pack("<Q", align))], 1, _tensor_info("t", [4], 0, 0)) + b"\0" * 64
  with pytest.raises(CorruptFileError, match="general.alignment"): gguf_load(f)

def test_gguf_alignment_of_wrong_type():
  f = _gguf_header([("general.alignment", 8, struct.pack("<Q", 2) + b"32")])
  with pytest.raises(CorruptFileError, match="general.alignment"): gguf_load(f)

@pytest.mark.parametrize("kv, what", [
  ([("k", 9, _u32(10) + struct.pack("<Q", 1 << 60))], "length"),           # numeric array of 2^60 items
  ([("k", 9, _u32(8) + struct.pack("<Q", 1 << 62))], "length"),            # string array: each item >= 8 bytes
  ([("k", 9, _u32(9) + struct.pack("<Q", 1 << 40))], "length"),            # array of arrays
  ([("k", 8, struct.pack("<Q", 1 << 62))], "length"),                      # one huge string
  ([("k", 9, _u32(77) + struct.pack("<Q", 1))], "unknown GGUF value type 77"),
  ([("k", 33, b"")], "unknown GGUF value type 33"),
])
def test_gguf_huge_counts_fail_before_allocating(kv, what):
  import tracemalloc
  tracemalloc.start()
  try:
    with pytest.raises(CorruptFileError, match=what): gguf_load(_gguf_header(kv) + b"\0" * 64)
    assert tracemalloc.get_traced_memory()[1] < 64 << 20   # no multi-GB list or bytes built first
  finally: tracemalloc.stop()

def test_gguf_huge_tensor_and_kv_counts():
  hdr = b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 0)
  with pytest.raises(CorruptFileError, match="tensor count"): gguf_load(hdr + b"\0" * 64)
  hdr = b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 62)
  with pytest.raises(CorruptFileError, match="metadata count"): gguf_load(hdr + b"\0" * 64)

def test_gguf_deeply_nested_arrays():
  v = b"".join(_u32(9) + struct.pack("<Q", 1) for _ in range(10_000)) + _u32(4) + struct.pack("<Q", 0)
  with pytest.raises(CorruptFileError, match="nests arrays"): gguf_load(_gguf_header([("k", 9, v)]) + b"\0" * 32)

def test_gguf_tensor_fields():
  pad = b"\0" * 256
  with pytest.raises(UnsupportedFileError, match="ggml type 99") as e: gguf_load(_gguf_header([], 1, _tensor_info("t", [4], 99, 0)) + pad)
  assert isinstance(e.value, NotImplementedError) and isinstance(e.value, ValueError)
  with pytest.raises(CorruptFileError, match="rows of 48"):
    gguf_load(_gguf_header([], 1, _tensor_info("q", [48, 2], 8, 0)) + pad)   # Q8_0 rows of 1.5 blocks
  with pytest.raises(CorruptFileError, match="runs past the end"): gguf_load(_gguf_header([], 1, _tensor_info("t", [1 << 40, 1 << 40], 0, 0)) + pad)
  with pytest.raises(CorruptFileError, match="runs past the end"): gguf_load(_gguf_header([], 1, _tensor_info("t", [4], 0, (1 << 64) - 8)) + pad)
  with pytest.raises(CorruptFileError, match="dimensions"): gguf_load(_gguf_header([], 1, _tensor_info("t", [1] * 9, 0, 0)) + pad)
  with pytest.raises(CorruptFileError, match="not UTF-8"):
    gguf_load(_gguf_header([], 1, _tensor_info("t", [4], 0, 0).replace(b"t", b"\xff", 1)) + pad)

def test_gguf_valid_file_still_loads(tmp_path):
  want = H.valid_gguf(str(tmp_path / "m.gguf"))
  kv, ts = gguf_load(tmp_path / "m.gguf")
  assert kv["some.strs"] == ["a", "bc"] and kv["general.alignment"] == 32
  np.testing.assert_array_equal(ts["f32"].numpy(), want["f32"])
  np.testing.assert_allclose(ts["q8"].numpy(), want["q8"], atol=np.abs(want["q8"]).max() / 100)

# ---- LLM metadata (tokenizer ids, hyperparameters, weight shapes)
def _tiny_model(tmp_path, **kv_changes) -> str:
  """A tiny llama GGUF with some metadata replaced (None deletes the key)."""
  from tinycore.llm.testmodel import tiny_llama
  from tinycore.llm.gguf_write import gguf_write
  src, dst = str(tmp_path / "ok.gguf"), str(tmp_path / "bad.gguf")
  tiny_llama(src, dim=16, n_layers=1, n_heads=2, n_kv_heads=1, hidden=32)
  kv, ts = gguf_load(src)
  for k, v in kv_changes.items():
    if v is None: kv.pop(k.replace("__", "."))
    else: kv[k.replace("__", ".")] = v
  gguf_write(dst, kv, {k: (t.numpy(), "F32") for k, t in ts.items()})
  return dst

@pytest.mark.parametrize("change, match", [
  ({"tokenizer__ggml__bos_token_id": 10_000}, "bos_token_id is 10000"),     # was an IndexError in chat_tokens
  ({"tokenizer__ggml__eos_token_id": -1}, "eos_token_id"),
  ({"llama__attention__head_count": 0}, "head_count is 0"),                  # was a ZeroDivisionError
  ({"llama__attention__head_count_kv": 3}, "doesn't divide"),
  ({"llama__embedding_length": 24}, "shape"),                                # weights don't match the metadata
  ({"llama__block_count": 2}, "missing"),
  ({"llama__rope__freq_base": -1.0}, "freq_base"),
  ({"tokenizer__ggml__scores": [0.0]}, "scores"),
  ({"tokenizer__chat_template": 5}, "chat_template"),
])
def test_llm_metadata_checked_at_load(tmp_path, change, match):
  from tinycore.llm.weights import load_gguf_raw
  p = _tiny_model(tmp_path, **change)
  with pytest.raises(CorruptFileError, match=match) as e: load_gguf_raw(p)
  assert "bad.gguf" in str(e.value)

def test_llm_bos_out_of_vocab_through_the_runner(tmp_path):
  from tinycore.llm.generate import LLM
  with pytest.raises(CorruptFileError, match="bos_token_id"):
    LLM(_tiny_model(tmp_path, tokenizer__ggml__bos_token_id=1 << 20), max_context=16, chunk=4)

# ---- torch checkpoints
def _pth(size, stride, offset=0, numel=6, dtype="FloatStorage") -> bytes:
  s = H.Storage("0", dtype, numel)
  return H.crafted_pth(OrderedDict(t=H.tensor_v2(s, offset, size, stride)), {"0": np.arange(numel, dtype=np.float32).tobytes()})

@pytest.mark.parametrize("size, stride, offset, match", [
  ((2, 3), (-3, 1), 0, "non-negative"),            # read before the storage (segfault or garbage before)
  ((2, 3), (3, 1), -4, "non-negative"),
  ((2, 3), (3, 1), 1, "reaches past"),
  ((2, 3), (4, 1), 0, "reaches past"),
  ((6,), (1,), 1 << 62, "reaches past"),
  ((-1, 6), (6, 1), 0, "non-negative"),
  ((2, 3), (3,), 0, "same length"),
  ((2, 3.0), (3, 1), 0, "non-negative integers"),
  ((1 << 40, 1 << 40), (0, 0), 0, "expand"),
])
def test_torch_load_bad_views(size, stride, offset, match):
  with pytest.raises(CorruptFileError, match=match): torch_load(_pth(size, stride, offset))

def test_torch_load_refuses_code(tmp_path):
  """A pickle naming os.system (or any global outside the tensor/container set) is refused before anything runs."""
  marker = tmp_path / "pwned"
  for g in (H.Global("os", "system"), H.Global("builtins", "eval"), H.Global("subprocess", "check_call"), H.Global("torch", "load")):
    evil = H.crafted_pth(OrderedDict(x=H.Reduce(g, (f"touch {marker}",))), {})
    with pytest.raises(CorruptFileError, match="refusing to load"): torch_load(evil)
  assert not marker.exists()
  # allowed names used as something else: torch.Tensor called, a tensor built over a non-storage, BUILD on a tensor
  s = H.Storage("0", "FloatStorage", 6)
  for obj in (OrderedDict(x=H.Reduce(H.Global("torch", "Tensor"), ((1, 2),))),
              OrderedDict(x=H.Reduce(H.Global("torch._utils", "_rebuild_tensor_v2"), ("notastorage", 0, (1,), (1,), False, OrderedDict()))),
              OrderedDict(x=H.Reduce(H.Global("torch._utils", "_rebuild_tensor_v2"), (s, 0, (6,), (1,), False, OrderedDict()),
                                     state=(None, {"uop": 1}))),
              OrderedDict(x=H.Global("torch", "FloatStorage"))):
    with pytest.raises(CorruptFileError): torch_load(H.crafted_pth(obj, {"0": bytes(24)}))

def test_torch_load_zip_bomb_and_missing_storage(tmp_path):
  import io, zipfile
  data, _ = H.valid_pth()
  with pytest.raises(CorruptFileError, match="missing"):
    torch_load(H.crafted_pth(OrderedDict(t=H.tensor_v2(H.Storage("9", "FloatStorage", 1), 0, (1,), (1,))), {}))
  # a deflated member claiming 2^40 bytes from a few compressed ones
  buf = io.BytesIO()
  with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(buf, "w") as zout:
    for n in zin.namelist(): zout.writestr(n, zin.read(n), zipfile.ZIP_DEFLATED if n.endswith("/0") else zipfile.ZIP_STORED)
  raw = bytearray(buf.getvalue())
  # patch the central directory's uncompressed size of data/0 (the local header too) to 2^32-2
  name = b"archive/data/0"
  for sig, size_off in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
    i = 0
    while (i := raw.find(sig, i)) >= 0:
      nlen = struct.unpack_from("<H", raw, i + (28 if sig == b"PK\x01\x02" else 26))[0]
      hdr = 46 if sig == b"PK\x01\x02" else 30
      if raw[i + hdr:i + hdr + nlen] == name: struct.pack_into("<I", raw, i + size_off, 0xFFFFFFFE)
      i += 4
  with pytest.raises(CorruptFileError, match="claims"): torch_load(bytes(raw))

def test_torch_load_valid_crafted_and_real():
  data, want = H.valid_pth()
  sd = torch_load(data)
  for k, v in want.items(): np.testing.assert_array_equal(sd[k].numpy(), v)
  torch = pytest.importorskip("torch")
  import io
  buf = io.BytesIO()
  torch.save({"a": torch.arange(10, dtype=torch.float32)[2::3], "b": torch.ones(2, 3, dtype=torch.float16).t()}, buf)
  sd = torch_load(buf.getvalue())
  np.testing.assert_array_equal(sd["a"].numpy(), [2, 5, 8]) and sd["b"].shape == (3, 2)

def test_torch_load_bad_views_under_python_O():
  """The same checks with asserts compiled out (they are plain raises)."""
  r = run_py(f"""
    import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
    import _hostile_files as H
    from collections import OrderedDict
    from tinycore.nn.state import torch_load, CorruptFileError
    s = H.Storage("0", "FloatStorage", 6)
    try: torch_load(H.crafted_pth(OrderedDict(t=H.tensor_v2(s, 0, (2, 3), (-3, 1))), {{"0": bytes(24)}})); print("LOADED")
    except CorruptFileError as e: print("refused")
  """, "-O")
  assert r.returncode == 0 and r.stdout.strip() == "refused", (r.stdout, r.stderr)
