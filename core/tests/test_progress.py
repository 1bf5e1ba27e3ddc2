"""Progress bars (tinycore.progress): silent unless stderr is a terminal or PROGRESS=1, hidden until the work outlives its
delay, and the compile bar counts kernels compiled against kernels taken from a cache."""
import io, re, time
import numpy as np, pytest
from tinycore import Tensor, Context, progress

class FakeTTY(io.StringIO):
  def isatty(self) -> bool: return True

def _plain(s: str) -> str: return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", s)

def test_enabled_follows_tty_and_progress_var():
  assert not progress.enabled(io.StringIO())   # a pipe or a test's captured stderr: silent
  assert progress.enabled(FakeTTY())
  with Context(PROGRESS=0): assert not progress.enabled(FakeTTY())
  with Context(PROGRESS=1): assert progress.enabled(io.StringIO())

def test_quick_work_prints_nothing():
  out = FakeTTY()
  with progress.Bar("kernels", total=3, delay=5.0, stream=out) as bar:
    for _ in range(3): bar.advance()
  assert out.getvalue() == ""

def test_disabled_bar_prints_nothing_even_when_slow():
  out = io.StringIO()
  with progress.Bar("kernels", total=2, delay=0.0, stream=out) as bar: bar.advance(2)
  assert out.getvalue() == ""

def test_plain_lines_on_a_pipe_with_progress_1():
  out = io.StringIO()
  with Context(PROGRESS=1):
    with progress.Bar("kernels", total=3, delay=0.0, stream=out) as bar:
      for i in range(3): bar.advance(detail=f"{i + 1} compiled")
  lines = out.getvalue().splitlines()
  assert lines[0].startswith("kernels 0/3"), lines
  assert re.fullmatch(r"kernels 3/3  3 compiled  \[\d+\.\d s\] done", lines[-1]), lines
  assert "\r" not in out.getvalue()   # a log gets whole lines, not terminal rewrites

def test_bar_appears_after_its_delay_while_work_runs():
  out = io.StringIO()
  with Context(PROGRESS=1):
    with progress.Bar("slow", total=1, delay=0.05, stream=out):
      deadline = time.perf_counter() + 5
      while not out.getvalue() and time.perf_counter() < deadline: time.sleep(0.01)   # no advance: the timer shows it
      assert out.getvalue().startswith("slow 0/1"), out.getvalue()

def test_rich_bar_on_a_terminal():
  pytest.importorskip("rich")
  out = FakeTTY()
  with progress.Bar("kernels", total=4, delay=0.0, stream=out) as bar:
    with progress.Bar("beam r_4", delay=0.0, stream=out) as inner: inner.update(7, detail="variants timed")
    bar.advance(4, detail="4 compiled, 0 from cache")
  text = _plain(out.getvalue())
  assert "4/4" in text and "4 compiled, 0 from cache" in text, text
  assert "beam r_4" in text and "7/?" in text, text

def test_plain_terminal_line_without_rich(monkeypatch):
  def no_rich(stream): raise ImportError("rich")
  monkeypatch.setattr(progress, "_RichDisplay", no_rich)
  out = FakeTTY()
  with progress.Bar("kernels", total=2, delay=0.0, stream=out) as bar: bar.advance(2)
  assert out.getvalue().startswith("\r\x1b[2Kkernels 0/2") and out.getvalue().endswith("\n"), repr(out.getvalue())
  assert "kernels 2/2" in out.getvalue()

def _compile_lines(err: str) -> list[str]: return [ln for ln in err.splitlines() if ln.startswith("kernels ")]

@pytest.mark.needs_device
def test_compile_progress_counts_compiled_then_cached(tmp_path, capsys, monkeypatch):
  from tinycore.engine.run import _runners
  monkeypatch.setattr(progress, "DEFAULT_DELAY", 0.0)
  x = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
  c = 1 + float(np.random.default_rng().integers(1 << 20)) / (1 << 20)   # a constant no earlier test compiled: a kernel of its own
  def run(): return (Tensor(x) * c + 1).exp2().sum(axis=1).numpy()
  with Context(CACHEDB=str(tmp_path)):
    first = run()
    assert not _compile_lines(capsys.readouterr().err)   # captured stderr is no terminal: no bar without PROGRESS=1
    _runners.clear()
    with Context(PROGRESS=1): again = run()
    err = capsys.readouterr().err
    assert _compile_lines(err)[-1].startswith("kernels 1/1  0 compiled, 1 from cache"), err   # the disk cache
    _runners.clear()
    with Context(PROGRESS=1, CACHEDB=str(tmp_path / "fresh")): third = run()
    assert _compile_lines(capsys.readouterr().err)[-1].startswith("kernels 1/1  1 compiled, 0 from cache")
  np.testing.assert_allclose(first, np.exp2(x * np.float32(c) + 1).sum(axis=1), rtol=1e-5)
  np.testing.assert_array_equal(first, again); np.testing.assert_array_equal(first, third)

@pytest.mark.needs_device
def test_beam_progress_only_when_enabled(tmp_path, capsys, monkeypatch):
  monkeypatch.setattr(progress, "DEFAULT_DELAY", 0.0)
  rng = np.random.default_rng(3)
  a, b = rng.standard_normal((32, 16)).astype(np.float32), rng.standard_normal((16, 32)).astype(np.float32)
  with Context(BEAM=1, IGNORE_BEAM_CACHE=1, CACHEDB=str(tmp_path)):
    out = (Tensor(a) @ Tensor(b)).numpy()
    assert "beam " not in capsys.readouterr().err
    with Context(PROGRESS=1): out2 = (Tensor(a) @ Tensor(b) + 0).numpy()
    beam = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("beam r_")]
    assert beam and re.search(r" \d+  variants timed, best \d+ us", beam[-1]), beam
  np.testing.assert_allclose(out, a @ b, atol=1e-4, rtol=1e-4); np.testing.assert_allclose(out2, a @ b, atol=1e-4, rtol=1e-4)

def test_bar_interrupted_by_an_error_says_stopped_not_done():
  out = io.StringIO()
  with Context(PROGRESS=1), pytest.raises(KeyError):
    with progress.Bar("kernels", total=3, delay=0.0, stream=out) as bar:
      bar.advance(detail="1 compiled")
      raise KeyError("boom")
  last = out.getvalue().splitlines()[-1]
  assert last.startswith("kernels 1/3  1 compiled; stopped") and not last.endswith("done"), last
