"""The LLM server under hostile and careless clients: every bad request gets its JSON error and 4xx status (never a
closed connection without an answer), stalled requests time out, a full queue says 503, a failing stream still ends
with an error event and [DONE], tokenizing doesn't wait for the model, and 50 concurrent clients see no resets."""
import http.client, json, socket, threading, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np, pytest
from tinycore.llm.testmodel import tiny_llama
from tinycore.llm.generate import LLM
from tinycore.llm.serve import make_server

pytestmark = pytest.mark.needs_device
CTX, TIMEOUT = 64, 1.0
HELLO = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}

@pytest.fixture(scope="module")
def llm(tmp_path_factory):
  p = str(tmp_path_factory.mktemp("srv") / "m.gguf")
  tiny_llama(p, ctx=256)
  m = LLM(p, max_context=CTX, chunk=8)
  list(m.generate(m.tok.encode("hello world"), 3))   # compile and capture before any timing
  return m

@pytest.fixture(scope="module")
def server(llm):
  with serving(llm, max_body=16384, request_timeout=TIMEOUT) as port: yield port

class serving:
  def __init__(self, llm, **limits): self.srv = make_server(llm, port=0, **limits)
  def __enter__(self):
    self.th = threading.Thread(target=self.srv.serve_forever, daemon=True); self.th.start()
    return self.srv.server_address[1]
  def __exit__(self, *a):
    self.srv.shutdown(); self.srv.server_close(); self.th.join(10)

def raw(port: int, data: bytes, timeout: float = 30) -> tuple[int, dict, bytes]:
  """Send bytes as they are; the status, headers and body of the answer (ConnectionError if there is none)."""
  with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
    s.sendall(data)
    r = http.client.HTTPResponse(s)
    r.begin()
    return r.status, dict(r.getheaders()), r.read()

def post(port: int, body, path="/v1/chat/completions", method="POST", timeout: float = 60) -> tuple[int, bytes]:
  data = body if isinstance(body, bytes) else json.dumps(body).encode()
  c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
  try:
    c.request(method, path, data, {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()
  finally: c.close()

def error_of(status: int, body: bytes, want: int) -> dict:
  assert status == want, (status, body[:300])
  err = json.loads(body)["error"]
  assert isinstance(err["message"], str) and err["message"]
  return err

def events(body: bytes) -> list[str]: return [l[len("data: "):] for l in body.decode().split("\n\n") if l.startswith("data: ")]

# ---- bad bodies and fields: 400 with the field named
BAD_BODIES = {b"{not json": None, b"[1, 2, 3]": None, b'"a string"': None, b"null": None, b"\xff\xfe\x00": None,
              b"[" * 8000 + b"]" * 8000: None, b"{}": "messages", b'{"messages": []}': "messages",
              b'{"messages": "hello"}': "messages", b'{"messages": [1]}': "messages[0]",
              b'{"messages": [{"role": "wizard", "content": "x"}]}': "messages[0].role",
              b'{"messages": [{"role": "user", "content": 5}]}': "messages[0].content",
              b'{"messages": [{"role": "user"}]}': "messages[0].content"}

@pytest.mark.parametrize("body", list(BAD_BODIES), ids=lambda b: b[:30].decode("latin-1"))
def test_bad_body_400(server, body):
  err = error_of(*post(server, body), 400)
  assert err["param"] == BAD_BODIES[body]

BAD_FIELDS = [("max_tokens", "5"), ("max_tokens", 0), ("max_tokens", -1), ("max_tokens", True), ("max_tokens", 1.5),
              ("max_tokens", CTX + 1), ("max_tokens", 10**30), ("max_completion_tokens", "many"), ("temperature", "hot"),
              ("temperature", -0.5), ("temperature", 3), ("temperature", [1]), ("top_k", -1), ("top_k", "3"), ("top_p", 0),
              ("top_p", 1.5), ("seed", "x"), ("seed", -1), ("seed", 2**64), ("seed", 1.5), ("seed", 10**400), ("stream", "yes"),
              ("stream", 1), ("n", 2), ("model", 7), ("stop", "\n")]

@pytest.mark.parametrize("key,value", BAD_FIELDS, ids=lambda v: repr(v)[:20])
@pytest.mark.parametrize("stream", [False, True])
def test_bad_field_400(server, key, value, stream):
  body = {**HELLO, "stream": stream, key: value}
  err = error_of(*post(server, body), 400)
  assert err["param"] == key and key in err["message"]

def test_non_finite_numbers_400(server):
  for lit in (b"NaN", b"Infinity", b"-Infinity", b"1e999"):
    err = error_of(*post(server, b'{"messages": [{"role": "user", "content": "hi"}], "temperature": ' + lit + b"}"), 400)
    assert err["param"] == "temperature"

def test_prompt_longer_than_context_400(server):
  long = {"messages": [{"role": "user", "content": "hello world " * 100}], "max_tokens": 4}   # ~200 tokens, context 64
  for stream in (False, True):
    err = error_of(*post(server, {**long, "stream": stream}), 400)
    assert err["code"] == "context_length_exceeded" and "64" in err["message"]
  huge = {"messages": [{"role": "user", "content": "x" * 15000}]}   # rejected by length alone, before tokenizing
  assert error_of(*post(server, huge), 400)["code"] == "context_length_exceeded"

# ---- routes, methods, sizes, framing
def test_routes_and_methods(server):
  error_of(*post(server, HELLO, path="/v1/nope"), 404)
  error_of(*post(server, b"", path="/", method="GET"), 404)
  error_of(*post(server, b"", method="GET"), 405)
  error_of(*post(server, HELLO, method="PUT"), 405)
  error_of(*post(server, b"", method="DELETE"), 405)
  error_of(*post(server, HELLO, path="/v1/models"), 405)
  st, _, body = raw(server, b"BREW /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
  assert st == 501 and "error" in json.loads(body)
  st, body = post(server, b"", path="/v1/models", method="GET")
  assert st == 200 and json.loads(body)["data"][0]["object"] == "model"

def test_oversized_body_413_is_answered(server):
  # declared far over the limit and never sent: the answer comes at once, and it arrives (no reset)
  st, hdr, body = raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n{")
  assert st == 413 and json.loads(body)["error"]["message"] and hdr.get("Connection") == "close"
  big = json.dumps({**HELLO, "pad": "x" * 20000}).encode()   # really sent, over the 16 KiB limit
  error_of(*post(server, big), 413)
  st, _, _ = raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\nExpect: 100-continue\r\n\r\n")
  assert st == 413

@pytest.mark.parametrize("headers,status", [(b"", 411), (b"Transfer-Encoding: chunked\r\n", 411), (b"Content-Length: abc\r\n", 400),
                                            (b"Content-Length: -5\r\n", 400), (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400)])
def test_body_framing(server, headers, status):
  st, _, body = raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
  assert st == status and json.loads(body)["error"]["message"]

def test_stalled_body_and_dripped_headers_time_out(server):
  t = time.perf_counter()
  st, _, body = raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"messa")
  assert st == 408 and json.loads(body)["error"]["message"]
  assert time.perf_counter() - t < TIMEOUT + 2
  # a byte at a time, each well inside the socket timeout: the whole-request deadline still ends it
  t = time.perf_counter()
  with socket.create_connection(("127.0.0.1", server), timeout=10) as s:
    try:
      for b in b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 100:
        s.send(bytes([b])); time.sleep(0.05)
    except OSError: pass   # the server hung up mid-drip
    try: rest = s.recv(4096)
    except OSError: rest = b""
  assert time.perf_counter() - t < TIMEOUT + 3
  assert rest.startswith(b"HTTP/1.1 408 ") and b"did not arrive" in rest

def test_keep_alive_then_valid_answers(server):
  c = http.client.HTTPConnection("127.0.0.1", server, timeout=60)
  try:
    got = []
    for _ in range(2):   # two requests on one connection
      c.request("POST", "/v1/chat/completions", json.dumps(HELLO), {"Content-Type": "application/json"})
      r = c.getresponse(); got.append((r.status, json.loads(r.read())))
  finally: c.close()
  assert [s for s, _ in got] == [200, 200]
  res = got[0][1]
  assert res["choices"][0]["message"]["content"] == got[1][1]["choices"][0]["message"]["content"]   # greedy
  assert 1 <= res["usage"]["completion_tokens"] <= 4
  st, body = post(server, {**HELLO, "stream": True})
  ev = events(body)
  assert st == 200 and ev[-1] == "[DONE]"
  text = "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in ev[:-1])
  assert text == res["choices"][0]["message"]["content"]

def test_max_tokens_clamped_to_context(server):
  st, body = post(server, {"messages": [{"role": "user", "content": "hello world " * 8}], "max_tokens": CTX})
  res = json.loads(body)
  assert st == 200 and res["usage"]["total_tokens"] <= CTX + 1

# ---- failures during generation, the queue
def test_stream_failing_midway_ends_with_error_and_done(server, llm, monkeypatch):
  calls, real = [0], llm.decode
  def flaky(tok, pos):
    calls[0] += 1
    if calls[0] >= 2: raise RuntimeError("device lost")
    return real(tok, pos)
  monkeypatch.setattr(llm, "decode", flaky)
  st, body = post(server, {**HELLO, "max_tokens": 8, "temperature": 1.0, "seed": 0, "stream": True})
  ev = events(body)
  assert st == 200 and ev[-1] == "[DONE]"
  assert json.loads(ev[-2])["error"]["type"] == "server_error" and calls[0] == 2   # stopped at the failure
  monkeypatch.setattr(llm, "decode", real)
  assert post(server, HELLO)[0] == 200   # the model's turn was given back

def test_non_stream_failure_is_500_and_server_survives(server, llm, monkeypatch):
  monkeypatch.setattr(llm, "decode", lambda tok, pos: (_ for _ in ()).throw(RuntimeError("boom")))
  error_of(*post(server, {**HELLO, "temperature": 1.0, "seed": 1}), 500)
  monkeypatch.undo()
  assert post(server, HELLO)[0] == 200

def _block_model(llm, monkeypatch):
  """Make the next generation hold the model until the returned event is set."""
  release, entered, real = threading.Event(), threading.Event(), llm.prefill
  def slow(toks, start=0):
    entered.set(); release.wait(30)
    return real(toks, start)
  monkeypatch.setattr(llm, "prefill", slow)
  return release, entered

def test_full_queue_503_and_tokenizing_outside_the_model(llm, monkeypatch):
  with serving(llm, max_waiting=1, request_timeout=5) as port, ThreadPoolExecutor(4) as ex:
    release, entered = _block_model(llm, monkeypatch)
    tokenized, real_chat = [], llm.chat_tokens
    monkeypatch.setattr(llm, "chat_tokens", lambda msgs: (tokenized.append(msgs[-1]["content"]), real_chat(msgs))[1])
    first = ex.submit(post, port, HELLO)
    assert entered.wait(30)
    second = ex.submit(post, port, {**HELLO, "messages": [{"role": "user", "content": "the world"}]})   # waits its turn
    deadline = time.time() + 30
    while "the world" not in tokenized and time.time() < deadline: time.sleep(0.02)
    assert "the world" in tokenized and not first.done()   # tokenized while the model was busy with the first
    time.sleep(0.2)
    err = error_of(*post(port, HELLO), 503)   # one running, one waiting: full
    assert err["code"] == "server_busy"
    release.set()
    assert first.result(60)[0] == 200 and second.result(60)[0] == 200

def test_client_that_left_the_queue_is_not_served(llm, monkeypatch):
  ctx = serving(llm, request_timeout=5)
  with ctx as port, ThreadPoolExecutor(2) as ex:
    release, entered = _block_model(llm, monkeypatch)
    blocked_prefill, calls = llm.prefill, []
    monkeypatch.setattr(llm, "prefill", lambda toks, start=0: (calls.append(len(toks)), blocked_prefill(toks, start))[1])
    first = ex.submit(post, port, HELLO)
    assert entered.wait(30)
    body = json.dumps(HELLO).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    queue = ctx.srv.queue
    deadline = time.time() + 30
    while len(queue.waiting) == 0 and time.time() < deadline: time.sleep(0.02)
    s.close()   # gives up while waiting
    release.set()
    assert first.result(60)[0] == 200
    while (queue.busy or queue.waiting) and time.time() < deadline: time.sleep(0.02)
    assert len(calls) == 1   # only the first request reached the model

def test_too_many_messages_400(server):
  msgs = [{"role": "user", "content": ""}] * (CTX + 1)
  assert error_of(*post(server, {"messages": msgs}), 400)["code"] == "context_length_exceeded"

def test_connection_cap_503(llm):
  with serving(llm, max_connections=2, request_timeout=5) as port:
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    try:
      time.sleep(0.2)
      st, hdr, body = raw(port, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
      assert st == 503 and hdr.get("Retry-After") == "1"
    finally:
      for s in idle: s.close()

# ---- load
def load(port: int, clients: int, per_client: int, body: dict) -> dict:
  """Each client opens a fresh connection per request. Counts statuses and connection failures; latencies in s."""
  def one(_):
    t = time.perf_counter()
    try: st, b = post(port, body, timeout=120)
    except (ConnectionError, OSError) as e: return type(e).__name__, time.perf_counter() - t, 0
    toks = json.loads(b)["usage"]["completion_tokens"] if st == 200 else 0
    return st, time.perf_counter() - t, toks
  t = time.perf_counter()
  with ThreadPoolExecutor(clients) as ex: res = list(ex.map(one, range(clients * per_client)))
  wall = time.perf_counter() - t
  lat = np.array([r[1] for r in res])
  status: dict = {}
  for r in res: status[r[0]] = status.get(r[0], 0) + 1
  return {"status": status, "wall_s": wall, "p50_s": float(np.percentile(lat, 50)), "p99_s": float(np.percentile(lat, 99)),
          "tok_s": sum(r[2] for r in res) / wall}

def test_fifty_concurrent_clients_no_resets(llm):
  with serving(llm, max_waiting=256, request_timeout=10) as port:
    r = load(port, 50, 3, {**HELLO, "max_tokens": 3})
  print("\nload 50 clients x 3:", r)
  assert r["status"] == {200: 150}, r["status"]   # no resets, no 5xx (the queue holds them all)
  assert r["wall_s"] < 60

# ---- the command line
@pytest.mark.parametrize("args,opt", [(["--chunk", "-3"], "--chunk"), (["--chunk", "0"], "--chunk"), (["--max-context", "1"], "--max-context"),
                                      (["--temperature", "nan"], "--temperature"), (["--temperature", "-1"], "--temperature"),
                                      (["--max-tokens", "x"], "--max-tokens"), (["--port", "70000"], "--port"), (["--seed", "-2"], "--seed"),
                                      (["--top-k", "-1"], "--top-k"), (["--top-p", "0"], "--top-p"),
                                      (["--request-timeout", "inf"], "--request-timeout")])
def test_cli_rejects_bad_arguments(tmp_path, capsys, args, opt):
  from tinycore.llm.__main__ import main
  p = str(tmp_path / "m.gguf"); tiny_llama(p)
  with pytest.raises(SystemExit) as e: main(["--model", p, *args])
  err = capsys.readouterr().err
  assert e.value.code == 2 and opt in err and "Traceback" not in err, err

def test_cli_bad_model_and_long_prompt(tmp_path, capsys):
  from tinycore.llm.__main__ import main
  bad = tmp_path / "bad.gguf"; bad.write_bytes(b"GGUF" + b"\xff" * 64)
  assert main(["--model", str(bad)]) == 1 and "can't load" in capsys.readouterr().err
  p = str(tmp_path / "m.gguf"); tiny_llama(p)
  with pytest.raises(SystemExit) as e: main(["--model", p, "--max-context", "8", "--prompt", "hello world " * 20])
  assert e.value.code == 2 and "--prompt" in capsys.readouterr().err

def test_llm_rejects_bad_chunk_and_arguments(llm, tmp_path):
  p = str(tmp_path / "m.gguf"); tiny_llama(p)
  for chunk in (-3, 0, 2.5):
    with pytest.raises(ValueError, match="chunk"): LLM(p, max_context=32, chunk=chunk)
  toks = llm.tok.encode("hello")
  for kw, word in ((dict(temperature=float("nan")), "temperature"), (dict(top_k=-1), "top_k"), (dict(seed=-1), "seed"),
                   (dict(max_tokens=-1), "max_tokens")):
    with pytest.raises(ValueError, match=word): list(llm.generate(toks, **{"max_tokens": 2, **kw}))
  with pytest.raises(ValueError, match="vocabulary"): list(llm.generate([10**6], 2))
  with pytest.raises(ValueError, match="empty"): list(llm.generate([], 2))
  with pytest.raises(ValueError, match="context"): list(llm.generate(toks * CTX, 2))

def test_top_p_keeps_the_nucleus():
  rng = np.random.default_rng(0)
  for _ in range(20):
    logits = rng.standard_normal(50).astype(np.float32)
    assert LLM.sample(logits, 1.0, 0, rng, top_p=1e-6) == int(logits.argmax())
    p = np.exp(logits - logits.max()); p /= p.sum()
    order = np.argsort(-p)
    nucleus = set(order[:np.argmax(np.cumsum(p[order]) >= 0.5) + 1].tolist())   # smallest set with mass >= 0.5
    assert {LLM.sample(logits, 1.0, 0, rng, top_p=0.5) for _ in range(200)} <= nucleus

def test_refused_body_is_not_read_as_the_next_request(server):
  # a 404 for a POST with a body: the body is still in the connection, so the server must not keep it alive
  evil = b'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'
  with socket.create_connection(("127.0.0.1", server), timeout=30) as s:
    s.sendall(b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(evil) + evil)
    r = http.client.HTTPResponse(s); r.begin(); r.read()
    assert r.status == 404 and r.getheader("Connection") == "close"
    s.settimeout(5)
    try: assert s.recv(4096) == b""   # nothing more: the smuggled GET was not answered
    except ConnectionResetError: pass

def test_messages_the_template_refuses_400(server, llm, monkeypatch):
  # a model whose template has no system role (gemma's raises): the client's messages are at fault, so 400, not 500
  monkeypatch.setitem(llm.kv, "tokenizer.chat_template", "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
                      "{% endif %}{% for m in messages %}{{ m['content'] }}{% endfor %}")
  err = error_of(*post(server, {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "max_tokens": 2}), 400)
  assert "System role not supported" in err["message"] and err["param"] == "messages"
  assert post(server, HELLO)[0] == 200   # the same template with acceptable messages
