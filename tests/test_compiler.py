import os, subprocess, sys, textwrap
import pytest
from tinycore import Context
from tinycore.compiler import Compiler, CompileError

class Counting(Compiler):
  def __init__(self, key="count-v1"):
    super().__init__(key)
    self.calls = 0
  def compile(self, src):
    self.calls += 1
    return src.encode()[::-1]

@pytest.fixture
def cachedir(tmp_path):
  with Context(CACHEDB=str(tmp_path), CCACHE=1): yield tmp_path

def test_cache_hit(cachedir):
  c = Counting()
  assert c.compile_cached("int x;") == b";x tni" and c.compile_cached("int x;") == b";x tni" and c.calls == 1
  assert Counting().compile_cached("int x;") == b";x tni"   # another instance, same key: on disk
  assert Counting("count-v2").compile_cached("int x;") and os.path.commonpath([c.cache_path("a"), str(cachedir)]) == str(cachedir)

def test_no_cachekey_or_ccache_0(cachedir):
  c = Counting(None)
  c.compile_cached("a"); c.compile_cached("a")
  assert c.calls == 2
  c = Counting()
  with Context(CCACHE=0):
    c.compile_cached("b"); c.compile_cached("b")
  assert c.calls == 2

@pytest.mark.parametrize("corrupt", [b"", b"garbage", None])
def test_corrupt_entry_is_recompiled(cachedir, corrupt):
  c = Counting()
  c.compile_cached("src")
  p = c.cache_path("src")
  blob = open(p, "rb").read()
  open(p, "wb").write(blob[:-1] + b"X" if corrupt is None else corrupt)   # None: a flipped payload byte
  assert c.compile_cached("src") == b"crs" and c.calls == 2
  assert open(p, "rb").read() == blob   # and repaired

def test_two_processes_compile_at_once(tmp_path):
  """Many processes race on the same entries; every one must read back exactly what was compiled."""
  code = textwrap.dedent(f"""
    import sys; from tinycore import Context; from tinycore.compiler import Compiler
    class Slow(Compiler):
      def compile(self, src): return (src * 2000).encode()
    with Context(CACHEDB={str(tmp_path)!r}, CCACHE=1):
      for i in range(200):
        src = f"k{{i % 7}}"
        assert Slow("race").compile_cached(src) == (src * 2000).encode(), src
    print("ok")""")
  procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
  for p in procs:
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and out.strip() == "ok", err
  assert not [f for _, _, fs in os.walk(tmp_path) for f in fs if f.startswith(".tmp-")]   # no temp files left

def test_compile_error_shows_numbered_source_and_log():
  e = CompileError("gcc failed", src="int main() {\n  return x;\n}", log="<stdin>:2:10: error: 'x' undeclared")
  assert str(e).splitlines() == ["gcc failed", "1 | int main() {", "2 |   return x;", "3 | }", "<stdin>:2:10: error: 'x' undeclared"]
  assert isinstance(e, RuntimeError) and e.log.startswith("<stdin>")
