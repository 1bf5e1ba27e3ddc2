"""LLM memory: a loaded model holds its weights once (in device memory), not also as touched pages of the mapped GGUF,
and reading embedding rows from the mapping leaves no pages of it behind. Checked through /proc/self/smaps, the Rss
of this process's mapping of the file (Linux)."""
import os
import numpy as np, pytest
from tinycore.llm.testmodel import tiny_llama
from tinycore.llm.generate import LLM

pytestmark = [pytest.mark.needs_device, pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc/self/smaps")]

def mapped_kib(path: str) -> int:
  """KiB of `path` this process has mapped in (the Rss of every mapping of it)."""
  total, inside = 0, False
  real = os.path.realpath(path)
  with open("/proc/self/smaps") as f:
    for ln in f:
      head = ln.split()
      if head and "-" in head[0] and len(head) >= 5:   # a mapping's header line: address perms offset dev inode [path]
        inside = len(head) >= 6 and os.path.realpath(head[5]) == real
      elif inside and head and head[0] == "Rss:": total += int(head[1])
  return total

@pytest.mark.parametrize("qtype,tied", [("Q8_0", True), ("Q4_0", False)])
def test_weights_not_kept_in_the_mapping(tmp_path, qtype, tied):
  p = str(tmp_path / "m.gguf")
  # ~1-3 MiB of weights: far more than the few pages a leftover fault-around window would explain
  tiny_llama(p, dim=256, n_layers=4, n_heads=4, n_kv_heads=2, hidden=512, qtype=qtype, tied=tied, vocab_size=2048)
  size_kib = os.path.getsize(p) // 1024
  llm = LLM(p, max_context=48, chunk=8)
  assert mapped_kib(p) < 64, f"{mapped_kib(p)} KiB of the {size_kib} KiB file still mapped after loading"
  toks = np.random.default_rng(0).integers(0, llm.cfg.vocab, 12).tolist()
  out = list(llm.generate(toks, 4))   # embedding rows come from the mapped file, one lookup per token
  assert len(out) >= 1
  assert mapped_kib(p) < 64, f"{mapped_kib(p)} KiB of the {size_kib} KiB file still mapped after generating"
  # the model still reads the right rows after its pages were dropped
  rows = llm.model.w["token_embd.weight"].rows([0, 5, 2047]).numpy()
  from tinycore.nn.gguf import gguf_load
  ref = gguf_load(p)[1]["token_embd.weight"].numpy()[[0, 5, 2047]]
  np.testing.assert_array_equal(rows, ref)
