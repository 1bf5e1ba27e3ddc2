"""`tinyctl viz FILE`: a valid recording is served on 127.0.0.1 (the URL printed), a bad one is one line and exit 1."""
import json, subprocess, sys, http.client

def recording(n_events: int) -> dict:
  uops = [["CONST", "dtypes.int", "1", []], ["CONST", "dtypes.int", "2", []], ["ADD", "dtypes.int", "", [0, 1]], ["CONST", "dtypes.int", "3", []]]
  rewrites = [{"matcher": "symbolic", "caller": "test", "stage": "schedule", "kernel": None, "top_down": False, "depth": 0, "input": 2,
               "output": 3, "steps": [["symbolic.py:10", 2, 3]]}]
  profile = [["E_4", "CPU", "kernel", i * 1000, 500, 4, 48, 1024, 2048] for i in range(n_events)]
  return {"format": "tinycore-viz", "version": 1, "uops": uops, "rewrites": rewrites, "kernels": [], "profile": profile}

def tinyctl(*args): return [sys.executable, "-m", "tinyctl.app", *args]

def test_refuses_a_bad_file(tmp_path):
  p = tmp_path / "x.json"
  p.write_text('{"format": "tinycore-viz", "version": 1, "uops": [["A", "int", "", [3]]], "rewrites": [], "kernels": [], "profile": []}')
  out = subprocess.run(tinyctl("viz", str(p)), capture_output=True, text=True, timeout=60)
  assert out.returncode == 1 and "uops[0]: a source id that is not an earlier UOp" in out.stderr and "Traceback" not in out.stderr
  out = subprocess.run(tinyctl("viz", str(tmp_path / "missing.json")), capture_output=True, text=True, timeout=60)
  assert out.returncode == 1 and "no such file" in out.stderr

def test_serves_a_file(tmp_path):
  p = tmp_path / "t.json"
  p.write_text(json.dumps(recording(50)))
  proc = subprocess.Popen(tinyctl("viz", str(p)), stderr=subprocess.PIPE, text=True)
  try:
    line = proc.stderr.readline()
    assert "serving 0 kernels, 1 rewrites, 50 profile events" in line, line
    port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/api/summary")
    assert json.loads(conn.getresponse().read())["profile_events"] == 50
    conn.request("GET", "/static/../../etc/passwd")
    assert conn.getresponse().status == 404
    conn.close()
  finally:
    proc.terminate(); proc.wait(10)
