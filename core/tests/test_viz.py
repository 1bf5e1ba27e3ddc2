"""VIZ=1 and PROFILE=1: what the recorder keeps of a graph_rewrite and of a compiled kernel, replaying a rewrite step by
step from the saved node table, the trace file (round trip, hostile files), the Chrome trace's schema, the server (bad
paths are 404, a 100k-event profile streams in well under a second). `tinyctl viz` is tested in cli/tests, the page
itself in a browser by test_viz_browser.py."""
import json, os, subprocess, sys, threading, time, http.client, inspect
import pytest
from tinycore.uop import UOp, Ops, Variable
from tinycore.dtype import dtypes
from tinycore.rewrite import UPat, PatternMatcher, graph_rewrite
from tinycore.helpers import Context
from tinycore import rewrite
from tinycore.viz import switch
from tinycore.viz.trace import build_trace, save_trace, load_trace, validate_trace, TraceError
from tinycore.viz.replay import TraceIndex
from tinycore.viz.server import make_server
from _viz_fixtures import record_mlp_step, synthetic_trace

def alu(op, *src): return UOp(op, src[0].dtype, tuple(src))
def c(v): return UOp.const(dtypes.index, v)
x, y = Variable("x", 0, 9), Variable("y", 0, 9)
RULE_LINE = inspect.currentframe().f_lineno + 2   # the line of the first rule below
fold = PatternMatcher([
  (UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(dtypes.index, 0))), lambda a: a),
  (UPat(Ops.MUL, src=(UPat.var("a"), UPat.const(dtypes.index, 1))), lambda a: a),
  (UPat(Ops.MAX, src=(UPat.var("a"), UPat.var("a"))), lambda a: a),
])

@pytest.fixture(autouse=True)
def fresh():
  switch.forget()
  yield
  switch.forget()

def recorded(fn):
  with Context(VIZ=1): out = fn()
  return out, switch._made["recorder"]

# ---- the recorder
def test_off_records_nothing_and_costs_one_check():
  assert rewrite.viz_recorder is None and switch.profiler is None
  graph_rewrite(alu(Ops.ADD, x, c(0)), fold)
  assert "recorder" not in switch._made

def test_rewrite_input_steps_with_rule_locations_and_output():
  expr = alu(Ops.MAX, alu(Ops.MUL, alu(Ops.ADD, x, c(0)), c(1)), alu(Ops.ADD, y, c(0)))
  out, rec = recorded(lambda: graph_rewrite(UOp(Ops.SINK, dtypes.void, (expr,)), fold))
  assert rewrite.viz_recorder is None, "leaving Context(VIZ=1) switches recording off"
  assert out.src[0] is alu(Ops.MAX, x, y)
  (r,) = rec.rewrites
  assert r.matcher == "fold" and r.caller.split(":")[0].endswith("test_viz.py") and r.caller.endswith("<lambda>") and r.kernel is None
  assert r.input.src[0] is expr and r.output is out
  where = [w for w, _, _ in r.steps]
  # bottom-up: x+0 (ADD rule), then its *1 (MUL rule), then y+0; MAX(x, y) is not MAX(a, a)
  assert where == [f"test_viz.py:{RULE_LINE}", f"test_viz.py:{RULE_LINE + 1}", f"test_viz.py:{RULE_LINE}"]
  assert [(b.op, a) for _, b, a in r.steps] == [(Ops.ADD, x), (Ops.MUL, x), (Ops.ADD, y)]

def test_nested_rewrites_keep_their_own_steps():
  inner = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(dtypes.index, 0))), lambda a: a)])
  def via_inner(m): return graph_rewrite(m.src[0], inner) if m.src[0].op is Ops.ADD else None   # a rule that rewrites itself
  outer = PatternMatcher([(UPat(Ops.MUL, name="m"), via_inner)])
  _, rec = recorded(lambda: graph_rewrite(alu(Ops.MUL, alu(Ops.ADD, x, c(0)), c(2)), outer))
  assert [r.matcher for r in rec.rewrites] == ["outer", "inner"] and [r.depth for r in rec.rewrites] == [0, 1]
  assert len(rec.rewrites[1].steps) == 1 and rec.rewrites[1].steps[0][2] is x
  assert len(rec.rewrites[0].steps) == 1 and rec.rewrites[0].steps[0][2] is x

class _Terminal:
  def isatty(self): return True
  def write(self, s): return len(s)
  def flush(self): pass

def test_at_exit_serves_in_a_terminal_else_prints_the_command(monkeypatch, tmp_path, capsys):
  with Context(VIZ=1): graph_rewrite(alu(Ops.ADD, x, c(0)), fold)
  import tinycore.viz.server as server
  served = []
  monkeypatch.setattr(server, "serve", lambda trace, port, source: served.append((len(trace["rewrites"]), port, source)))
  path = str(tmp_path / "v.json")
  monkeypatch.setenv("VIZ_FILE", path); monkeypatch.setenv("VIZ_PORT", "8123"); monkeypatch.delenv("VIZ_NOSERVE", raising=False)
  switch.report_at_exit()   # pytest's stdin is not a terminal: save and name the command, never block
  assert served == [] and f"tinyctl viz {path}" in capsys.readouterr().err
  assert len(load_trace(path)["rewrites"]) == 1
  monkeypatch.setattr(sys, "stdin", _Terminal()); monkeypatch.setattr(sys, "stdout", _Terminal())
  switch.report_at_exit()
  assert served == [(1, 8123, path)]
  monkeypatch.setenv("VIZ_NOSERVE", "1")
  switch.report_at_exit()
  assert len(served) == 1

def test_a_compile_that_raised_does_not_keep_its_kernel_open():
  from tinycore.viz.recorder import Recorder
  rec = Recorder()
  def rewrite_(u): return rec.graph_rewrite(lambda *a: a[0], u, fold, None, False, 100)   # the frame rewrite.graph_rewrite adds
  def compile_kernel(fail):
    rec.begin_kernel(UOp(Ops.SINK, dtypes.void, ()), "CPU")
    rewrite_(alu(Ops.ADD, x, c(0)))   # inside the compile
    if fail: raise RuntimeError("compiler error")
  with pytest.raises(RuntimeError): compile_kernel(True)
  rewrite_(alu(Ops.ADD, y, c(0)))     # the scheduler's, after the failure
  assert [r.kernel for r in rec.rewrites] == [0, None]
  assert rec.kernels[0].name == "(compile failed)" and "raised" in rec.kernels[0].error

# ---- replay from the node table
def test_replay_every_step_reaches_the_recorded_output():
  exprs = [alu(Ops.ADD, alu(Ops.MUL, alu(Ops.ADD, v, c(0)), c(1)), alu(Ops.MAX, v, v)) for v in (x, y)]
  sink = UOp(Ops.SINK, dtypes.void, tuple(exprs))
  _, rec = recorded(lambda: graph_rewrite(sink, fold))
  t = build_trace(rec)
  idx = TraceIndex(t)
  r = t["rewrites"][0]
  assert len(r["steps"]) == 6
  # one step at a time, from the input: each replayed graph contains the step's `before` (else replay lost its place)
  for k, (where, before, after) in enumerate(r["steps"]):
    assert before in _reachable(idx, idx.sink_after(0, k)), f"step {where} rewrites a node that is not in the replayed graph"
    assert after in _reachable(idx, idx._apply(r["input"], {b: a for _, b, a in r["steps"][:k + 1]}))
  assert idx._apply(r["input"], {b: a for _, b, a in r["steps"]}) == r["output"]
  assert idx.sink_after(0, 3) == idx.sink_after(0, 3) and idx.sink_after(0, 6) == r["output"]
  view = idx.rewrite_view(0, 2)
  assert view["rule"] == f"test_viz.py:{RULE_LINE + 1}" and view["changed"] and view["before"][0].split()[1] == "MUL"
  assert {n["op"] for n in view["graph"]["nodes"]} >= {"SINK", "ADD", "MAX"}

def _reachable(idx, root):
  seen, stack = {root}, [root]
  while stack:
    for s in idx.rows[stack.pop()][3]:
      if s not in seen: seen.add(s); stack.append(s)
  return seen

@pytest.fixture(scope="module")
def mlp_trace():
  switch.forget()
  return record_mlp_step()

@pytest.mark.needs_device
def test_mlp_step_kernels_programs_and_profile(mlp_trace):
  t = mlp_trace
  validate_trace(t)
  assert len(t["kernels"]) >= 5 and t["profile"]
  for k in t["kernels"]:
    assert k["name"] and k["src"] and k["program"] and k["size"] > 0 and not k["error"], k["name"]
    assert k["name"] in k["src"] and t["uops"][k["ast"]][0] == "SINK"
  assert any(k["opts"] for k in t["kernels"]), "the CPU heuristic's optimizations are recorded"
  names = {k["name"] for k in t["kernels"]}
  runs = [e for e in t["profile"] if e[2] == "kernel"]
  assert {e[0] for e in runs} <= names and all(e[4] > 0 and e[1].startswith("CPU") for e in runs)
  assert all(e[8] >= e[7] >= 0 for e in t["profile"]) and max(e[8] for e in t["profile"]) > 0   # memory high-water mark
  assert any(e[5] > 0 and e[6] > 0 for e in runs)
  # every rewrite that ran while compiling a kernel is grouped under it, and each replays to its recorded output
  assert {r["kernel"] for r in t["rewrites"]} - {None} == set(range(len(t["kernels"])))
  assert {r["stage"] for r in t["rewrites"] if r["kernel"] is not None} == {"codegen"}
  assert {r["stage"] for r in t["rewrites"] if r["kernel"] is None} >= {"schedule"}
  idx = TraceIndex(t)
  for i, r in enumerate(t["rewrites"]):
    if r["steps"]:
      cur = idx._apply(r["input"], {b: a for _, b, a in r["steps"]})
      assert cur == r["output"], f"rewrite {i} ({r['caller']}) does not replay to its output"

# ---- the trace file
@pytest.mark.needs_device
def test_trace_round_trip(tmp_path, mlp_trace):
  p = tmp_path / "t.json"
  save_trace(mlp_trace, str(p))
  assert load_trace(str(p)) == json.loads(json.dumps(mlp_trace))

@pytest.mark.parametrize("content, says", [
  ("not json", "not JSON"), ("[]", "not a tinycore recording"), ('{"format": "tinycore-viz", "version": 99}', "version 99"),
  ('{"format": "tinycore-viz", "version": 1, "uops": {}, "rewrites": [], "kernels": [], "profile": []}', "'uops' must be a list"),
  ('{"format": "tinycore-viz", "version": 1, "uops": [["CONST", "int", "1", [0]]], "rewrites": [], "kernels": [], "profile": []}',
   "uops[0]: a source id that is not an earlier UOp"),   # a self-loop (or any cycle) would hang a walk
  ('{"format": "tinycore-viz", "version": 1, "uops": [["CONST", "int", "1", []]], "rewrites": [{"matcher": "m", "caller": "c", "stage": "s", '
   '"kernel": null, "top_down": false, "depth": 0, "input": 0, "output": 5, "steps": []}], "kernels": [], "profile": []}', "rewrites[0].output"),
  ('{"format": "tinycore-viz", "version": 1, "uops": [], "rewrites": [], "kernels": [], "profile": [["k", "CPU", "kernel", "0", 1, 1, 1, 1, 1]]}',
   "profile[0]"),
  ("[" * 100000, "not JSON"),
])
def test_hostile_trace_files_are_refused_with_the_field(tmp_path, content, says):
  p = tmp_path / "bad.json"
  p.write_text(content)
  with pytest.raises(TraceError, match="bad.json") as e: load_trace(str(p))
  assert says in str(e.value)

def test_not_a_regular_file(tmp_path):
  with pytest.raises(TraceError, match="no such file"): load_trace(str(tmp_path / "missing.json"))
  with pytest.raises(TraceError, match="can't read"): load_trace(str(tmp_path))
  if hasattr(os, "mkfifo"):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(TraceError, match="not a regular file"): load_trace(str(tmp_path / "fifo"))   # no hang

# ---- VIZ=1 / PROFILE=1 end to end, in a fresh process
SCRIPT = ("from tinycore import Tensor; import numpy as np; a = Tensor(np.arange(64, dtype=np.float32).reshape(8, 8)); "
          "print((a @ a).relu().sum().item())")

def _run(env, tmp_path):
  env = {**os.environ, "CACHEDB": str(tmp_path / "cache"), **env}
  for k in ("VIZ", "PROFILE", "VIZ_FILE", "PROFILE_FILE"):
    if k not in env or env[k] is None: env.pop(k, None)
  return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

@pytest.mark.needs_device
def test_profile_writes_a_chrome_trace(tmp_path):
  path = tmp_path / "prof.json"
  out = _run({"PROFILE": "1", "PROFILE_FILE": str(path), "VIZ": None}, tmp_path)
  assert out.returncode == 0, out.stderr
  assert f"written to {path}" in out.stderr and "tinyctl viz" not in out.stderr   # PROFILE alone: no VIZ recording
  t = json.loads(path.read_text())
  assert set(t) >= {"traceEvents", "displayTimeUnit"}
  ev = t["traceEvents"]
  procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
  assert procs and all(isinstance(p, int) for p in procs) and all(n.startswith("CPU") for n in procs.values())
  runs = [e for e in ev if e["ph"] == "X"]
  assert runs, "no kernel events"
  for e in runs:
    assert isinstance(e["name"], str) and e["pid"] in procs and isinstance(e["tid"], int)
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and isinstance(e["dur"], (int, float)) and e["dur"] > 0
    assert {"flops", "bytes", "GFLOP/s", "GB/s"} <= set(e["args"]) and e["cat"] in ("kernel", "copy")
  assert [e["ts"] for e in runs] == sorted(e["ts"] for e in runs)
  counters = [e for e in ev if e["ph"] == "C"]
  assert counters and all(set(e["args"]) == {"used MB", "peak MB"} and e["args"]["peak MB"] >= e["args"]["used MB"] for e in counters)

@pytest.mark.needs_device
def test_profile_in_a_context_block_is_written_at_exit(tmp_path):
  path = tmp_path / "ctx.json"
  code = ("from tinycore import Tensor, Context\nwith Context(PROFILE=1): (Tensor([1.0, 2.0]) * 3).sum().item()\n"
          "(Tensor([5.0]) + 1).item()\n")   # after the block: not profiled
  env = {k: v for k, v in os.environ.items() if k not in ("VIZ", "PROFILE")}
  out = subprocess.run([sys.executable, "-c", code], env={**env, "PROFILE_FILE": str(path), "CACHEDB": str(tmp_path / "c")},
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
  assert out.returncode == 0, out.stderr
  runs = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
  # the block's reduce kernel(s) only, not the elementwise E_1 after the block
  assert runs and all(e["name"].startswith("r") for e in runs), [e["name"] for e in runs]

@pytest.mark.needs_device
def test_viz_in_a_script_saves_and_names_the_command(tmp_path):
  path = tmp_path / "viz.json"
  out = _run({"VIZ": "1", "VIZ_FILE": str(path), "PROFILE": None}, tmp_path)
  assert out.returncode == 0, out.stderr
  assert f"tinyctl viz {path}" in out.stderr   # not a terminal: it does not block serving
  t = load_trace(str(path))
  assert t["kernels"] and t["rewrites"] and t["profile"]

# ---- the server
@pytest.fixture
def server():
  httpd = make_server(synthetic_trace(100_000))
  threading.Thread(target=httpd.serve_forever, daemon=True).start()
  yield httpd.server_address[1]
  httpd.shutdown(); httpd.server_close()

def get(port, path, method="GET", host=None):
  conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
  conn.putrequest(method, path, skip_host=True)
  conn.putheader("Host", host or f"127.0.0.1:{port}")
  conn.endheaders()
  res = conn.getresponse()
  body = res.read()
  conn.close()
  return res.status, dict(res.getheaders()), body

@pytest.mark.parametrize("path", ["/static/../viz/server.py", "/static/..%2fserver.py", "/static/%2e%2e/trace.py", "/../../etc/passwd",
                                  "//etc/passwd", "/static/", "/static/dagre.min.js.map", "/static/subdir/app.js", "/static/app.js/",
                                  "/static/.hidden", "/static/app.js%00.png", "/api/kernel/0", "/api/rewrite/1", "/api/rewrite/0?step=-1",
                                  "/api/rewrite/0?step=abc", "/api/rewrite/99999999999", "/api/graph/4", "/api/kernel/-1", "/api/summary/x",
                                  "/server.py", "/viz/static/app.js", "http://evil.example/api/summary"])
def test_bad_paths_are_404(server, path):
  status, headers, body = get(server, path)
  assert status == 404, (path, status, body[:200])
  assert b"root:" not in body and b"import" not in body

def test_a_forged_cycle_is_an_error_not_a_hang():
  t = synthetic_trace(1)
  t["rewrites"][0]["steps"] = [["a.py:1", 2, 3], ["a.py:2", 3, 2]]   # 2 -> 3 -> 2: no real rewrite does this
  t["rewrites"][0]["output"] = 2
  validate_trace(t)
  httpd = make_server(t)
  threading.Thread(target=httpd.serve_forever, daemon=True).start()
  try:
    status, _, body = get(httpd.server_address[1], "/api/rewrite/0?step=1")
    assert status == 200 and json.loads(body)["graph"]["root"] == 3
    # step 2 replays the whole chain only when it is not the last step: add one so it must be replayed
    t["rewrites"][0]["steps"].append(["a.py:3", 0, 1])
    status, _, body = get(httpd.server_address[1], "/api/rewrite/0?step=2")
    assert status == 500 and b"cycle" in body
    assert get(httpd.server_address[1], "/api/summary")[0] == 200   # still serving
  finally: httpd.shutdown(); httpd.server_close()

def test_wrong_host_and_methods(server):
  assert get(server, "/api/summary", host="evil.example:80")[0] == 421   # DNS rebinding
  assert get(server, "/api/summary", host="localhost")[0] == 200
  for m in ("POST", "PUT", "DELETE"): assert get(server, "/", method=m)[0] == 501

def test_pages_and_views(server):
  status, headers, body = get(server, "/")
  assert status == 200 and headers["Content-Type"].startswith("text/html") and b"dagre.min.js" in body
  assert "default-src 'self'" in headers["Content-Security-Policy"] and headers["X-Content-Type-Options"] == "nosniff"
  for name, kind in (("app.js", "text/javascript"), ("dagre.min.js", "text/javascript"), ("style.css", "text/css"),
                     ("dagre.LICENSE.txt", "text/plain")):
    status, headers, body = get(server, "/static/" + name)
    assert status == 200 and headers["Content-Type"].startswith(kind) and body
  s = json.loads(get(server, "/api/summary")[2])
  assert s["profile_events"] == 100_000 and s["kernels"] == [] and s["rewrites"][0]["steps"] == 1
  v = json.loads(get(server, "/api/rewrite/0?step=1")[2])
  assert v["step"] == 1 and v["rule"] == "symbolic.py:10" and v["graph"]["root"] == 3 and v["changed"] == [3] and v["focus"] == 3
  assert v["before"][0].startswith("x2 ADD") and v["after"] == ["x3 CONST dtypes.int 3"]
  assert json.loads(get(server, "/api/rewrite/0?step=7")[2])["step"] == 1   # past the end: the last step

def test_100k_event_profile_streams_fast(server):
  # the bound: 2 s, or on a loaded machine (CI shares 2 cores) 10x a plain JSON round trip of the same rows here, which
  # still fails an accidentally quadratic server
  events = synthetic_trace(100_000)["profile"]
  t0 = time.perf_counter()
  json.loads(json.dumps(events))
  bound = max(2.0, 10 * (time.perf_counter() - t0))
  t0 = time.perf_counter()
  status, headers, body = get(server, "/api/profile")
  dt = time.perf_counter() - t0
  assert status == 200 and headers.get("Transfer-Encoding") == "chunked"
  data = json.loads(body)
  assert data["devices"] == ["CPU", "NV:1", "AMD"] and len(data["events"]) == 100_000
  assert data["events"][1][:3] == ["r_1_1", "NV:1", "kernel"]
  assert dt < bound, f"100k events took {dt:.2f} s to serve (bound {bound:.2f} s)"
  status, headers, body = get(server, "/api/trace")
  assert status == 200 and len(json.loads(body)["profile"]) == 100_000
