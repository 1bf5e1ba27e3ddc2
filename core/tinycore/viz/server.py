"""The local server behind VIZ=1 and `tinyctl viz FILE`: stdlib http.server on 127.0.0.1, serving the page's files
(a fixed list: a request names a file, never a path) and JSON views of one recording.

  GET /                     the page                      GET /api/kernel/N          a kernel: source, program, opts
  GET /static/NAME          app.js, style.css, dagre...    GET /api/rewrite/N?step=K  a rewrite after K steps: graph + diff
  GET /api/summary          kernel and rewrite lists      GET /api/graph/N           the graph under UOp N (a kernel's AST)
  GET /api/profile          the timeline, streamed        GET /api/trace             the whole recording, streamed

Anything else is 404. Requests whose Host is not this server's loopback address are refused (a web page elsewhere
can't read the recording through DNS rebinding)."""
from __future__ import annotations
import json, os, re, sys, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from typing import Any, Iterator
from urllib.parse import urlsplit, parse_qs
from tinycore.viz.replay import TraceIndex

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".txt": "text/plain; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml"}
_CHUNK_EVENTS = 5000
_ROUTE = re.compile(r"/api/(kernel|rewrite|graph)/(\d{1,9})")

def _static_files() -> dict[str, str]:
  """name -> full path of every shipped asset; requests are looked up here by exact name."""
  return {n: os.path.join(STATIC_DIR, n) for n in os.listdir(STATIC_DIR) if os.path.splitext(n)[1] in _TYPES and not n.startswith(".")}

def profile_chunks(trace: dict) -> Iterator[bytes]:
  """The timeline as one JSON object, {"devices": [names in order of first use], "events": [the recorded rows]},
  encoded a slice at a time (the rows go out as recorded: json.dumps of a slice is the whole cost)."""
  devices = list(dict.fromkeys(e[1] for e in trace["profile"]))
  yield b'{"devices":' + json.dumps(devices).encode() + b',"events":['
  ev = trace["profile"]
  for i in range(0, len(ev), _CHUNK_EVENTS):
    yield (b"," if i else b"") + json.dumps(ev[i:i + _CHUNK_EVENTS], separators=(",", ":")).encode()[1:-1]
  yield b"]}"

def trace_chunks(trace: dict) -> Iterator[bytes]:
  enc = json.JSONEncoder(separators=(",", ":"))
  buf: list[str] = []
  for piece in enc.iterencode(trace):
    buf.append(piece)
    if len(buf) >= 4096: yield "".join(buf).encode(); buf.clear()
  if buf: yield "".join(buf).encode()

class _Handler(BaseHTTPRequestHandler):
  index: TraceIndex
  files: dict[str, str]
  lock: threading.Lock
  profile_cache: list[bytes]
  quiet = True
  server_version = "tinycore-viz"
  protocol_version = "HTTP/1.1"   # chunked streaming of big traces

  def log_message(self, format: str, *args: Any) -> None:
    if not self.quiet: super().log_message(format, *args)

  def _headers(self, code: int, ctype: str, length: int | None = None) -> None:
    self.send_response(code)
    self.send_header("Content-Type", ctype)
    self.send_header("X-Content-Type-Options", "nosniff")
    self.send_header("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
    self.send_header("Cache-Control", "no-store")
    if length is None: self.send_header("Transfer-Encoding", "chunked")
    else: self.send_header("Content-Length", str(length))
    self.end_headers()

  def _send(self, code: int, body: bytes, ctype: str) -> None:
    self._headers(code, ctype, len(body))
    self.wfile.write(body)

  def _json(self, obj: Any) -> None: self._send(200, json.dumps(obj, separators=(",", ":")).encode(), "application/json")
  def _not_found(self, why: str = "not found") -> None: self._send(404, json.dumps({"error": why}).encode(), "application/json")

  def _stream(self, chunks: Iterator[bytes]) -> None:
    self._headers(200, "application/json")
    for c in chunks:
      if c: self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
    self.wfile.write(b"0\r\n\r\n")

  def _host_ok(self) -> bool:
    host = (self.headers.get("Host") or "").strip().lower()
    port = self.server.server_address[1]  # type: ignore[index]
    return host in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1", "localhost")

  def do_GET(self) -> None:
    if not self._host_ok(): return self._send(421, b"wrong host", "text/plain")
    # origin-form only ("/path?query"): an absolute URL or "//host/..." names another server, not a file here
    if not self.path.startswith("/") or self.path.startswith("//"): return self._not_found()
    try: url = urlsplit(self.path)
    except ValueError: return self._not_found()
    path, query = url.path, parse_qs(url.query)
    try:
      if path in ("/", "/index.html"): return self._file("index.html")
      if path.startswith("/static/"): return self._file(path[len("/static/"):])
      if path == "/api/summary": return self._json(self.index.summary())
      if path == "/api/profile":
        with self.lock:   # encoded on the first request, then kept: the page fetches it again after a reload
          if not self.profile_cache: self.profile_cache.extend(profile_chunks(self.index.trace))
        return self._stream(iter(self.profile_cache))
      if path == "/api/trace": return self._stream(trace_chunks(self.index.trace))
      if (m := _ROUTE.fullmatch(path)) is None: return self._not_found()
      kind, n = m.group(1), int(m.group(2))
      t = self.index.trace
      if kind == "kernel":
        if n >= len(t["kernels"]): return self._not_found(f"no kernel {n}; there are {len(t['kernels'])}")
        return self._json(self.index.kernel_view(n))
      if kind == "graph":
        if n >= len(t["uops"]): return self._not_found(f"no UOp {n}")
        with self.lock: return self._json(self.index.graph(n))
      if n >= len(t["rewrites"]): return self._not_found(f"no rewrite {n}; there are {len(t['rewrites'])}")
      step = query.get("step", ["0"])[0]
      if not re.fullmatch(r"\d{1,9}", step): return self._not_found(f"step must be a whole number, got {step[:20]!r}")
      with self.lock: return self._json(self.index.rewrite_view(n, int(step)))   # replays extend the shared node table
    except (BrokenPipeError, ConnectionResetError): return None
    except Exception as e:   # a view that can't be computed (a forged file's cyclic steps): say so, keep serving
      return self._send(500, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode(), "application/json")

  def _file(self, name: str) -> None:
    if (full := self.files.get(name)) is None: return self._not_found()
    with open(full, "rb") as f: body = f.read()
    self._send(200, body, _TYPES[os.path.splitext(name)[1]])

def make_server(trace: dict, port: int = 0, verbose: bool = False) -> ThreadingHTTPServer:
  """A server for `trace` on 127.0.0.1:`port` (0: a free one), not yet serving (call serve_forever)."""
  handler = type("VizHandler", (_Handler,), {"index": TraceIndex(trace), "files": _static_files(), "lock": threading.Lock(), "profile_cache": [],
                                          "quiet": not verbose})
  httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
  httpd.daemon_threads = True
  return httpd

def serve(trace: dict, port: int = 0, source: str = "", verbose: bool = False) -> None:
  """Serve until Ctrl-C, printing the URL."""
  httpd = make_server(trace, port, verbose)
  url = f"http://127.0.0.1:{httpd.server_address[1]}/"
  what = f" ({source})" if source else ""
  print(f"VIZ: serving {len(trace['kernels'])} kernels, {len(trace['rewrites'])} rewrites, {len(trace['profile'])} profile events{what} "
        f"at {url}  (Ctrl-C stops)", file=sys.stderr, flush=True)
  try: httpd.serve_forever()
  except KeyboardInterrupt: pass
  finally: httpd.server_close()
