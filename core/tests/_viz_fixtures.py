"""Recordings the viz tests share: an MNIST-like training step (a small MLP, SGD, on random data) recorded with
Context(VIZ=1), and a synthetic trace with many profile events."""
import numpy as np

def record_mlp_step(seed: int = 0) -> dict:
  """Run one MLP training step under Context(VIZ=1) and return its recording (trace.build_trace's dict)."""
  from tinycore import Tensor, Context, nn
  from tinycore.nn import optim
  from tinycore.engine.run import _runners
  from tinycore.viz import switch
  from tinycore.viz.trace import build_trace
  rng = np.random.default_rng(seed)
  class MLP:
    def __init__(self): self.l1, self.l2 = nn.Linear(784, 32), nn.Linear(32, 10)
    def __call__(self, x): return self.l2(self.l1(x).relu())
  _runners.clear()   # compile every kernel again, so each one is recorded
  switch.forget()
  try:
    with Context(VIZ=1):
      m = MLP()
      opt = optim.SGD(nn.state.get_parameters(m), lr=0.01)
      x, y = Tensor(rng.random((8, 784), dtype=np.float32)), Tensor(rng.integers(0, 10, 8))
      with Tensor.train():
        opt.zero_grad()
        loss = m(x).sparse_categorical_crossentropy(y)
        loss.backward()
        opt.step()
      loss.item()
    return build_trace(switch._made["recorder"], switch._made["profiler"])
  finally: switch.forget()

def synthetic_trace(n_events: int, devices=("CPU", "NV:1", "AMD")) -> dict:
  """A recording with one tiny rewrite and `n_events` profile events spread over `devices`, kernels and copies."""
  prof, t = [], 0
  for i in range(n_events):
    dev, kind = devices[i % len(devices)], "copy" if i % 10 == 9 else "kernel"
    dur = 2000 + (i * 7919) % 50000
    prof.append([f"r_{i % 97}_{i % 13}" if kind == "kernel" else "copy", dev, kind, t, dur, 1000 * (i % 50), 4096 * (i % 20), 1 << 20, 1 << 21])
    t += dur // len(devices) + 100
  uops = [["CONST", "dtypes.int", "1", []], ["CONST", "dtypes.int", "2", []], ["ADD", "dtypes.int", "", [0, 1]], ["CONST", "dtypes.int", "3", []]]
  rewrites = [{"matcher": "symbolic", "caller": "test", "stage": "schedule", "kernel": None, "top_down": False, "depth": 0, "input": 2, "output": 3,
               "steps": [["symbolic.py:10", 2, 3]]}]
  return {"format": "tinycore-viz", "version": 1, "uops": uops, "rewrites": rewrites, "kernels": [], "profile": prof}
