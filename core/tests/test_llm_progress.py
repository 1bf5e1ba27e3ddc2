"""The loading progress bar: silent by default off a terminal and for fast loads, a line with tensors, MiB and MiB/s
with PROGRESS=1, never with PROGRESS=0."""
import io
from tinycore.llm.progress import LoadProgress

def run(monkeypatch, env: str | None, delay: float, tty: bool = False) -> str:
  if env is None: monkeypatch.delenv("PROGRESS", raising=False)
  else: monkeypatch.setenv("PROGRESS", env)
  out = io.StringIO()
  out.isatty = lambda: tty   # type: ignore[method-assign]
  with LoadProgress(4, 4 << 20, delay=delay, stream=out) as bar:
    for _ in range(4): bar.advance(1 << 20)
  return out.getvalue()

def test_silent_off_a_terminal(monkeypatch):
  assert run(monkeypatch, None, 0.0) == ""

def test_silent_when_fast(monkeypatch):
  assert run(monkeypatch, "1", 60.0) == ""

def test_progress_1_prints_tensors_mib_and_rate(monkeypatch):
  text = run(monkeypatch, "1", 0.0)
  last = text.strip().splitlines()[-1]
  assert "4/4 tensors" in last and "4.0/4.0 MiB" in last and "MiB/s" in last, text

def test_progress_0_wins_over_a_terminal(monkeypatch):
  assert run(monkeypatch, "0", 0.0, tty=True) == ""

def test_terminal_gets_a_bar(monkeypatch):
  text = run(monkeypatch, None, 0.0, tty=True)
  assert "4/4 tensors" in text and "MiB/s" in text, text
