"""Chat prompts: the model's own jinja template (tokenizer.chat_template), rendered as HF transformers renders it
(jinja2's immutable sandbox, trim_blocks/lstrip_blocks, loop controls, HF's tojson, raise_exception, strftime_now).
A template that fails to render is an error. Only a model that has no template at all gets a format chosen here: the
common ones recognized by their markers in the vocabulary (chatml, llama 3, llama 2 [INST], gemma), else a plain
'role: text' transcript."""
from __future__ import annotations
import functools, json, time
from typing import Any

def _known(markers: str, msgs: list[dict], bos: str, add_generation_prompt: bool = True) -> str:
  """A prompt in the format whose marker appears in `markers` (for a model without a template)."""
  if "<|im_start|>" in markers:
    body, gen = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs), "<|im_start|>assistant\n"
  elif "<|start_header_id|>" in markers:
    body = bos + "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>" for m in msgs)
    gen = "<|start_header_id|>assistant<|end_header_id|>\n\n"
  elif "<start_of_turn>" in markers:
    body = bos + "".join(f"<start_of_turn>{'model' if m['role'] == 'assistant' else 'user'}\n{m['content']}<end_of_turn>\n" for m in msgs)
    gen = "<start_of_turn>model\n"
  elif "[INST]" in markers:
    body, sys, gen = bos, "", ""
    for m in msgs:
      if m["role"] == "system": sys = f"<<SYS>>\n{m['content']}\n<</SYS>>\n\n"
      elif m["role"] == "user": body += f"[INST] {sys}{m['content']} [/INST]"; sys = ""
      else: body += f" {m['content']} "
  else: body, gen = "".join(f"{m['role']}: {m['content']}\n" for m in msgs), "assistant:"
  return body + gen if add_generation_prompt else body

class ChatTemplateError(ValueError):
  """The model's chat template can't be rendered: it tried something a template must not (reach Python internals,
  build huge values), raised an error itself (a message shape it rejects), or is not valid jinja."""

class MessagesRejected(ChatTemplateError):
  """The template rendered but refused these messages (its raise_exception, or a message shape it can't handle, e.g. a
  system role the model doesn't have): the caller's messages are at fault, not the model file."""

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
  env = Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
  def _raise(msg): raise TemplateError(msg)
  def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
    # HF's tojson: plain json.dumps (jinja2's own escapes <, >, & and ' for HTML, which would change the prompt)
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
  env.filters["tojson"] = tojson
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

def apply_chat_template(tmpl: str | None, msgs: list[dict], bos: str = "", eos: str = "", add_generation_prompt: bool = True,
                        markers: str = "") -> str:
  """The prompt text for `msgs` ([{role, content}]); with add_generation_prompt it ends where the assistant's reply
  starts. The template is rendered in a sandbox; any failure is a ChatTemplateError that says why. `markers` (e.g. the
  vocabulary's special tokens joined) picks a known format only when the model has no template at all."""
  if not tmpl: return _known(markers, msgs, bos, add_generation_prompt)
  try:
    import jinja2
    from jinja2.exceptions import SecurityError
  except ImportError:
    raise ChatTemplateError("rendering the model's chat template needs jinja2: pip install 'tinycore[llm]' (or jinja2)") from None
  try:
    return _render(_sandbox().from_string(tmpl), messages=msgs, add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos)
  except SecurityError as e:
    raise ChatTemplateError(f"the model's chat template (tokenizer.chat_template) did something unsafe: {e}; refusing to render it") from None
  except jinja2.TemplateSyntaxError as e:
    raise ChatTemplateError(f"the model's chat template (tokenizer.chat_template) is not valid jinja: {e} (line {e.lineno})") from None
  except (jinja2.TemplateError, TypeError, ValueError, LookupError, AttributeError, ArithmeticError, RecursionError) as e:
    raise MessagesRejected(f"the model's chat template (tokenizer.chat_template) can't render these messages: {type(e).__name__}: {e}") from None
