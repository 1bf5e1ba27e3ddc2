"""Chat prompts: the GGUF's own jinja template when jinja2 is installed, else the common formats recognized by their
markers (chatml, llama 3, llama 2 [INST], gemma), else a plain 'role: text' transcript."""
from __future__ import annotations

def _known(tmpl: str, msgs: list[dict], bos: str) -> str:
  if "<|im_start|>" in tmpl: return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs) + "<|im_start|>assistant\n"
  if "<|start_header_id|>" in tmpl:
    return bos + "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>" for m in msgs) + "<|start_header_id|>assistant<|end_header_id|>\n\n"
  if "<start_of_turn>" in tmpl:
    return bos + "".join(f"<start_of_turn>{'model' if m['role'] == 'assistant' else 'user'}\n{m['content']}<end_of_turn>\n" for m in msgs) + "<start_of_turn>model\n"
  if "[INST]" in tmpl:
    out, sys = bos, ""
    for m in msgs:
      if m["role"] == "system": sys = f"<<SYS>>\n{m['content']}\n<</SYS>>\n\n"
      elif m["role"] == "user": out += f"[INST] {sys}{m['content']} [/INST]"; sys = ""
      else: out += f" {m['content']} "
    return out
  return "".join(f"{m['role']}: {m['content']}\n" for m in msgs) + "assistant:"

def apply_chat_template(tmpl: str | None, msgs: list[dict], bos: str = "", eos: str = "") -> str:
  """The prompt text for `msgs` ([{role, content}]), ending where the assistant's reply starts."""
  if tmpl:
    try:
      import jinja2
      env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
      def _raise(msg): raise jinja2.TemplateError(msg)
      env.globals["raise_exception"] = _raise
      return env.from_string(tmpl).render(messages=msgs, add_generation_prompt=True, bos_token=bos, eos_token=eos)
    except ImportError: pass
    except Exception: pass   # a template using features jinja2's defaults lack: fall back to the marker match
  return _known(tmpl or "", msgs, bos)
