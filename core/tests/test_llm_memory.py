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

_PEAK_SCRIPT = r"""
import json, sys
def rss(key):
  with open("/proc/self/status") as f: return next(int(ln.split()[1]) for ln in f if ln.startswith(key + ":")) / 1024
import numpy as np
from tinycore.llm.generate import LLM, random_tokens
from tinycore.tensor import Tensor
Tensor.zeros(1).contiguous().realize()
base = rss("VmRSS")
llm = LLM(sys.argv[1], max_context=80, chunk=32)
toks = random_tokens(64, llm.cfg.vocab)   # numpy.random would map OpenSSL: ~3.4 MiB that is not the model
list(llm.generate(toks, 8))
kv = sum(c.numel() * c.dtype.itemsize for c in llm.model.cache) / 2**20
print(json.dumps({"base": base, "peak": rss("VmHWM"), "kv": kv}))
"""

@pytest.mark.slow
def test_peak_rss_above_the_runtime_tracks_the_target(tmp_path):
  """Issue 22's target is peak RSS <= 1.5 x (file + KV cache) in all. For a 135M model (74 MiB file) that leaves 0.5x,
  ~39 MiB, for the interpreter, imports and opened device (~37 MiB, the same for any model; bench/llm.py's RSS table
  shows the phases) plus what the model adds beyond its file and KV cache, so the model's share is checked here: load,
  the first prompt's capture (which once held every intermediate: +15 MiB on a 135M model) and decode in a fresh
  process. Measured 1.08x here (1.15x before the vocabulary was read packed and the 2 MiB rounding of big buffers went)."""
  import json, subprocess, sys
  p = str(tmp_path / "m.gguf")
  # ~35 MiB: big enough that what every model adds once (tokenizer, ~100 compiled kernels' code and objects, ~9 MiB
  # at this vocabulary) leaves room for a regression of a few MiB to show (an 18 MiB model measured 1.49x)
  tiny_llama(p, dim=768, n_layers=8, n_heads=12, n_kv_heads=4, hidden=2048, vocab_size=16384, qtype="Q4_0", tied=True, seed=0, ctx=256)
  file_mib = os.path.getsize(p) / 2**20
  r = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, p], capture_output=True, text=True, timeout=600, check=False)
  assert r.returncode == 0, r.stderr[-2000:]
  m = json.loads(r.stdout.strip().splitlines()[-1])
  ratio = (m["peak"] - m["base"]) / (file_mib + m["kv"])
  assert ratio <= 1.15, (f"peak {m['peak']:.1f} MiB, {m['peak'] - m['base']:.1f} above the runtime's {m['base']:.1f}, "
                       f"for {file_mib:.1f} MiB file + {m['kv']:.2f} MiB KV: {ratio:.2f}x")
