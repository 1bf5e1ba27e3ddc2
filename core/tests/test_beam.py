"""BEAM search: every variant it times computes the same result, the winner is cached, and BEAM results match numpy."""
import numpy as np, pytest
from tinycore import Tensor, Context, Device
from tinycore.codegen import get_program, lower_kernel
from tinycore.codegen import opt as O
from tinycore.codegen.search import next_actions
from tinycore.rewrite import graph_rewrite
from tinycore.symbolic import symbolic
pytestmark = pytest.mark.needs_device

def _mm(n=64, m=48, k=32, seed=0):
  rng = np.random.default_rng(seed)
  return rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal((k, m)).astype(np.float32)

def test_beam_matmul_matches_numpy(tmp_path):
  a, b = _mm()
  with Context(BEAM=2, IGNORE_BEAM_CACHE=1, CACHEDB=str(tmp_path)):
    out = (Tensor(a) @ Tensor(b)).numpy()
  np.testing.assert_allclose(out, a @ b, atol=1e-4, rtol=1e-4)

def test_every_action_sequence_is_correct():
  """Each candidate BEAM may pick (two levels deep) gives the numpy answer."""
  a, b = _mm(32, 64, 16, seed=1)
  si = (Tensor(a) @ Tensor(b)).schedule()[-1]
  dev = Device[si.bufs[0].device]
  k0 = graph_rewrite(lower_kernel(si.ast), symbolic)
  seqs = [(a1,) for a1 in next_actions(k0, dev.renderer, ())]
  seqs += [s + (a2,) for s in seqs[:3] for a2 in next_actions(O.apply_opts(k0, s), dev.renderer, s)]
  assert len(seqs) >= 4
  for opts in seqs:
    p = get_program(si.ast, dev.renderer, opts=opts)
    prg = dev.runtime(p.name, dev.compiler.compile_cached(p.src))
    for buf in si.bufs: buf.ensure_allocated()
    prg(*[buf._buf for buf in si.bufs], global_size=p.global_size, local_size=p.local_size, vals=(), wait=True)
    np.testing.assert_allclose(si.bufs[0].numpy().reshape(32, 64), a @ b, atol=1e-4, rtol=1e-4, err_msg=str(opts))

def test_beam_result_is_cached(tmp_path, capsys):
  a, b = _mm(16, 16, 16, seed=2)
  with Context(BEAM=1, IGNORE_BEAM_CACHE=1, CACHEDB=str(tmp_path), BEAM_DEBUG=1):
    (Tensor(a) @ Tensor(b)).numpy()
  assert "variants in" in capsys.readouterr().out
  from tinycore.engine import run
  run._runners.clear()   # forget compiled runners so the search is asked again
  with Context(BEAM=1, IGNORE_BEAM_CACHE=0, CACHEDB=str(tmp_path), BEAM_DEBUG=1):
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, atol=1e-4)
  assert "variants in" not in capsys.readouterr().out

def test_vector_selects_in_tiled_kernels():
  """relu-gradient style kernels (compare/where/max on vector lanes) match numpy, NaN included."""
  rng = np.random.default_rng(3)
  a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((64, 48), (64, 32), (64, 32)))
  b[3, 5] = np.nan
  A, B, C = Tensor(a), Tensor(b), Tensor(c)
  for got, want in [(A.T @ (B * (C > 0)), a.T @ (b * (c > 0))), (A.T @ (C > 0).where(B, 0.5), a.T @ np.where(c > 0, b, 0.5)),
                    (A.T @ B.maximum(C), a.T @ np.maximum(b, c)), (A.T @ (Tensor([1.0]).reshape(1, 1) > 0).where(C, B), a.T @ c)]:
    np.testing.assert_allclose(got.numpy(), want, atol=1e-4, rtol=1e-4, equal_nan=True)

def test_costly_broadcast_elementwise_is_computed_once():
  """gelu(h) @ w: the gelu is realized once instead of being recomputed for every output column (2 kernels, not 1)."""
  import math
  rng = np.random.default_rng(4)
  h, w = rng.standard_normal((8, 64)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
  g = lambda t: 0.5 * t * (1 + (t / math.sqrt(2)).erf())
  sched = (g(Tensor(h)) @ Tensor(w)).schedule()
  assert len(sched) == 2
  cheap = ((Tensor(h).relu()) @ Tensor(w)).schedule()   # relu is cheap: stays fused
  assert len(cheap) == 1
  from math import erf
  want = (0.5 * h * (1 + np.vectorize(erf)(h / math.sqrt(2)))) @ w
  np.testing.assert_allclose((g(Tensor(h)) @ Tensor(w)).numpy(), want, atol=1e-4, rtol=1e-4)

def test_vector_matrix_streams_whole_rows():
  """v @ W with W row-major: the rows are split into chunks summed in a second kernel (each chunk streams whole rows),
  also for a few rows of activations (decode at batch 2..8, codegen/opt_gemv.py); W.T (rows along the reduce) and a
  batch of many rows (a matmul) stay one kernel. All match numpy."""
  rng = np.random.default_rng(5)
  v, w = rng.standard_normal((1, 2048)).astype(np.float32), rng.standard_normal((2048, 96)).astype(np.float32)
  b, many = rng.standard_normal((4, 2048)).astype(np.float32), rng.standard_normal((16, 2048)).astype(np.float32)
  assert len((Tensor(v) @ Tensor(w)).schedule()) == 2
  assert len((Tensor(v) @ Tensor(w.T.copy()).T).schedule()) == 1
  assert len((Tensor(b) @ Tensor(w)).schedule()) == 2
  assert len((Tensor(many) @ Tensor(w)).schedule()) == 1
  np.testing.assert_allclose((Tensor(v) @ Tensor(w)).numpy(), v @ w, atol=1e-3, rtol=1e-4)
  np.testing.assert_allclose((Tensor(v[0]) @ Tensor(w)).numpy(), v[0] @ w, atol=1e-3, rtol=1e-4)
  np.testing.assert_allclose((Tensor(b) @ Tensor(w)).numpy(), b @ w, atol=1e-3, rtol=1e-4)
  np.testing.assert_allclose((Tensor(many) @ Tensor(w)).numpy(), many @ w, atol=1e-3, rtol=1e-4)

def test_matvec_heuristics():
  """x + W @ v reduces in vector lanes along W's rows, one row at a time (the residual x isn't a reason to tile the
  output), and SwiGLU's gate and up products share one reduce loop, the silu computed once rather than inside the down
  projection."""
  rng = np.random.default_rng(6)
  x, h = rng.standard_normal((1, 64)).astype(np.float32), rng.standard_normal((1, 128)).astype(np.float32)
  wg, wu, wd = (rng.standard_normal(s).astype(np.float32) / 10 for s in ((96, 128), (96, 128), (64, 96)))
  X, H, WG, WU, WD = (Tensor(a) for a in (x, h, wg, wu, wd))
  si = (X + H @ WU[:64].T).schedule()[-1]
  dev = Device[si.bufs[0].device]
  if dev.renderer.device == "CPU" and getattr(dev.renderer, "vector_types", False):
    opts = O.heuristic_opts(graph_rewrite(lower_kernel(si.ast), symbolic), dev.renderer)
    # rows one after another (no output tile interleaving short rows), several accumulators along the row instead
    assert opts[0][0] == "VEC_R" and "UPCAST" not in [o[0] for o in opts]
  sched = ((H @ WG.T).silu() * (H @ WU.T)).contiguous().schedule()
  assert len(sched) == 1
  if dev.renderer.device == "CPU":
    p = get_program(sched[0].ast, dev.renderer)
    assert sum(1 for u in p.uops if u.op.name == "RANGE" and u.arg[0] == "r") == 1
  silu = lambda t: t / (1 + np.exp(-t))
  out = (X + ((H @ WG.T).silu() * (H @ WU.T)) @ WD.T).numpy()
  np.testing.assert_allclose(out, x + (silu(h @ wg.T) * (h @ wu.T)) @ wd.T, atol=1e-4, rtol=1e-4)
  assert len((X + ((H @ WG.T).silu() * (H @ WU.T)) @ WD.T).schedule()) == 2   # the product is realized once

def test_quantized_matvec_vector_lanes():
  """Q8_0-style weights (int8 values, one half scale per 32): the int8 loads widen to float lanes and the block scale is
  one scalar load per vector (the heuristic reduces in lanes instead of falling back to scalars); matches numpy."""
  from tinycore import dtypes
  rng = np.random.default_rng(7)
  q, d = rng.integers(-128, 128, (64, 8, 32)).astype(np.int8), (rng.random((64, 8, 1)) / 50).astype(np.float16)
  u = rng.integers(0, 256, (64, 256)).astype(np.uint8)
  x = rng.standard_normal((1, 256)).astype(np.float32)
  w = (Tensor(q).cast(dtypes.float32) * Tensor(d).cast(dtypes.float32)).reshape(64, 256)
  for got, want in [(Tensor(x) @ w.T, x @ (q.astype(np.float32) * d.astype(np.float32)).reshape(64, 256).T),
                    (Tensor(x) @ Tensor(u).cast(dtypes.float32).T, x @ u.astype(np.float32).T)]:
    si = got.schedule()[-1]
    dev = Device[si.bufs[0].device]
    if dev.renderer.device == "CPU" and getattr(dev.renderer, "vector_types", False):
      assert O.heuristic_opts(graph_rewrite(lower_kernel(si.ast), symbolic), dev.renderer)[0][0] == "VEC_R"
    np.testing.assert_allclose(got.numpy(), want, atol=1e-3, rtol=1e-4)

def test_short_axes_of_a_classifier_head():
  """A 10-class head: its 10-wide output axis (no vector divides it) is unrolled whole with rows sharing each weight
  row, and the backward product over the 10 classes unrolls that short reduce, 4 rows sharing the weight loads."""
  rng = np.random.default_rng(7)
  h, w = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal((96, 10)).astype(np.float32)
  g = rng.standard_normal((64, 10)).astype(np.float32)
  for out, ref, want in [(Tensor(h) @ Tensor(w), h @ w, ("UPCAST", 10)), (Tensor(g) @ Tensor(w).T, g @ w.T, ("UPCAST_R", 10))]:
    si = out.schedule()[-1]
    dev = Device[si.bufs[0].device]
    if dev.renderer.device == "CPU":
      opts = O.heuristic_opts(graph_rewrite(lower_kernel(si.ast), symbolic), dev.renderer)
      assert (opts[0][0], opts[0][2]) == want and opts[1][0] == "UPCAST"
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-4, rtol=1e-4)

def test_dot_form_actions_are_correct():
  """a @ b.T with both operands contiguous along the reduce: BEAM may vectorize the reduce and then take a block of
  outputs sharing the loads (4x4 in the heuristic's default); each such sequence gives the numpy answer."""
  rng = np.random.default_rng(6)
  a, b = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((48, 64)).astype(np.float32)
  si = (Tensor(a) @ Tensor(b).T).schedule()[-1]
  dev = Device[si.bufs[0].device]
  if not dev.renderer.vector_types: pytest.skip("the renderer has no vector types")
  k0 = graph_rewrite(lower_kernel(si.ast), symbolic)
  seqs = [(a1,) for a1 in next_actions(k0, dev.renderer, ()) if a1[0] == "VEC_R"]
  assert seqs, "no vectorized reduce offered"
  for _ in range(2): seqs += [s + (a2,) for s in seqs for a2 in next_actions(O.apply_opts(k0, s), dev.renderer, s) if s + (a2,) not in seqs]
  assert any(len(s) == 3 for s in seqs), seqs
  for buf in si.bufs: buf.ensure_allocated()
  for opts in seqs:
    p = get_program(si.ast, dev.renderer, opts=opts)
    prg = dev.runtime(p.name, dev.compiler.compile_cached(p.src))
    prg(*[buf._buf for buf in si.bufs], global_size=p.global_size, local_size=p.local_size, vals=(), wait=True)
    np.testing.assert_allclose(si.bufs[0].numpy().reshape(32, 48), a @ b.T, atol=1e-4, rtol=1e-4, err_msg=str(opts))

def test_final_round_retimes_the_best():
  """BEAM's last step times the 3 best variants and the heuristic's again in turn, each keeping its minimum: a
  heuristic whose first runs met a burst of load (2.0 here, 0.8 when run again) wins over variants that timed 1.0 and
  1.2; a variant whose rerun fails drops out; the ones outside the top 3 aren't run again."""
  from tinycore.codegen.search import _final
  a, b, c, d, h = (("A",),), (("B",),), (("C",),), (("D",),), (("H",),)
  def boom(): raise RuntimeError("gone")
  calls: list = []
  def runner(o, t): return lambda: (calls.append(o), t)[1]
  timed = {a: 1.0, b: 1.2, c: 0.5, d: 3.0, h: 2.0}
  runs = {a: runner(a, 1.1), b: runner(b, 1.3), c: boom, d: runner(d, 0.1), h: runner(h, 0.8)}
  assert _final(c, h, timed, runs) == h
  assert timed[h] == 0.8 and timed[a] == 1.0 and timed[c] == float("inf") and d not in calls
  assert _final(a, a, {a: 1.0}, {a: runs[a]}) == a   # nothing to compare: the search's best as it was
