"""nn.state: state dicts, safetensors, torch zip checkpoints and GGUF, including files written by the reference libraries
and corrupt/truncated files."""
import json, struct
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
from tinycore import Tensor, dtypes, nn
from tinycore.nn.state import (get_state_dict, get_parameters, load_state_dict, safe_load, safe_save, torch_load, gguf_load,
                               CorruptFileError)

rng = np.random.default_rng(0)

class Net:
  def __init__(self):
    self.l1, self.layers = nn.Linear(3, 4), [nn.Linear(4, 2, bias=False), nn.BatchNorm(2)]

def test_get_state_dict_names_and_parameters():
  sd = get_state_dict(Net())
  assert set(sd) == {"l1.weight", "l1.bias", "layers.0.weight", "layers.1.weight", "layers.1.bias", "layers.1.running_mean",
                     "layers.1.running_var", "layers.1.num_batches_tracked"}
  assert len(get_parameters(Net())) == 8
  shared = Tensor([1.0]); assert len(get_parameters({"a": shared, "b": [shared]})) == 1

def test_load_state_dict_strict_and_shapes():
  src, dst = Net(), Net()
  load_state_dict(dst, get_state_dict(src))
  np.testing.assert_array_equal(dst.l1.weight.numpy(), src.l1.weight.numpy())
  sd = get_state_dict(src)
  with pytest.raises(KeyError, match="l1.bias"): load_state_dict(Net(), {k: v for k, v in sd.items() if k != "l1.bias"})
  load_state_dict(Net(), {k: v for k, v in sd.items() if k != "l1.bias"}, strict=False)
  bad = dict(sd, **{"l1.weight": Tensor.zeros(3, 4)})
  with pytest.raises(ValueError, match=r"l1.weight.*\(4, 3\).*\(3, 4\)"): load_state_dict(Net(), bad)

_DTYPES = [(dtypes.float32, np.float32), (dtypes.float16, np.float16), (dtypes.int64, np.int64), (dtypes.uint8, np.uint8),
           (dtypes.bool, np.bool_), (dtypes.int8, np.int8), (dtypes.float64, np.float64)]

def test_safetensors_roundtrip_all_dtypes(tmp_path):
  ts = {f"t{i}": Tensor((rng.uniform(-3, 3, (2, 3)) if np.dtype(nd).kind == "f"
                         else rng.integers(0, 2 if nd == np.bool_ else 100, (2, 3))).astype(nd))
        for i, (_, nd) in enumerate(_DTYPES)}
  ts["bf"] = Tensor(np.array([1.5, -2.0, 3.25], np.float32)).cast(dtypes.bfloat16)
  ts["f8"] = Tensor(np.array([0.5, -1.0, 2.0], np.float32)).cast(dtypes.fp8e4m3)
  ts["f8b"] = Tensor(np.array([0.25, -4.0], np.float32)).cast(dtypes.fp8e5m2)
  ts["empty"] = Tensor.zeros(0, 3)
  fn = tmp_path / "a.safetensors"
  safe_save(ts, fn, metadata={"who": "me"})
  back = safe_load(fn)
  for k, t in ts.items():
    assert back[k].dtype == t.dtype and back[k].shape == t.shape, k
    np.testing.assert_array_equal(back[k].numpy(), t.numpy())
  assert json.loads(open(fn, "rb").read()[8:8 + struct.unpack("<Q", open(fn, "rb").read(8))[0]])["__metadata__"] == {"who": "me"}

def test_safetensors_reference_library(tmp_path):
  st = pytest.importorskip("safetensors.numpy")
  arrs = {"w": rng.standard_normal((3, 4)).astype(np.float32), "i": np.arange(5, dtype=np.int32), "h": np.ones((2,), np.float16)}
  st.save_file(arrs, str(tmp_path / "ref.safetensors"))
  back = safe_load(tmp_path / "ref.safetensors")
  for k, a in arrs.items(): np.testing.assert_array_equal(back[k].numpy(), a)
  safe_save({k: Tensor(a) for k, a in arrs.items()}, tmp_path / "ours.safetensors")
  for k, a in st.load_file(str(tmp_path / "ours.safetensors")).items(): np.testing.assert_array_equal(a, arrs[k])

def test_safetensors_bf16_from_torch(tmp_path):
  torch = pytest.importorskip("torch"); sst = pytest.importorskip("safetensors.torch")
  t = torch.tensor([[1.0, -2.5], [3.0, 1e-3]], dtype=torch.bfloat16)
  sst.save_file({"x": t}, str(tmp_path / "bf.safetensors"))
  x = safe_load(tmp_path / "bf.safetensors")["x"]
  assert x.dtype == dtypes.bfloat16
  np.testing.assert_array_equal(x.numpy(), t.float().numpy())

def test_safetensors_corrupt(tmp_path):
  fn = tmp_path / "c.safetensors"
  safe_save({"a": Tensor(np.arange(16, dtype=np.float32))}, fn)
  data = open(fn, "rb").read()
  (tmp_path / "trunc").write_bytes(data[:-10])
  with pytest.raises(CorruptFileError, match=r"trunc.*'a'.*offset"): safe_load(tmp_path / "trunc")
  (tmp_path / "short").write_bytes(data[:5])
  with pytest.raises(CorruptFileError, match=r"short.*offset 0"): safe_load(tmp_path / "short")
  (tmp_path / "hdr").write_bytes(struct.pack("<Q", 10**9) + data[8:])
  with pytest.raises(CorruptFileError, match=r"hdr.*header length"): safe_load(tmp_path / "hdr")
  (tmp_path / "json").write_bytes(data[:8] + b"{" * (len(data) - 8))
  with pytest.raises(CorruptFileError, match=r"json.*offset 8.*JSON"): safe_load(tmp_path / "json")

def test_torch_load(tmp_path):
  torch = pytest.importorskip("torch")
  m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
  base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
  sd = {**m.state_dict(), "half": torch.ones(3, dtype=torch.float16) * 1.5, "bf": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        "strided": base.t(), "view": base[1:3, 2:5], "long": torch.arange(4), "nested": {"lst": [torch.tensor([7.0])]}}
  torch.save(sd, tmp_path / "m.pt")
  back = torch_load(tmp_path / "m.pt")
  for k in ["0.weight", "0.bias", "1.running_mean", "1.num_batches_tracked", "half", "strided", "view", "long"]:
    assert back[k].shape == tuple(sd[k].shape), k
    np.testing.assert_array_equal(back[k].numpy(), sd[k].numpy())
  np.testing.assert_array_equal(back["bf"].numpy(), [1.5, -2.0])
  assert back["bf"].dtype == dtypes.bfloat16 and back["long"].dtype == dtypes.int64
  np.testing.assert_array_equal(back["nested"]["lst"][0].numpy(), [7.0])

def test_torch_load_refuses_code_and_corrupt(tmp_path):
  torch = pytest.importorskip("torch")
  torch.save({"x": torch.ones(2), "f": __import__("collections").Counter("ab")}, tmp_path / "evil.pt")
  with pytest.raises(Exception, match="refusing to load collections.Counter"): torch_load(tmp_path / "evil.pt")
  torch.save({"x": torch.ones(100)}, tmp_path / "ok.pt")
  data = (tmp_path / "ok.pt").read_bytes()
  (tmp_path / "cut.pt").write_bytes(data[:len(data) // 2])
  with pytest.raises(CorruptFileError, match="cut.pt"): torch_load(tmp_path / "cut.pt")

def _gguf_blocks(tid: int, nblocks: int) -> np.ndarray:
  """Random blocks with finite f16 scales."""
  from tinycore.nn.gguf import GGML_TYPES
  bb = GGML_TYPES[tid][2]
  blk = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
  for o in {2: [0], 8: [0], 12: [0, 2], 14: [208]}[tid]:
    blk[:, o:o + 2] = rng.uniform(-1, 1, nblocks).astype(np.float16).view(np.uint8).reshape(nblocks, 2)
  return blk

def test_gguf_hand_built_q4_0_q8_0():
  from tinycore.nn.gguf import dequant_q4_0, dequant_q8_0
  blk = np.zeros((1, 18), np.uint8)
  blk[0, :2] = np.array([0.5], np.float16).view(np.uint8)
  blk[0, 2:] = np.arange(16, dtype=np.uint8) | (np.arange(16, dtype=np.uint8)[::-1] << 4)
  np.testing.assert_array_equal(dequant_q4_0(blk)[0], 0.5 * (np.concatenate([np.arange(16), np.arange(16)[::-1]]) - 8))
  b8 = np.zeros((1, 34), np.uint8)
  b8[0, :2] = np.array([0.25], np.float16).view(np.uint8)
  b8[0, 2:] = np.arange(-16, 16, dtype=np.int8).view(np.uint8)
  np.testing.assert_array_equal(dequant_q8_0(b8)[0], 0.25 * np.arange(-16, 16))

def test_gguf_hand_built_q4_k():
  from tinycore.nn.gguf import dequant_q4_k
  blk = np.zeros((1, 144), np.uint8)
  blk[0, 0:2] = np.array([2.0], np.float16).view(np.uint8); blk[0, 2:4] = np.array([1.0], np.float16).view(np.uint8)
  # sub-block scales 1..8 and mins 0..7 packed 6-bit: first four directly, last four split across the high bits
  sc, mn = np.arange(1, 9), np.arange(8)
  blk[0, 4:8], blk[0, 8:12] = sc[:4] | ((sc[4:] >> 4) << 6), mn[:4] | ((mn[4:] >> 4) << 6)
  blk[0, 12:16] = (sc[4:] & 0xF) | ((mn[4:] & 0xF) << 4)
  blk[0, 16:] = 0x53  # low nibble 3, high nibble 5
  exp = np.concatenate([2.0 * sc[j] * (3 if j % 2 == 0 else 5) - mn[j] * np.ones(32) for j in range(8)])
  np.testing.assert_array_equal(dequant_q4_k(blk)[0], exp)

@pytest.mark.parametrize("tid,name", [(2, "Q4_0"), (8, "Q8_0"), (12, "Q4_K"), (14, "Q6_K")])
def test_gguf_dequant_matches_reference(tid, name):
  quants = pytest.importorskip("gguf.quants"); gg = pytest.importorskip("gguf")
  from tinycore.nn.gguf import DEQUANT
  blk = _gguf_blocks(tid, 3)
  ref = quants.dequantize(blk.reshape(-1), gg.GGMLQuantizationType[name]).reshape(-1)
  np.testing.assert_array_equal(DEQUANT[tid](blk).reshape(-1), ref)

def test_gguf_file_roundtrip(tmp_path):
  gg = pytest.importorskip("gguf"); quants = pytest.importorskip("gguf.quants")
  w = gg.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
  w.add_uint32("test.n", 7); w.add_string("test.s", "hello"); w.add_array("test.arr", [1, 2, 3]); w.add_float32("test.f", 0.5)
  f32 = rng.standard_normal((2, 8)).astype(np.float32)
  w.add_tensor("f32", f32)
  w.add_tensor("f16", f32.astype(np.float16))
  q = _gguf_blocks(12, 2)  # two Q4_K blocks = 512 values, as shape (2, 256)
  w.add_tensor("q4k", q, raw_dtype=gg.GGMLQuantizationType.Q4_K)
  q8 = _gguf_blocks(8, 4)
  w.add_tensor("q8", q8, raw_dtype=gg.GGMLQuantizationType.Q8_0)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
  kv, ts = gguf_load(tmp_path / "m.gguf")
  assert kv["test.n"] == 7 and kv["test.s"] == "hello" and kv["test.arr"] == [1, 2, 3] and kv["test.f"] == 0.5
  np.testing.assert_array_equal(ts["f32"].numpy(), f32)
  np.testing.assert_array_equal(ts["f16"].numpy(), f32.astype(np.float16).astype(np.float32))
  assert ts["q4k"].shape == (2, 256) and ts["q8"].shape == (4, 32)
  np.testing.assert_array_equal(ts["q4k"].numpy().reshape(-1), quants.dequantize(q.reshape(-1), gg.GGMLQuantizationType.Q4_K).reshape(-1))
  np.testing.assert_array_equal(ts["q8"].numpy().reshape(-1), quants.dequantize(q8.reshape(-1), gg.GGMLQuantizationType.Q8_0).reshape(-1))
  data = (tmp_path / "m.gguf").read_bytes()
  (tmp_path / "cut.gguf").write_bytes(data[:len(data) - 100])
  with pytest.raises(CorruptFileError, match=r"cut.gguf.*'q8'.*offset"): gguf_load(tmp_path / "cut.gguf")
  (tmp_path / "hdr.gguf").write_bytes(data[:40])
  with pytest.raises(CorruptFileError, match=r"hdr.gguf.*truncated.*offset"): gguf_load(tmp_path / "hdr.gguf")
  with pytest.raises(CorruptFileError, match="magic"): gguf_load(b"XXXX" + data[4:])

def _gguf_with_strings(items: list[bytes], declared: int | None = None) -> bytes:
  """A GGUF header (no tensors) holding one string-array key, with each item's bytes as given (length-prefixed)."""
  import struct
  body = b"".join(struct.pack("<Q", len(s)) + s for s in items)
  key = b"tokenizer.ggml.tokens"
  kv = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, len(items) if declared is None else declared) + body
  return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv

def test_gguf_string_array_read_and_checked(tmp_path):
  from tinycore.nn.gguf import gguf_tensors
  toks = ["<s>", "", "héllo", "\u2581world", "🙂", "a" * 300]
  (tmp_path / "ok.gguf").write_bytes(_gguf_with_strings([t.encode() for t in toks]))
  assert gguf_tensors(tmp_path / "ok.gguf")[0]["tokenizer.ggml.tokens"] == toks
  (tmp_path / "utf.gguf").write_bytes(_gguf_with_strings([b"ok", b"\xff\xfe"]))
  with pytest.raises(CorruptFileError, match=r"utf.gguf.*not UTF-8"): gguf_tensors(tmp_path / "utf.gguf")
  data = _gguf_with_strings([b"abc", b"defgh"])
  (tmp_path / "cut.gguf").write_bytes(data[:-2])   # the last string's bytes run past the end
  with pytest.raises(CorruptFileError, match=r"cut.gguf.*length 5 .*can't fit"): gguf_tensors(tmp_path / "cut.gguf")
  (tmp_path / "cut2.gguf").write_bytes(data[:-9])   # the last string's length field is cut
  with pytest.raises(CorruptFileError, match=r"cut2.gguf.*truncated"): gguf_tensors(tmp_path / "cut2.gguf")
