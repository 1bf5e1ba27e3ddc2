"""The CPU device graph (graph.py, graph_driver.c): TinyJit replays through one C call give exactly what the
per-kernel replay (JIT=2) gives, with new inputs, Variables, aliasing, empty dims, 1 or 2 threads, forks and exits."""
import os, subprocess, sys, textwrap
import numpy as np, pytest
from tinycore import Tensor, TinyJit, Variable, Context
from tinycore.engine.jit_graph import GraphedReplay, GraphUnsupported
from tinycore_cpu import graph as cpu_graph

pytestmark = pytest.mark.needs_device

def _rand(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def _graphed(f) -> GraphedReplay:
  g = f.captured.__dict__.get("_graph")
  assert isinstance(g, GraphedReplay), "the replay did not go through a device graph"
  return g

def _run_both(make, calls):
  """make() -> a fresh TinyJit; calls: list of argument tuples. Outputs (as numpy) of the graph replay and of the
  per-kernel replay (JIT=2), call by call."""
  outs = {}
  for jit in (1, 2):
    with Context(JIT=jit):
      f = make()
      res = []
      for args in calls:
        r = f(*args)
        res.append([t.numpy() for t in (r if isinstance(r, (tuple, list)) else (r,))])
      if jit == 1: _graphed(f)
      else: assert f.captured.__dict__.get("_graph") in (None, False)
    outs[jit] = res
  return outs[1], outs[2]

def test_tiny_op_new_input_buffers_each_call():
  xs = [_rand(16, seed=i) for i in range(6)]
  g, p = _run_both(lambda: TinyJit(lambda a: ((a + 1) * 2).sum()), [(Tensor(x),) for x in xs])
  for x, a, b in zip(xs, g, p):
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[0], ((x + 1) * 2).sum(), rtol=1e-5)

def test_split_kernels_match_numpy_one_and_two_threads(monkeypatch):
  # big enough to be cut into pieces for the worker team (graph.SPLIT_WORK)
  xs = [(_rand(300_000, seed=i), _rand(300_000, seed=10 + i)) for i in range(4)]
  for threads in ("1", "2"):
    monkeypatch.setenv("CPU_COUNT", threads)
    f = TinyJit(lambda a, b: ((a * 2 + b).exp2() * a).sum(), )
    h = TinyJit(lambda a, b: (a * 2 + b).exp2() * a)
    for i, (x, y) in enumerate(xs + xs):
      if i == 3:   # graphs built: from here on always split (no timing decides), so the team's path is what runs
        for g in (f, h): g.captured._graphed().segments[0].graph.chooser = None
      np.testing.assert_allclose(f(Tensor(x), Tensor(y)).numpy(), (np.exp2(x * 2 + y) * x).sum(dtype=np.float64), rtol=1e-4)
      np.testing.assert_allclose(h(Tensor(x), Tensor(y)).numpy(), np.exp2(x * 2 + y) * x, rtol=1e-6)
    seg = _graphed(h).segments[0]
    assert max(seg.graph.table[i].chunks for i in range(len(seg.kernels))) == (1 if threads == "1" else 2)
    assert seg.graph.threads == int(threads)

@pytest.mark.parametrize("threads,pieces", [("2", 2), ("2", 7), ("3", 7), ("3", 64)])
def test_pieces_claimed_from_both_ends_run_exactly_once(monkeypatch, threads, pieces):
  # the caller claims pieces from the top and the workers from the bottom (graph_driver.c): an in-place accumulation
  # shows a piece that ran twice (added twice) or never (not added), whatever the cut and the thread count
  monkeypatch.setenv("CPU_COUNT", threads)
  monkeypatch.setattr(cpu_graph, "_chunks", lambda n, work, t: min(n, pieces) if t > 1 else 1)
  w = Tensor(np.zeros(300_001, np.float32)).realize()   # an odd size: the last piece is shorter
  @TinyJit
  def step(a):
    w.assign(w + a)
    Tensor.realize(w)
    return w
  acc = np.zeros(300_001, np.float32)
  for i in range(8):
    a = _rand(300_001, seed=i)
    if i == 3: step.captured._graphed().segments[0].graph.chooser = None   # graph built: always split from here on
    acc += a
    np.testing.assert_array_equal(step(Tensor(a)).numpy(), acc)
  seg = _graphed(step).segments[0]
  assert max(seg.graph.table[i].chunks for i in range(len(seg.kernels))) == min(pieces, seg.graph.table[0].n)

# a kernel that records the range of each call: out[2*start] = end - start, out[2*start + 1] += 1 (calls for that start)
_RECORD = """#include <stdint.h>
void rec(int64_t out, int64_t s, int64_t e) { int64_t *o = (int64_t *)out; o[2 * s] = e - s; o[2 * s + 1] += 1; }"""

def _piece_sizes(o: np.ndarray) -> list[int]:
  """The pieces recorded, checked to tile the loop exactly once, by size in loop order."""
  n, at, sizes = len(o) // 2, 0, []
  while at < n:
    assert o[2 * at + 1] == 1, f"the piece at {at} ran {o[2 * at + 1]} times"
    sizes.append(int(o[2 * at])); at += sizes[-1]
    assert sizes[-1] > 0
  assert at == n and o[1::2].sum() == len(sizes)   # nothing started inside another piece
  return sizes

@pytest.mark.parametrize("n,chunks", [(98, 8), (4, 8), (17, 4), (33, 16), (1000, 7), (5, 5)])
@pytest.mark.parametrize("threads", [1, 2])
def test_pieces_differ_by_at_most_one_iteration(n, chunks, threads):
  # 98 row panels cut into 8: pieces of 12 and 13, not 7 of 13 and a last of 7 (a thread with 4 full ones did 52 of 98)
  import ctypes
  from tinycore_cpu import runtime
  from tinycore_cpu.compiler_c import CCompiler
  fn = runtime.CPUProgram("rec", CCompiler().compile(_RECORD)).fxn
  want = min(n, chunks)
  # the graph driver, with the worker team when threads > 1
  o = np.zeros(2 * n, np.int64)
  args = (ctypes.c_int64 * 1)(o.ctypes.data)
  k = (cpu_graph._Kernel * 1)()
  k[0].fn, k[0].args, k[0].nargs, k[0].n, k[0].chunks = ctypes.cast(fn, ctypes.c_void_p).value, ctypes.addressof(args), 1, n, chunks
  assert cpu_graph._driver().tc_graph_run(ctypes.addressof(k), 1, threads) == 0
  sizes = _piece_sizes(o)
  assert len(sizes) == (want if threads > 1 else 1) and max(sizes) - min(sizes) <= 1, sizes
  # the per-call pool's split (runtime._run_split), DYNAMIC_WORK so it takes CHUNKS_PER_THREAD pieces per thread
  o[:] = 0
  runtime._run_split(fn, [ctypes.c_int64(o.ctypes.data)], n, threads, runtime.DYNAMIC_WORK)
  sizes = _piece_sizes(o)
  assert len(sizes) == min(n, threads * runtime.CHUNKS_PER_THREAD) and max(sizes) - min(sizes) <= 1, sizes

def test_variables_change_per_replay():
  v = Variable("n", 1, 10)
  data = Tensor(np.arange(10, dtype=np.float32)).realize()
  calls = [(data, v.bind(i)) for i in (3, 7, 1, 10, 5, 2)]
  g, p = _run_both(lambda: TinyJit(lambda x, n: (x[:n] + 1).sum()), calls)
  for (_, b), a, c in zip(calls, g, p):
    n = b.src[1].arg
    np.testing.assert_array_equal(a[0], c[0])
    np.testing.assert_allclose(a[0], (np.arange(n) + 1).sum())

def test_outputs_aliasing_inputs_and_in_place_update():
  w = Tensor(np.zeros(8, np.float32)).realize()
  @TinyJit
  def step(a, b):
    w.assign(w + a * b)
    Tensor.realize(w)
    return a.reshape(2, 4), (a + b).contiguous(), w
  acc = np.zeros(8, np.float32)
  for i in range(6):
    a, b = _rand(8, seed=i), _rand(8, seed=50 + i)
    r1, r2, r3 = step(Tensor(a), Tensor(b))
    acc += a * b
    np.testing.assert_array_equal(r1.numpy(), a.reshape(2, 4))
    np.testing.assert_allclose(r2.numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(r3.numpy(), acc, rtol=1e-5, atol=1e-6)
  _graphed(step)

def test_zero_size_dims():
  xs = [(_rand(4, 0, seed=i), _rand(4, seed=i)) for i in range(4)]
  g, p = _run_both(lambda: TinyJit(lambda a, b: (a.sum(1) + b, (a * 2).sum())), [(Tensor(a), Tensor(b)) for a, b in xs])
  for (_, b), r, q in zip(xs, g, p):
    np.testing.assert_array_equal(r[0], q[0]); np.testing.assert_array_equal(r[0], b)
    np.testing.assert_array_equal(r[1], 0)

def test_mlp_train_step_with_optimizer_identical():
  from tinycore import nn
  X, Y = _rand(64, 32, seed=1), np.eye(10, dtype=np.float32)[np.random.default_rng(2).integers(0, 10, 64)]
  def run(jit: int):
    with Context(JIT=jit):
      l1, l2 = nn.Linear(32, 64), nn.Linear(64, 10)
      for i, p in enumerate(nn.state.get_parameters([l1, l2])): p.assign(Tensor(_rand(*p.shape, seed=100 + i) * 0.1)).realize()
      opt = nn.optim.Adam(nn.state.get_parameters([l1, l2]), lr=1e-2)
      @TinyJit
      def step(x, y):
        with Tensor.train():
          opt.zero_grad()
          loss = -(l2(l1(x).relu()).log_softmax(-1) * y).sum(1).mean()
          loss.backward()
          opt.step()
          return loss.realize()
      losses = [float(step(Tensor(X), Tensor(Y)).numpy()) for _ in range(8)]
      if jit == 1: _graphed(step)
      return losses, [p.numpy() for p in nn.state.get_parameters([l1, l2])]
  (lg, pg), (lp, pp) = run(1), run(2)
  assert lg == lp and lg[-1] < lg[0]
  for a, b in zip(pg, pp): np.testing.assert_array_equal(a, b)

def test_llm_decode_identical():
  import tempfile
  from tinycore.llm.testmodel import tiny_llama
  from tinycore.llm.generate import LLM
  for kind in ("Q4_0", "F32"):
    with tempfile.TemporaryDirectory() as d:
      path = os.path.join(d, "m.gguf")
      tiny_llama(path, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden=128, qtype=kind, seed=0, ctx=64, vocab_size=64)
      logits = {}
      for jit in (1, 2):
        with Context(JIT=jit):
          llm = LLM(path, max_context=32, chunk=8)
          logits[jit] = [llm.decode(t, p) for p, t in enumerate([3, 9, 1, 4, 1, 5, 9, 2])]
          if jit == 1: assert _graphed(llm._decode).n_graphed == len(llm._decode.jit_cache)
      for a, b in zip(logits[1], logits[2]): np.testing.assert_array_equal(a, b)

def test_declined_batch_replays_per_kernel(monkeypatch):
  from tinycore import Device
  dev = Device["CPU"]
  def decline(kernels, inputs): raise GraphUnsupported("testing")
  monkeypatch.setattr(dev, "graph", decline)
  f = TinyJit(lambda a: (a * 3).sum())
  for i in range(4):
    x = _rand(8, seed=i)
    np.testing.assert_allclose(f(Tensor(x)).numpy(), (x * 3).sum(), rtol=1e-5)
  assert f.captured.__dict__.get("_graph") is False

def test_counters_match_per_kernel():
  from tinycore.helpers import GlobalCounters
  counts = {}
  for jit in (1, 2):
    with Context(JIT=jit):
      f = TinyJit(lambda a, b: ((a @ b).relu() + 1).sum(0))
      x, y = Tensor(_rand(8, 8)), Tensor(_rand(8, 8, seed=1))
      for _ in range(3): f(x, y)
      before = (GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem)
      f(x, y)
      counts[jit] = tuple(a - b for a, b in zip((GlobalCounters.kernel_count, GlobalCounters.global_ops, GlobalCounters.global_mem), before))
  assert counts[1] == counts[2] and counts[1][0] >= 1

def test_debug2_times_kernels_one_by_one(capsys):
  f = TinyJit(lambda a: (a + 1).sum())
  x = Tensor(_rand(8))
  for _ in range(3): f(x)
  with Context(DEBUG=2): f(x)
  assert "GFLOP/s" in capsys.readouterr().out   # the per-kernel timing line

def test_arity_cases_cover_every_count():
  src = cpu_graph._call_cases()
  assert src.count("case ") == cpu_graph.MAXARGS + 1 and f"case {cpu_graph.MAXARGS}:" in src

def _python(code: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)

SPLIT_JIT = textwrap.dedent("""
  import numpy as np
  from tinycore import Tensor, TinyJit
  x = np.arange(400_000, dtype=np.float32) / 1e5
  f = TinyJit(lambda a: (a * 2 + 1).sqrt() * a)
  for _ in range(4): r = f(Tensor(x)).numpy()
  np.testing.assert_allclose(r, np.sqrt(x * 2 + 1) * x, rtol=1e-6)
  from tinycore_cpu.graph import _driver
  assert _driver().tc_graph_workers() == 1, _driver().tc_graph_workers()
""")

def test_clean_exit_with_team_running():
  # the workers are joined at exit: the process ends promptly (a hang would hit the timeout)
  p = _python(SPLIT_JIT + "print('ok')\n", {"CPU_COUNT": "2"}, timeout=120)
  assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr

def test_forked_child_builds_its_own_team():
  code = SPLIT_JIT + textwrap.dedent("""
  import os
  pid = os.fork()
  if pid == 0:
    try:
      assert _driver().tc_graph_workers() == 0   # the parent's threads don't exist here
      f.captured._graphed().segments[0].graph.chooser = None   # always split (no timing decides)
      for _ in range(3): r = f(Tensor(x + 1)).numpy()
      np.testing.assert_allclose(r, np.sqrt((x + 1) * 2 + 1) * (x + 1), rtol=1e-6)
      assert _driver().tc_graph_workers() == 1
      os._exit(0)
    except BaseException as e:
      print("child:", repr(e)); os._exit(1)
  _, status = os.waitpid(pid, 0)
  assert os.waitstatus_to_exitcode(status) == 0
  r = f(Tensor(x)).numpy()
  np.testing.assert_allclose(r, np.sqrt(x * 2 + 1) * x, rtol=1e-6)
  print("ok")
  """)
  p = _python(code, {"CPU_COUNT": "2"}, timeout=120)
  assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout + p.stderr

def test_debug_buffers_declines_and_still_checks():
  code = textwrap.dedent("""
  import numpy as np
  from tinycore import Tensor, TinyJit
  f = TinyJit(lambda a: (a * 2).sum())
  for i in range(4): r = f(Tensor(np.full(8, i, np.float32))).numpy()
  assert r == 48, r
  assert f.captured.__dict__.get("_graph") is False   # DEBUG_BUFFERS checks each kernel around its own call
  print("ok")
  """)
  p = _python(code, {"DEBUG_BUFFERS": "1"})
  assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr

def test_split_chooser_follows_the_faster_way():
  c = cpu_graph._SplitChooser()
  picks = []
  for _ in range(200):
    split = c.pick()
    picks.append(split)
    c.record(split, 1.0 if split else 2.0)   # splitting twice as fast
  assert all(picks[:15])                                                # split first: a short timing loop sees the split
  assert 0 < picks.count(False) <= 3 + 200 // 64 + 1                     # the caller alone probed rarely
  c2 = cpu_graph._SplitChooser()
  for _ in range(200):
    split = c2.pick()
    c2.record(split, 3.0 if split else 1.0)   # the caller alone faster (a loaded machine)
  assert [c2.pick() for _ in range(10)].count(False) >= 9

def test_llvm_kernels_run_in_the_graph():
  pytest.importorskip("llvmlite")
  xs = [(_rand(16, 16, seed=i), _rand(16, 16, seed=9 + i)) for i in range(5)]
  with Context(DEV="CPU:LLVM"):
    f = TinyJit(lambda a, b: ((a @ b).relu() + 1).sum(0))
    for x, y in xs: np.testing.assert_allclose(f(Tensor(x), Tensor(y)).numpy(), (np.maximum(x @ y, 0) + 1).sum(0), rtol=1e-5)
    assert type(f.captured.jit_cache[0].runner.prg).__name__ == "LLVMProgram"
    assert _graphed(f).n_graphed == len(f.captured.jit_cache)
