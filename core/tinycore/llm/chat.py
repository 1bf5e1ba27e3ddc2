"""Chat prompts: the GGUF's own jinja template when jinja2 is installed, else the common formats recognized by their
markers (chatml, llama 3, llama 2 [INST], gemma), else a plain 'role: text' transcript."""
from __future__ import annotations
import functools, time

def _known(tmpl: str, msgs: list[dict], bos: str) -> str:
  if "<|im_start|>" in tmpl: return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs) + "<|im_start|>assistant\n"
  if "<|start_header_id|>" in tmpl:
    turns = "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>" for m in msgs)
    return bos + turns + "<|start_header_id|>assistant<|end_header_id|>\n\n"
  if "<start_of_turn>" in tmpl:
    turns = "".join(f"<start_of_turn>{'model' if m['role'] == 'assistant' else 'user'}\n{m['content']}<end_of_turn>\n" for m in msgs)
    return bos + turns + "<start_of_turn>model\n"
  if "[INST]" in tmpl:
    out, sys = bos, ""
    for m in msgs:
      if m["role"] == "system": sys = f"<<SYS>>\n{m['content']}\n<</SYS>>\n\n"
      elif m["role"] == "user": out += f"[INST] {sys}{m['content']} [/INST]"; sys = ""
      else: out += f" {m['content']} "
    return out
  return "".join(f"{m['role']}: {m['content']}\n" for m in msgs) + "assistant:"

class ChatTemplateError(ValueError):
  """The model's chat template tried something a template must not (reach Python internals, build huge values)."""

# bounds on what a template may build: a prompt is kilobytes; these stop a template from exhausting memory or time
_MAX_VALUE = 1 << 20    # the largest string/list made with `*`
_MAX_OUTPUT = 1 << 24   # characters of rendered prompt
_MAX_RANGE = 1 << 20    # items of all range() calls in one render together (nested loops multiply)

@functools.cache
def _sandbox():
  """A jinja2 environment in which a template can only read the values it is given: a GGUF's chat template is data from
  the file, and jinja2's default environment lets it reach Python internals (lipsum.__globals__['os'], ''.__class__...)
  and so run any code. The immutable sandbox also refuses calls that mutate (list.append), and `*`/`**` are bounded."""
  from jinja2.exceptions import SecurityError, TemplateError
  from jinja2.sandbox import ImmutableSandboxedEnvironment
  class Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**"])
    def call_binop(self, context, operator, left, right):
      if operator == "**" and isinstance(right, (int, float)) and abs(right) > 64 and not isinstance(left, float):
        raise SecurityError(f"exponent {right} is too large")
      if operator == "*":
        n, seq = (right, left) if isinstance(left, (str, list, tuple)) else (left, right)
        if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > _MAX_VALUE:
          raise SecurityError(f"repeating a value {n} times builds more than {_MAX_VALUE} items")
      return super().call_binop(context, operator, left, right)
  env = Sandbox(trim_blocks=True, lstrip_blocks=True)
  def _raise(msg): raise TemplateError(msg)
  env.globals["raise_exception"] = _raise
  env.globals["strftime_now"] = lambda fmt: time.strftime(str(fmt))   # llama 3.1+ templates date the system prompt
  return env

def _render(template, **ctx) -> str:
  """Render with budgets: range() items across the whole render, and the output length (streamed, so a runaway loop is
  stopped as it grows instead of after it has filled memory)."""
  from jinja2.exceptions import SecurityError
  left = [_MAX_RANGE]
  def budgeted_range(*args):
    r = range(*args)
    if len(r) > left[0]: raise SecurityError(f"range() calls ask for more than {_MAX_RANGE} items in one render")
    left[0] -= len(r)
    return r
  out, n = [], 0
  for piece in template.generate(**ctx, range=budgeted_range):
    n += len(piece)
    if n > _MAX_OUTPUT: raise SecurityError(f"the rendered prompt grows past {_MAX_OUTPUT} characters")
    out.append(piece)
  return "".join(out)

def apply_chat_template(tmpl: str | None, msgs: list[dict], bos: str = "", eos: str = "") -> str:
  """The prompt text for `msgs` ([{role, content}]), ending where the assistant's reply starts. The template is rendered
  in a sandbox: one that tries to escape it raises ChatTemplateError; one using features the sandbox lacks falls back
  to the marker match."""
  if tmpl:
    try:
      import jinja2
      from jinja2.exceptions import SecurityError
    except ImportError: return _known(tmpl, msgs, bos)
    try: return _render(_sandbox().from_string(tmpl), messages=msgs, add_generation_prompt=True, bos_token=bos, eos_token=eos)
    except SecurityError as e:
      raise ChatTemplateError(f"the model's chat template (tokenizer.chat_template) did something unsafe: {e}; refusing to render it") from None
    except (jinja2.TemplateError, TypeError, ValueError, LookupError, AttributeError, ArithmeticError, RecursionError):
      pass   # a feature the defaults lack: fall back
  return _known(tmpl or "", msgs, bos)
