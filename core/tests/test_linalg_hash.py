"""qr/svd against numpy.linalg, keccak/hash against hashlib, and the small tinygrad-API methods (threefry, from_blob,
from_url, max_shape/max_numel). Signs of factors aren't unique, so factorizations are checked by reconstruction,
orthogonality and triangularity; singular values directly."""
import gzip, hashlib, http.server, threading, functools
import numpy as np
import pytest
from tinycore import Tensor, dtypes, Variable
pytestmark = pytest.mark.needs_device

def _orth_err(q, rows: bool = False):
  q = np.swapaxes(q, -1, -2) if rows else q
  return np.abs(np.swapaxes(q, -1, -2) @ q - np.eye(q.shape[-1])).max()

# ---- QR

@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 5, 4), (1, 1)])
def test_qr_random(shape):
  a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
  Q, R = [x.numpy() for x in Tensor(a).qr()]
  m, n = shape[-2:]
  assert Q.shape == (*shape[:-2], m, m) and R.shape == shape and Q.dtype == R.dtype == np.float32
  np.testing.assert_allclose(Q @ R, a, atol=2e-6)
  assert _orth_err(Q) < 2e-6
  assert np.all(np.tril(R, -1) == 0)
  # R is unique up to the signs of its rows
  np.testing.assert_allclose(np.abs(R), np.abs(np.linalg.qr(a, mode="complete")[1]), atol=2e-6)

def test_qr_sign_convention_and_degenerate():
  # same sign convention as tinygrad/LAPACK Householder: a positive leading entry reflects to a negative diagonal
  np.testing.assert_allclose(Tensor(np.eye(3, dtype=np.float32)).qr()[0].numpy(), -np.eye(3))
  Q, R = [x.numpy() for x in Tensor(np.zeros((3, 2), np.float32)).qr()]   # zero columns: no reflection, no NaN
  np.testing.assert_array_equal(Q, np.eye(3)); np.testing.assert_array_equal(R, 0)
  Q, R = [x.numpy() for x in Tensor(np.ones((4, 3), np.float32)).qr()]    # rank 1
  np.testing.assert_allclose(Q @ R, 1.0, atol=2e-6); assert _orth_err(Q) < 2e-6

def test_qr_dtypes():
  a = np.arange(12).reshape(4, 3)
  Q, R = Tensor(a).qr()   # ints are factored as the default float, as in tinygrad
  assert Q.dtype == R.dtype == dtypes.float32
  np.testing.assert_allclose(Q.numpy() @ R.numpy(), a, atol=2e-5)
  b = np.random.default_rng(1).standard_normal((5, 4))
  Q, R = [x.numpy() for x in Tensor(b).qr()]
  assert Q.dtype == np.float64 and np.abs(Q @ R - b).max() < 1e-13 and _orth_err(Q) < 1e-14
  assert Tensor(b.astype(np.float16)).qr()[0].dtype == dtypes.float16

@pytest.mark.parametrize("op", ["qr", "svd"])
def test_linalg_bad_input(op):
  with pytest.raises(ValueError, match="2 or more dims"): getattr(Tensor([1.0, 2.0]), op)()

# ---- SVD

def _check_svd(a, full, tol):
  U, S, Vh = [x.numpy() for x in Tensor(a).svd(full_matrices=full)]
  *b, m, n = a.shape
  k = min(m, n)
  assert U.shape == (*b, m, m if full else k) and S.shape == (*b, k) and Vh.shape == (*b, n if full else k, n)
  np.testing.assert_allclose(S, np.linalg.svd(a, compute_uv=False), atol=tol * max(1.0, np.abs(a).max()))
  assert np.all(np.diff(S, axis=-1) <= tol)   # descending
  np.testing.assert_allclose((U[..., :k] * S[..., None, :]) @ Vh[..., :k, :], a, atol=tol * max(1.0, np.abs(a).max()) * 4)
  assert _orth_err(U) < tol * 4 and _orth_err(Vh, rows=True) < tol * 4

@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3), (1, 1)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_random(shape, full):
  _check_svd(np.random.default_rng(2).standard_normal(shape).astype(np.float32), full, 2e-6)

def test_svd_third_result_is_vh():
  a = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
  U, S, V = [x.numpy() for x in Tensor(a).svd(full_matrices=False)]
  np.testing.assert_allclose(U * S @ V, a, atol=2e-6)                         # A = U diag(S) Vh, as tinygrad returns it
  assert np.abs(U * S @ V.T - a).max() > 1e-2

def test_svd_rank_deficient_and_float64():
  _check_svd(np.ones((4, 3), np.float32), True, 2e-6)              # singular values 0: U still orthogonal
  _check_svd(np.zeros((3, 3), np.float32), True, 1e-7)
  _check_svd(np.random.default_rng(4).standard_normal((6, 5)), True, 1e-13)
  U, S, Vh = Tensor(np.arange(6).reshape(3, 2)).svd()
  assert S.dtype == dtypes.float32
  np.testing.assert_allclose(S.numpy(), np.linalg.svd(np.arange(6).reshape(3, 2), compute_uv=False), rtol=1e-5)

# ---- keccak / hash

def _hex(t: Tensor) -> str: return bytes(t.numpy().astype(np.uint8).reshape(-1).tolist()).hex()

@pytest.mark.parametrize("n", [0, 3, 135, 136, 137, 300])   # around the sha3_256 rate: 1 or 2 padding bytes, 1-3 blocks
def test_keccak_sha3_256(n):
  msg = bytes((i * 7 + 1) % 256 for i in range(n))
  t = Tensor(msg) if n else Tensor.empty(0, dtype=dtypes.uint8)
  h = t.keccak()
  assert h.shape == (32,) and h.dtype == dtypes.uint8
  assert _hex(h) == hashlib.sha3_256(msg).hexdigest()

def test_keccak_batched_and_cfgs():
  rows = np.random.default_rng(5).integers(0, 256, (2, 3, 50), dtype=np.uint8)
  h = Tensor(rows).keccak().numpy()
  assert h.shape == (2, 3, 32)
  for i in range(2):
    for j in range(3): assert bytes(h[i, j].tolist()) == hashlib.sha3_256(rows[i, j].tobytes()).digest()
  msg = b"Hello World!"
  for cfg in ["sha3_224", "sha3_384", "sha3_512"]: assert _hex(Tensor(msg).keccak(cfg)) == hashlib.new(cfg, msg).hexdigest()
  assert _hex(Tensor(msg).keccak("shake_128")) == hashlib.shake_128(msg).hexdigest(16)   # tinygrad's 16-byte shake_128
  assert _hex(Tensor(msg).keccak((136, 6))) == hashlib.sha3_256(msg).hexdigest()
  # original Keccak padding (Ethereum's keccak256), known vector of the empty message
  assert _hex(Tensor.empty(0, dtype=dtypes.uint8).keccak("keccak_256")) == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"

def test_keccak_hashes_element_bytes():
  a = np.arange(10, dtype=np.float32).reshape(2, 5)
  h = Tensor(a).keccak().numpy()
  assert h.shape == (2, 32) and bytes(h[1].tolist()) == hashlib.sha3_256(a[1].tobytes()).digest()

def test_keccak_bad_input():
  with pytest.raises(ValueError, match="unknown keccak cfg"): Tensor(b"x").keccak("md5")
  with pytest.raises(ValueError, match="multiple of 8"): Tensor(b"x").keccak((130, 6))
  with pytest.raises(ValueError, match="0-d"): Tensor(3, dtype=dtypes.uint8).keccak()

def _ref_hash(b: bytes) -> bytes:
  """The tree of Tensor.hash in hashlib: per 1 MiB chunk, shake_128 over the 256 shake_128-16 digests of its 4 KiB pieces."""
  mb = 1 << 20
  def level(d, chunks):
    d = d.ljust(chunks * mb, b"\0")
    return b"".join(hashlib.shake_128(b"".join(hashlib.shake_128(d[c * mb + i * 4096:c * mb + (i + 1) * 4096]).digest(16)
                                              for i in range(256))).digest(16) for c in range(chunks))
  chunks = -(-len(b) // mb)
  while chunks > 1: b, chunks = level(b, chunks), -(-chunks // 65536)
  return level(b, 1)

def test_hash():
  h = Tensor(b"Hello World!").hash()
  assert h.shape == (16,) and h.dtype == dtypes.uint8 and bytes(h.tolist()) == _ref_hash(b"Hello World!")
  a = np.arange(6, dtype=np.int32).reshape(2, 3)
  assert bytes(Tensor(a).hash().tolist()) == _ref_hash(a.tobytes())

# ---- small tinygrad API

def test_threefry_matches_tinygrad():
  x = Tensor([0, 1, 2, 3], dtype=dtypes.uint64)
  want = [1356859863320810339, 8853074403113563486, 1965861679108977291, 6467865857535376736]   # tinygrad 0.14, seed 5
  assert x.threefry(Tensor([5], dtype=dtypes.uint64)).tolist() == want and x.threefry(5).tolist() == want
  with pytest.raises(TypeError, match="uint64"): Tensor([1, 2]).threefry(5)

def test_from_blob_is_zero_copy():
  a = np.arange(12, dtype=np.float32)
  t = Tensor.from_blob(a.ctypes.data, (3, 4), dtype=dtypes.float32)
  assert t.shape == (3, 4) and t.dtype == dtypes.float32
  np.testing.assert_array_equal(t.numpy(), a.reshape(3, 4))
  a[0] = 100.0   # writes through the pointer are seen: no copy was taken
  assert (t + 1).numpy()[0, 0] == 101.0
  with pytest.raises(ValueError, match="address"): Tensor.from_blob(0, (3,))

def test_from_url(tmp_path):
  raw = np.arange(4, dtype=np.float32).tobytes()
  (tmp_path / "w.bin").write_bytes(raw)
  (tmp_path / "w.gz").write_bytes(gzip.compress(raw))
  t = Tensor.from_url((tmp_path / "w.bin").as_uri())
  assert t.dtype == dtypes.uint8 and bytes(t.tolist()) == raw
  np.testing.assert_array_equal(Tensor.from_url((tmp_path / "w.gz").as_uri(), gunzip=True, dtype=dtypes.float32).numpy(), [0, 1, 2, 3])
  handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
  handler.log_message = lambda *a: None
  srv = http.server.HTTPServer(("127.0.0.1", 0), handler)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  try: assert bytes(Tensor.from_url(f"http://127.0.0.1:{srv.server_address[1]}/w.bin").tolist()) == raw
  finally: srv.shutdown(); srv.server_close()
  with pytest.raises(ValueError, match="whole number"): Tensor.from_url("data:application/octet-stream,abc", dtype=dtypes.float32)

def test_max_shape():
  v = Variable("i", 1, 10).bind(3)
  t = Tensor.ones(10, 4)[:v]
  assert t.max_shape == (10, 4) and t.max_numel() == 40
  assert Tensor.ones(2, 3).max_shape == (2, 3) and Tensor.ones(2, 3).max_numel() == 6
