"""A GGUF's tokenizer.chat_template is data from the file: it is rendered in jinja2's immutable sandbox, so a template
that reaches for Python internals gets a ChatTemplateError instead of running code, while real templates still work."""
import os
import pytest
pytest.importorskip("jinja2")
from tinycore.llm.chat import apply_chat_template, ChatTemplateError

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "2+2?"}]

ESCAPES = [
  "{{ lipsum.__globals__['os'].system('id > pwned') }}",
  "{{ cycler.__init__.__globals__.os.popen('id > pwned').read() }}",
  "{{ ''.__class__.__mro__[1].__subclasses__() }}",
  "{{ joiner.__init__.__globals__['__builtins__']['__import__']('os').system('id > pwned') }}",
  "{{ namespace.__init__.__globals__ }}",
  "{{ messages.__class__.__base__ }}",
  "{% set x = [] %}{{ x.append(1) }}",                          # mutation: the immutable sandbox refuses it
  "{{ 'a' * 10000000000 }}",                                     # a 10 GB string
  "{{ [0] * (2 ** 40) }}",
  "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",   # 10^10 iterations
  "{% for i in range(100000) %}{{ 'x' * 1000000 }}{% endfor %}",                       # 100 GB of output
]

@pytest.mark.parametrize("tmpl", ESCAPES)
def test_escape_attempts_raise_and_run_nothing(tmpl, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(ChatTemplateError, match="unsafe") as e: apply_chat_template(tmpl, MSGS)
  assert isinstance(e.value, ValueError) and "chat_template" in str(e.value)
  assert not os.path.exists(tmp_path / "pwned")

def test_internal_attributes_leak_nothing():
  # the sandbox turns an unsafe attribute into an undefined value: printing it shows nothing, using it raises
  out = apply_chat_template("[{{ raise_exception.__globals__ }}][{{ messages.__class__ }}]", MSGS)
  assert out == "[][]"

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + "
          "'<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
          "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SMOLLM = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI "
          "assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
          "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# namespace() and a raise_exception guard, as in mistral/llama-2 style templates
GUARDED = ("{% set ns = namespace(n=0) %}{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
           "{% set ns.n = ns.n + 1 %}[{{ ns.n }}:{{ m['role'] }}]{{ m['content'] }}{% endfor %}")

def test_real_templates_render():
  chatml = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in MSGS) + "<|im_start|>assistant\n"
  assert apply_chat_template(CHATML, MSGS).rstrip("\n") == chatml.rstrip("\n")
  llama = "<|begin_of_text|>" + "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>" for m in MSGS)
  assert apply_chat_template(LLAMA3, MSGS, bos="<|begin_of_text|>") == llama + "<|start_header_id|>assistant<|end_header_id|>\n\n"
  user_only = [{"role": "user", "content": "hey"}]
  assert apply_chat_template(SMOLLM, user_only).startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
  assert apply_chat_template(SMOLLM, MSGS).rstrip("\n") == chatml.rstrip("\n")
  assert apply_chat_template(GUARDED, MSGS) == "[1:system]Be brief.[2:user]Hi there[3:assistant]Hello![4:user]2+2?"

def test_template_errors_that_are_not_escapes_are_errors_too():
  # a template's own raise_exception (a message shape it rejects), an unknown filter or broken syntax: no silent
  # fallback to another format (the prompt the model was trained on is lost that way), a ChatTemplateError saying why
  with pytest.raises(ChatTemplateError, match="can't render.*no tools"): apply_chat_template(GUARDED.replace("'tool'", "'user'"), MSGS)
  with pytest.raises(ChatTemplateError, match="no_such_filter"): apply_chat_template("{{ messages | no_such_filter }}", MSGS)
  with pytest.raises(ChatTemplateError, match="not valid jinja"): apply_chat_template("{% for m in messages %}", MSGS)

def test_poisoned_template_in_a_model_file(tmp_path, monkeypatch):
  """End to end: the template comes from the GGUF; loading the model and building a chat prompt runs nothing."""
  from tinycore.llm import testmodel
  from tinycore.llm.generate import LLM
  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(testmodel, "CHATML", ESCAPES[0])
  p = str(tmp_path / "evil.gguf")
  testmodel.tiny_llama(p, dim=16, n_layers=1, n_heads=2, n_kv_heads=1, hidden=32)
  llm = LLM(p, max_context=16, chunk=4)
  with pytest.raises(ChatTemplateError): llm.chat_tokens([{"role": "user", "content": "hi"}])
  assert not (tmp_path / "pwned").exists()
