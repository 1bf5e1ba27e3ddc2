"""Caches other processes (or other users) can write (issue 18): the disk compile cache and the BEAM cache. A bad entry
(torn, another compiler's, a binary that won't load, a FIFO/device/symlink, a poisoned optimization) is detected,
dropped with a warning and redone; it never hangs, crashes every process, or computes a wrong answer."""
import hashlib, json, os, shutil, subprocess, sys, textwrap, threading, warnings
import numpy as np
import pytest
from tinycore import Tensor, Context, Device
from tinycore.compiler import Compiler, _MAGIC, _HEAD
from tinycore.codegen import get_program, lower_kernel
from tinycore.codegen import opt as O
from tinycore.codegen.search import beam_cache_path
from tinycore.fileio import atomic_write, read_regular, NotRegularFileError
from tinycore.rewrite import graph_rewrite
from tinycore.symbolic import symbolic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

class Rev(Compiler):
  """A compiler whose 'binary' is the reversed source; its loader accepts only binaries with the REV: prefix."""
  def __init__(self, key="rev-1"): super().__init__(key); self.calls = 0
  def compile(self, src: str) -> bytes: self.calls += 1; return b"REV:" + src[::-1].encode()

def load_rev(lib: bytes) -> str:
  if not lib.startswith(b"REV:"): raise OSError("invalid ELF header")   # what dlopen says about another compiler's output
  return lib[4:].decode()[::-1]

def _sign(c: Compiler, src: str, payload: bytes) -> bytes:
  """An entry with a valid identity and checksum around any payload (what a confused or hostile writer can produce)."""
  return _MAGIC + c._identity(src) + hashlib.sha256(payload).digest() + payload

def test_entry_that_fails_to_load_is_recompiled(tmp_path):
  with Context(CACHEDB=str(tmp_path)):
    c = Rev()
    p = c.cache_path("kernel")
    os.makedirs(os.path.dirname(p)); open(p, "wb").write(_sign(c, "kernel", b"\x7fELF\x01garbage"))
    with pytest.warns(UserWarning, match="failed to load"): assert c.load_cached("kernel", load_rev) == "kernel"
    assert c.calls == 1
    c2 = Rev()   # the next process finds the repaired entry: no warning, no compile
    with warnings.catch_warnings(): warnings.simplefilter("error"); assert c2.load_cached("kernel", load_rev) == "kernel"
    assert c2.calls == 0

def test_entry_of_another_compiler_is_not_used(tmp_path):
  with Context(CACHEDB=str(tmp_path)):
    a, b = Rev("rev-1"), Rev("rev-2")
    a.compile_cached("k")
    os.makedirs(os.path.dirname(b.cache_path("k")), exist_ok=True)
    os.replace(a.cache_path("k"), b.cache_path("k"))   # a's entry (valid checksum) where b looks
    with pytest.warns(UserWarning, match="another compiler"): assert b.compile_cached("k") == b"REV:k"
    assert b.calls == 1

@pytest.mark.parametrize("kind", ["fifo", "symlink_to_fifo", "dev_zero", "directory", "huge"])
def test_odd_entries_do_not_hang(tmp_path, kind):
  with Context(CACHEDB=str(tmp_path)):
    c = Rev()
    p = c.cache_path("src")
    os.makedirs(os.path.dirname(p))
    if kind == "fifo": os.mkfifo(p)
    elif kind == "symlink_to_fifo": os.mkfifo(tmp_path / "f"); os.symlink(tmp_path / "f", p)
    elif kind == "dev_zero": os.symlink("/dev/zero", p)
    elif kind == "directory": os.mkdir(p)
    else:
      with open(p, "wb") as f: f.truncate(1 << 40)   # sparse: claims a TB
    box = {}
    def go():
      with warnings.catch_warnings(record=True): box["lib"] = c.compile_cached("src")
    th = threading.Thread(target=go, daemon=True); th.start(); th.join(20)
    assert not th.is_alive(), f"compile cache read hung on a {kind}"
    assert box["lib"] == b"REV:crs"

def test_read_regular_and_atomic_write(tmp_path):
  p = tmp_path / "x"
  atomic_write(p, b"abc")
  assert read_regular(p, 3) == b"abc"
  with pytest.raises(NotRegularFileError, match="more than"): read_regular(p, 2)
  os.symlink(p, tmp_path / "l")
  with pytest.raises(NotRegularFileError, match="symlink"): read_regular(tmp_path / "l", 10)
  with pytest.raises(FileNotFoundError): read_regular(tmp_path / "missing", 10)
  def boom(f): f.write(b"partial"); raise RuntimeError("disk full")
  with pytest.raises(RuntimeError): atomic_write(p, boom)
  assert p.read_bytes() == b"abc" and sorted(os.listdir(tmp_path)) == ["l", "x"]

# ---- a real device: a poisoned compile cache entry for a CPU kernel
def run_py(code: str, env: dict) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                        cwd=ROOT, env={**os.environ, **env})

ADD = """
  import numpy as np
  from tinycore import Tensor
  a, b = np.arange(1000, dtype=np.float32), np.full(1000, 0.5, np.float32)
  print("OK" if np.array_equal((Tensor(a) * 3 + Tensor(b)).numpy(), a * 3 + b) else "WRONG")
"""

def undefined_symbol_so(tmp_path) -> bytes:
  """A shared object that links (-shared allows it) but whose load fails: it calls a function nothing defines."""
  cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
  if cc is None: pytest.skip("no C compiler to build the poisoned payload")
  (tmp_path / "u.c").write_text("extern void tinycore_nosuch_fn(void); void k(void) { tinycore_nosuch_fn(); }\n")
  subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "u.so"), str(tmp_path / "u.c")], check=True)
  return (tmp_path / "u.so").read_bytes()

@pytest.mark.needs_device
@pytest.mark.parametrize("poison", ["wrong_elf_class", "undefined_symbol", "not_elf"])
def test_poisoned_kernel_entry_on_a_real_device(tmp_path, poison):
  env = {"CACHEDB": str(tmp_path), "PYTHONWARNINGS": "always"}
  r = run_py(ADD, env)
  assert r.returncode == 0 and r.stdout.strip() == "OK", r.stderr
  entries = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "compile") for f in fs]
  assert entries
  for e in entries:
    blob = open(e, "rb").read()
    lib = blob[_HEAD:]
    if poison == "wrong_elf_class": lib = lib[:4] + bytes([1 if lib[4] == 2 else 2]) + lib[5:]   # ELFCLASS32 <-> 64
    elif poison == "undefined_symbol": lib = undefined_symbol_so(tmp_path)
    else: lib = b"#!/bin/sh\necho pwned\n"
    open(e, "wb").write(blob[:36] + hashlib.sha256(lib).digest() + lib)   # identity kept, checksum valid
  r = run_py(ADD, env)
  assert r.returncode == 0 and r.stdout.strip() == "OK", (r.stdout, r.stderr)
  assert "failed to load" in r.stderr and "recompiling" in r.stderr
  r = run_py(ADD, env)   # repaired: quiet
  assert r.stdout.strip() == "OK" and "failed to load" not in r.stderr, r.stderr

# ---- apply_opt validation and the BEAM cache
def _matmul(n=64):
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
  si = (Tensor(a) @ Tensor(b)).schedule()[-1]
  return a, b, si, Device[si.bufs[0].device]

@pytest.mark.needs_device
def test_check_opt_rejects_what_does_not_fit():
  _, _, si, dev = _matmul()
  k = O.merge_reduce_loops(graph_rewrite(lower_kernel(si.ast), symbolic))
  g = [u.arg for u in O._globals(k)]
  r = next(u.arg for u in k.toposort() if u.op.name == "RANGE" and u.arg[0] == "r")
  for bad, match in [(("UPCAST", g[1], 7), "doesn't divide"), (("UPCAST", ("g", 9), 4), "no range"), (("NOPE", g[0], 4), "unknown opt"),
                     (("UPCAST", g[0], 1), ">= 2"), (("UPCAST", g[0], True), ">= 2"), (("UPCAST", g[0], -4), ">= 2"), (("UPCAST", g[0], 4.0), ">= 2"),
                     (("UPCAST_R", g[0], 4), "reduce axis"), (("UPCAST", r, 4), "output axis"), (("SWAP", g[0], g[0]), "two different"),
                     (("UPCAST", g[0]), "unknown opt"), (["UPCAST", g[0], 4], "unknown opt")]:
    with pytest.raises(O.InvalidOpt, match=match): O.apply_opt(k, bad)
    with pytest.raises(ValueError): get_program(si.ast, dev.renderer, opts=(bad,))   # InvalidOpt is a ValueError
  O.apply_opt(k, ("UPCAST", g[1], 8))   # a fitting one still applies

@pytest.mark.needs_device
@pytest.mark.parametrize("poison", ['[["UPCAST",["g",1],7]]', '[["UPCAST",["g",5],4]]', '[["RM_RF",["g",0],4]]', '{"a":1}', '[1,2]',
                                    '[' * 50000 + ']' * 50000, "not json", "fifo"])
def test_poisoned_beam_entry_is_dropped_and_redone(tmp_path, poison):
  """`[["UPCAST",["g",1],7]]` (7 doesn't divide 64) made a 64x64 matmul's last column garbage."""
  from tinycore.engine import run
  a, b, si, dev = _matmul()
  with Context(CACHEDB=str(tmp_path)):
    path = beam_cache_path(dev.renderer, get_program(si.ast, dev.renderer, opts=()).src)
  os.makedirs(os.path.dirname(path))
  if poison == "fifo": os.mkfifo(path)
  else: open(path, "w").write(poison)
  run._runners.clear()
  try:
    with Context(BEAM=1, CACHEDB=str(tmp_path), BEAM_TIME_LIMIT=5.0):
      with pytest.warns(UserWarning, match="BEAM cache: dropping invalid entry"): out = (Tensor(a) @ Tensor(b)).numpy()
  finally: run._runners.clear()
  np.testing.assert_allclose(out, a @ b, atol=1e-4, rtol=1e-4)
  opts = json.loads(open(path).read())   # searched again and replaced by a valid entry
  assert isinstance(opts, list) and all(o[0] in O._AXIS_KIND for o in opts)   # any action kind apply_opt knows

@pytest.mark.needs_device
def test_cached_swap_entry_round_trips(tmp_path):
  """A cached SWAP (two axis tuples) used to come back with its second axis as a JSON list: a KeyError in every process."""
  from tinycore.engine import run
  a, b, si, dev = _matmul()
  with Context(CACHEDB=str(tmp_path)):
    path = beam_cache_path(dev.renderer, get_program(si.ast, dev.renderer, opts=()).src)
  os.makedirs(os.path.dirname(path))
  open(path, "w").write('[["UPCAST",["g",1],8],["SWAP",["g",0],["g",1]]]')
  run._runners.clear()
  try:
    with Context(BEAM=1, CACHEDB=str(tmp_path)), warnings.catch_warnings():
      warnings.simplefilter("error")
      out = (Tensor(a) @ Tensor(b)).numpy()
  finally: run._runners.clear()
  np.testing.assert_allclose(out, a @ b, atol=1e-4, rtol=1e-4)
