"""An OpenAI-compatible `/v1/chat/completions` (plain JSON, or `stream: true` as server-sent events) and `/v1/models`,
stdlib only. Every request is treated as hostile: the connection has a deadline for its headers and body, the body a
size limit, every field is checked before the model sees it, and each failure is a JSON error with its 4xx status.
One model with one KV cache serves one request at a time; the others wait in a first-come-first-served queue of
bounded length (503 beyond it), and tokenizing happens in the request's own thread, outside that queue."""
from __future__ import annotations
import json, logging, math, re, select, socket, threading, time, uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from tinycore.llm.tokenizer import TextStream
from tinycore.llm.chat import MessagesRejected

log = logging.getLogger("tinycore.llm.serve")
ROLES = ("system", "developer", "user", "assistant", "tool")

class RequestError(Exception):
  """A request the server refuses: its HTTP status and a message in the client's terms (the field, what was wrong)."""
  def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
    super().__init__(message)
    self.status, self.message, self.param, self.code = status, message, param, code
  def body(self) -> dict:
    kind = "invalid_request_error" if self.status < 500 else "server_error"
    return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

# ---- the request body

@dataclass
class ChatRequest:
  messages: list[dict]; max_tokens: int | None; temperature: float; top_k: int; top_p: float; seed: int | None; stream: bool

def _field(req: dict, key: str, kinds: tuple, what: str, ok=lambda v: True, default=None):
  v = req.get(key)
  if v is None: return default
  # bool is an int to Python, never to a client: `"max_tokens": true` is a mistake, not 1
  try: good = isinstance(v, bool) == (bool in kinds) and isinstance(v, kinds) and ok(v)
  except (OverflowError, ValueError): good = False   # an integer too big for a float
  if not good:
    raise RequestError(400, f"'{key}' must be {what}, got {json.dumps(v)[:80]}", key)
  return v

def _content(m: dict, i: int) -> str:
  c = m.get("content")
  if isinstance(c, str): return c
  if c is None and m.get("role") == "assistant": return ""
  if isinstance(c, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in c):
    return "".join(p["text"] for p in c)
  raise RequestError(400, f"messages[{i}].content must be a string or a list of {{type: text, text}} parts", f"messages[{i}].content")

def parse_chat_request(body: bytes, max_context: int, vocab: int) -> ChatRequest:
  try: req = json.loads(body)
  except (ValueError, RecursionError) as e: raise RequestError(400, f"the body is not valid JSON ({type(e).__name__}: {str(e)[:100]})") from None
  if not isinstance(req, dict): raise RequestError(400, f"the body must be a JSON object, got a JSON {type(req).__name__}")
  msgs = req.get("messages")
  if not isinstance(msgs, list) or not msgs: raise RequestError(400, "'messages' must be a non-empty list of {role, content}", "messages")
  out = []
  for i, m in enumerate(msgs):
    if not isinstance(m, dict): raise RequestError(400, f"messages[{i}] must be an object {{role, content}}", f"messages[{i}]")
    if m.get("role") not in ROLES: raise RequestError(400, f"messages[{i}].role must be one of {', '.join(ROLES)}", f"messages[{i}].role")
    out.append({"role": m["role"], "content": _content(m, i)})
  isint = (int,)
  mt = _field(req, "max_tokens", isint, f"an integer from 1 to {max_context}", lambda v: 1 <= v <= max_context)
  mct = _field(req, "max_completion_tokens", isint, f"an integer from 1 to {max_context}", lambda v: 1 <= v <= max_context)
  temp = _field(req, "temperature", (int, float), "a number from 0 to 2", lambda v: math.isfinite(v) and 0 <= v <= 2, 0.0)
  top_p = _field(req, "top_p", (int, float), "a number in (0, 1]", lambda v: math.isfinite(v) and 0 < v <= 1, 1.0)
  top_k = _field(req, "top_k", isint, f"an integer from 0 to {vocab}", lambda v: 0 <= v <= vocab, 0)
  seed = _field(req, "seed", isint, "an integer from 0 to 2**63-1", lambda v: 0 <= v < 2**63)
  stream = _field(req, "stream", (bool,), "true or false", default=False)
  _field(req, "n", isint, "1 (one choice per request)", lambda v: v == 1)
  _field(req, "model", (str,), "a string")
  if req.get("stop") not in (None, [], ""): raise RequestError(400, "'stop' sequences are not supported by this server", "stop")
  return ChatRequest(out, mt if mt is not None else mct, float(temp), top_k, float(top_p), seed, stream)

# ---- the model's queue

class QueueFull(Exception): pass

class ModelQueue:
  """One request at a time on the model (the KV cache is shared), in order of arrival; at most `max_waiting` wait
  behind the running one, later ones are turned away at once rather than piling up threads."""
  def __init__(self, max_waiting: int):
    self.max_waiting, self.cv, self.waiting, self.busy = max_waiting, threading.Condition(), deque[object](), False
  @contextmanager
  def turn(self):
    with self.cv:
      if self.busy and len(self.waiting) >= self.max_waiting: raise QueueFull
      me = object()
      self.waiting.append(me)
      while self.busy or self.waiting[0] is not me: self.cv.wait()
      self.waiting.popleft()
      self.busy = True
    try: yield
    finally:
      with self.cv:
        self.busy = False
        self.cv.notify_all()

# ---- connection deadlines

class Deadlines:
  """Closes the read side of connections whose request (headers and body) hasn't arrived in time. A socket timeout
  only bounds each recv(), so a client sending a byte every few seconds would otherwise hold its thread forever."""
  def __init__(self, tick: float = 0.2):
    self.lock, self.stop = threading.Lock(), threading.Event()
    self.due: dict = {}
    self.expired: set = set()
    threading.Thread(target=self._run, args=(tick,), daemon=True, name="llm-serve-deadlines").start()
  def arm(self, sock: socket.socket, seconds: float):
    with self.lock: self.due[sock] = time.monotonic() + seconds; self.expired.discard(sock)
  def disarm(self, sock: socket.socket):
    with self.lock: self.due.pop(sock, None)
  def passed(self, sock: socket.socket) -> bool:
    with self.lock: return sock in self.expired
  def forget(self, sock: socket.socket):
    with self.lock: self.due.pop(sock, None); self.expired.discard(sock)
  def _run(self, tick: float):
    while not self.stop.wait(tick):
      now = time.monotonic()
      with self.lock:
        late = [s for s, t in self.due.items() if t < now]
        for s in late: del self.due[s]; self.expired.add(s)
      for s in late:
        try: s.shutdown(socket.SHUT_RD)   # the blocked read returns EOF; the handler answers 408 and closes
        except OSError: pass

def _client_gone(sock: socket.socket) -> bool:
  """True when the client has closed its end (a readable socket with nothing to read): don't generate for nobody."""
  try:
    r, _, _ = select.select([sock], [], [], 0)
    return bool(r) and sock.recv(1, socket.MSG_PEEK) == b""
  except (OSError, ValueError): return True

# ---- HTTP

class LLMServer(ThreadingHTTPServer):
  request_queue_size = 256   # the listen backlog: 5 (the default) reset most connections of a burst of 50 clients
  daemon_threads = True
  allow_reuse_address = True

  def __init__(self, llm, host: str = "127.0.0.1", port: int = 8000, name: str = "tinycore", max_body: int = 1 << 20,
               max_waiting: int = 64, request_timeout: float = 10.0, max_connections: int = 512):
    self.llm, self.name, self.max_body, self.request_timeout = llm, name, max_body, request_timeout
    self.queue, self.deadlines, self.slots = ModelQueue(max_waiting), Deadlines(), threading.BoundedSemaphore(max_connections)
    # no prompt of more characters than this fits the context: each token covers at most the longest piece's text
    self.max_prompt_chars = llm.max_context * max(8, max((len(t) for t in llm.tok.tokens), default=1))
    super().__init__((host, port), Handler)

  def process_request(self, request, client_address):
    if not self.slots.acquire(blocking=False):   # a thread per connection: past the cap, answer from here and close
      try:
        request.settimeout(0)   # never wait in the accepting thread: a short answer fits any fresh socket's buffer
        request.send(_raw_response(503, RequestError(503, "too many open connections, retry later", code="server_busy").body()))
      except OSError: pass
      self.shutdown_request(request)
      return
    super().process_request(request, client_address)

  def process_request_thread(self, request, client_address):
    try: super().process_request_thread(request, client_address)
    finally:
      self.deadlines.forget(request)
      self.slots.release()

  def server_close(self):
    self.deadlines.stop.set()
    super().server_close()

def _raw_response(status: int, obj: dict) -> bytes:
  b = json.dumps(obj).encode()
  return (f"HTTP/1.1 {status} {'Service Unavailable' if status == 503 else 'Error'}\r\nContent-Type: application/json\r\n"
          f"Content-Length: {len(b)}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n").encode() + b

ROUTES = {"/v1/models": "GET", "/v1/chat/completions": "POST"}

class Handler(BaseHTTPRequestHandler):
  protocol_version = "HTTP/1.1"
  default_request_version = "HTTP/1.1"   # answer even a malformed request line with a status line and headers
  server: LLMServer
  def log_message(self, *a): pass

  def setup(self):
    self.timeout = self.server.request_timeout   # per-recv/send socket timeout; the Deadlines bound the whole request
    super().setup()

  def handle_one_request(self):
    self.unread_body = False
    self.server.deadlines.arm(self.connection, self.server.request_timeout)   # covers an idle keep-alive wait too
    super().handle_one_request()

  def finish(self):
    if getattr(self, "unread_body", False): self._linger()
    super().finish()

  def _linger(self):
    """The answer went out before the body was read (413, 408...): closing now would make the kernel reset the
    connection, and the client might never see the answer. Stop sending, and drop what still arrives, briefly."""
    try:
      self.wfile.flush()
      self.connection.shutdown(socket.SHUT_WR)
      self.connection.settimeout(0.5)
      end, left = time.monotonic() + 2.0, 4 << 20
      while time.monotonic() < end and left > 0 and (b := self.connection.recv(65536)): left -= len(b)
    except OSError: pass

  # -- responses
  def _send(self, status: int, obj: Any, headers: dict | None = None):
    b = json.dumps(obj).encode()
    self.send_response(status)
    self.send_header("Content-Type", "application/json")
    self.send_header("Content-Length", str(len(b)))
    for k, v in (headers or {}).items(): self.send_header(k, v)
    if self.close_connection or self.unread_body: self.send_header("Connection", "close"); self.close_connection = True
    self.end_headers()
    if self.command != "HEAD": self.wfile.write(b)

  def _error(self, e: RequestError):
    if e.status >= 500 and e.status != 503: log.error("%s %s: %s", self.command, self.path, e.message)
    self._send(e.status, e.body(), {"Retry-After": "1"} if e.status == 503 else None)

  def send_error(self, code: int, message: str | None = None, explain: str | None = None):
    """http.server's own refusals (bad request line, too many headers, unknown method) as JSON errors too."""
    self.close_connection = True
    if self.server.deadlines.passed(self.connection):   # the line or headers were cut off by the deadline
      code, message = 408, f"the request did not arrive within {self.server.request_timeout:g} s"
    try: self._error(RequestError(code, message or self.responses.get(code, ("error",))[0]))
    except OSError: pass

  # -- routing
  def _route(self, method: str):
    self.server.deadlines.disarm(self.connection)
    # until _read_body has consumed a body, answering leaves it in the stream: that connection must close
    self.unread_body = "Content-Length" in self.headers or "Transfer-Encoding" in self.headers
    try:
      if self.server.deadlines.passed(self.connection):
        self.unread_body = True
        raise RequestError(408, f"the request did not arrive within {self.server.request_timeout:g} s")
      path = self.path.split("?", 1)[0].rstrip("/")
      if path not in ROUTES: raise RequestError(404, f"no route {path!r}; try POST /v1/chat/completions or GET /v1/models")
      if ROUTES[path] != method:
        raise RequestError(405, f"{path} takes {ROUTES[path]}, not {method}")
      if path == "/v1/models":
        return self._send(200, {"object": "list", "data": [{"id": self.server.name, "object": "model", "owned_by": "tinycore"}]})
      self._chat()
    except RequestError as e: self._error(e)
    except (BrokenPipeError, ConnectionResetError, TimeoutError): self.close_connection = True
    except Exception:   # a bug, not the client's fault: say so without details, keep the server up
      log.exception("%s %s failed", method, self.path)
      self.close_connection = True
      try: self._error(RequestError(500, "internal error while handling the request"))
      except OSError: pass

  def do_GET(self): self._route("GET")
  def do_POST(self): self._route("POST")
  def do_HEAD(self): self._route("HEAD")
  def do_PUT(self): self._route("PUT")
  def do_DELETE(self): self._route("DELETE")
  def do_PATCH(self): self._route("PATCH")
  def do_OPTIONS(self): self._route("OPTIONS")

  def handle_expect_100(self):
    """Refuse an oversized body before the client sends it."""
    n = self.headers.get("Content-Length", "")
    if n.strip().isdecimal() and int(n) > self.server.max_body:
      self.unread_body = True
      self._error(RequestError(413, f"the body of {int(n)} bytes is over the limit of {self.server.max_body}"))
      return False
    return super().handle_expect_100()

  def _read_body(self) -> bytes:
    self.unread_body = True   # until it's all read: an error before then closes the connection
    if "Transfer-Encoding" in self.headers: raise RequestError(411, "send the body with a Content-Length (Transfer-Encoding is not accepted)")
    lengths = self.headers.get_all("Content-Length") or []
    if not lengths: raise RequestError(411, "a Content-Length header is required")
    if len(set(v.strip() for v in lengths)) != 1 or not re.fullmatch(r"[0-9]{1,19}", lengths[0].strip()):
      raise RequestError(400, f"Content-Length must be one non-negative integer, got {', '.join(lengths)[:60]!r}")
    n = int(lengths[0])
    if n > self.server.max_body: raise RequestError(413, f"the body of {n} bytes is over the limit of {self.server.max_body}")
    self.server.deadlines.arm(self.connection, self.server.request_timeout)
    try: body = self.rfile.read(n)
    except TimeoutError: body = b""
    finally: self.server.deadlines.disarm(self.connection)
    if len(body) < n:
      raise RequestError(408, f"the body stopped after {len(body)} of {n} bytes (the request must arrive within {self.server.request_timeout:g} s)")
    self.unread_body = False
    return body

  # -- /v1/chat/completions
  def _chat(self):
    srv, llm = self.server, self.server.llm
    req = parse_chat_request(self._read_body(), llm.max_context, llm.cfg.vocab)
    n_chars = sum(len(m["content"]) for m in req.messages)
    if len(req.messages) > llm.max_context or n_chars > srv.max_prompt_chars:   # certainly too long: say so without spending the CPU to tokenize it
      raise RequestError(400, f"the {len(req.messages)} messages of {n_chars} characters can't fit the context of {llm.max_context} tokens",
                         "messages", "context_length_exceeded")
    try: toks = llm.chat_tokens(req.messages)   # in this thread, outside the model's queue
    except MessagesRejected as e: raise RequestError(400, str(e), "messages") from None   # e.g. a system role the model's template refuses
    if len(toks) >= llm.max_context:
      raise RequestError(400, f"the prompt is {len(toks)} tokens; the context holds {llm.max_context} including the reply",
                         "messages", "context_length_exceeded")
    if not toks: raise RequestError(400, "the prompt is empty", "messages")
    max_tokens = min(req.max_tokens or 256, llm.max_context - len(toks) + 1)
    try:
      with srv.queue.turn():
        if _client_gone(self.connection): self.close_connection = True; return
        if req.stream: return self._stream(req, toks, max_tokens)
        out, finish = self._generate(req, toks, max_tokens)
    except QueueFull: raise RequestError(503, "the server is busy (request queue full), retry later", code="server_busy") from None
    text = llm.tok.decode(out)
    self._send(200, {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()), "model": srv.name,
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                     "usage": {"prompt_tokens": len(toks), "completion_tokens": len(out), "total_tokens": len(toks) + len(out)}})

  def _tokens(self, req: ChatRequest, toks: list[int], max_tokens: int):
    """(token, finish_reason or None) as generated; the last one carries the reason."""
    llm = self.server.llm
    for t in llm.generate(toks, max_tokens, req.temperature, req.top_k, req.seed, top_p=req.top_p):
      if t in llm.tok.stop: yield None, "stop"; return
      yield t, None
    yield None, "length"

  def _generate(self, req: ChatRequest, toks: list[int], max_tokens: int) -> tuple[list[int], str]:
    out: list[int] = []
    for t, fin in self._tokens(req, toks, max_tokens):
      if fin: return out, fin
      out.append(t)
      if len(out) % 16 == 0 and _client_gone(self.connection): raise ConnectionResetError   # give the model to the next one
    return out, "length"

  def _stream(self, req: ChatRequest, toks: list[int], max_tokens: int):
    srv = self.server
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
    chunk = lambda delta, fin=None: {"id": cid, "object": "chat.completion.chunk", "created": created, "model": srv.name,
                                     "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}
    self.close_connection = True   # the end of the stream is the end of the connection
    self.send_response(200)
    for k, v in (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Connection", "close")): self.send_header(k, v)
    self.end_headers()
    def send(obj):
      self.wfile.write(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")
      self.wfile.flush()
    send(chunk({"role": "assistant", "content": ""}))
    text = TextStream(srv.llm.tok)
    try:
      for t, fin in self._tokens(req, toks, max_tokens):
        if fin:
          if rest := text.flush(): send(chunk({"content": rest}))
          send(chunk({}, fin))
          break
        if new := text.add(t): send(chunk({"content": new}))
    except (BrokenPipeError, ConnectionResetError, TimeoutError): return   # the client left: nobody to tell
    except Exception as e:   # headers are out: the failure goes into the stream, which still ends properly
      log.exception("stream for %s failed", cid)
      send({"error": {"message": f"generation failed: {type(e).__name__}", "type": "server_error", "param": None, "code": None}})
    send(b"[DONE]")

def make_server(llm, host: str = "127.0.0.1", port: int = 8000, name: str = "tinycore", **limits) -> LLMServer:
  """limits: max_body (bytes), max_waiting (queued requests before 503), request_timeout (s), max_connections."""
  return LLMServer(llm, host, port, name, **limits)
