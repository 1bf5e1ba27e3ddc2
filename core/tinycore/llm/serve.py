"""An OpenAI-compatible `/v1/chat/completions` (plain JSON, or `stream: true` as server-sent events) and `/v1/models`
on localhost, stdlib only. One model, one request at a time (a lock: the KV cache is shared)."""
from __future__ import annotations
import json, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

def make_server(llm, host: str = "127.0.0.1", port: int = 8000, name: str = "tinycore") -> ThreadingHTTPServer:
  lock = threading.Lock()
  class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def _json(self, code: int, obj):
      b = json.dumps(obj).encode()
      self.send_response(code); self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(b)))
      self.end_headers(); self.wfile.write(b)
    def do_GET(self):
      if self.path.rstrip("/") == "/v1/models": self._json(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "tinycore"}]})
      else: self._json(404, {"error": {"message": f"no route {self.path}"}})
    def do_POST(self):
      if self.path.rstrip("/") != "/v1/chat/completions": return self._json(404, {"error": {"message": f"no route {self.path}"}})
      try:
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        msgs = req["messages"]
        if not isinstance(msgs, list) or not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs): raise ValueError("messages must be [{role, content}]")
      except (ValueError, KeyError) as e: return self._json(400, {"error": {"message": f"bad request: {e}"}})
      max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 256)
      temp, seed, top_k = float(req.get("temperature", 0.0)), req.get("seed"), int(req.get("top_k", 0))
      cid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
      chunk = lambda delta, fin=None: {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                                       "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}
      with lock:
        toks = llm.chat_tokens(msgs)
        out, text, finish = [], "", "length"
        if req.get("stream"):
          self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.send_header("Cache-Control", "no-cache")
          self.send_header("Connection", "close"); self.end_headers()
          send = lambda obj: (self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode()), self.wfile.flush())
          send(chunk({"role": "assistant", "content": ""}))
        for t in llm.generate(toks, max_tokens, temp, top_k, seed):
          if t in llm.tok.stop: finish = "stop"; break
          out.append(t)
          new = llm.tok.decode(out)
          if new.endswith("\ufffd"): continue   # half a UTF-8 character: wait for the rest
          if req.get("stream") and new[len(text):]: send(chunk({"content": new[len(text):]}))
          text = new
        text = llm.tok.decode(out)
      if req.get("stream"):
        send(chunk({}, finish)); self.wfile.write(b"data: [DONE]\n\n"); self.wfile.flush()
        self.close_connection = True
        return
      self._json(200, {"id": cid, "object": "chat.completion", "created": created, "model": name,
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                       "usage": {"prompt_tokens": len(toks), "completion_tokens": len(out), "total_tokens": len(toks) + len(out)}})
  return ThreadingHTTPServer((host, port), Handler)
