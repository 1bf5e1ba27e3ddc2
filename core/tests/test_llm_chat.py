"""Chat templates rendered as HF transformers renders them: real model templates (system prompts, multi-turn, with and
without add_generation_prompt) give exactly the string `PreTrainedTokenizerFast.apply_chat_template` gives."""
import pytest
from tinycore.llm.chat import ChatTemplateError, apply_chat_template

pytest.importorskip("jinja2")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SMOLLM = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI "
          "assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA31 = ("{{- bos_token }}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n"
           "    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n"
           "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- \"Today Date: \" + strftime_now(\"%d %b %Y\") + \"\\n\\n\" }}\n"
           "{{- system_message }}\n{{- \"<|eot_id|>\" }}\n{%- for message in messages %}\n"
           "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n"
           "{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n")
GEMMA = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
         "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
         "alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}"
         "{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
         "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
          "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
          "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
          "{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
          "message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
          "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
          "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
PHI3 = ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}"
        "{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
        "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}"
        "{% else %}{{ eos_token }}{% endif %}")
# loop controls and tojson, as tool-aware templates (qwen 2.5/3) use them
JSONLOOP = ("{% for m in messages %}{% if m['role'] == 'stop' %}{% break %}{% endif %}{% if m['role'] == 'skip' %}{% continue %}{% endif %}"
            "{{ m | tojson }}\n{{ m['content'] | tojson(indent=2) }}\n{% endfor %}{% if add_generation_prompt %}<gen>{% endif %}")

TEMPLATES = {"chatml": CHATML, "smollm": SMOLLM, "llama3.1": LLAMA31, "gemma": GEMMA, "llama2": LLAMA2, "phi3": PHI3, "jsonloop": JSONLOOP}
SYSTEM = [{"role": "system", "content": "You are terse.  Answer in <= 5 words & no 'quotes'."}]
TURNS = [{"role": "user", "content": "Hi there! ¿Qué tal? 日本語 😀"}, {"role": "assistant", "content": "  Fine.\n\nYou?  "},
         {"role": "user", "content": "Write <b>code</b>:\n\tdef f(): return 1\r\n"}]
CONVERSATIONS = {"user_only": TURNS[:1], "multi_turn": TURNS, "system_multi_turn": SYSTEM + TURNS, "system_one_turn": SYSTEM + TURNS[:1]}

@pytest.fixture(scope="module")
def hf_tok():
  from tokenizers import Tokenizer, models
  return transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), bos_token="<s>", eos_token="</s>")

@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("conv", list(CONVERSATIONS))
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_same_prompt_as_transformers(hf_tok, name, conv, gen):
  tmpl, msgs = TEMPLATES[name], CONVERSATIONS[conv]
  try: want = hf_tok.apply_chat_template(msgs, chat_template=tmpl, tokenize=False, add_generation_prompt=gen)
  except Exception as e:   # a template that rejects these messages (gemma: no system role) must be an error here too
    with pytest.raises(ChatTemplateError, match="can't render"): apply_chat_template(tmpl, msgs, "<s>", "</s>", add_generation_prompt=gen)
    assert "System role not supported" in str(e)
    return
  assert apply_chat_template(tmpl, msgs, "<s>", "</s>", add_generation_prompt=gen) == want

def test_loop_controls_and_tojson_do_what_hf_does(hf_tok):
  msgs = [{"role": "user", "content": "a<b>&'c' é"}, {"role": "skip", "content": "x"}, {"role": "stop", "content": ""},
          {"role": "user", "content": "never"}]
  out = apply_chat_template(JSONLOOP, msgs)
  assert "never" not in out and '"x"' not in out and "a<b>&'c' é" in out   # no HTML escaping, no ASCII escaping
  assert out == hf_tok.apply_chat_template(msgs, chat_template=JSONLOOP, tokenize=False, add_generation_prompt=True)

def test_no_template_uses_the_format_the_vocabulary_marks():
  msgs = SYSTEM + TURNS[:1]
  assert apply_chat_template(None, msgs, markers="<|im_start|> <|im_end|>") == apply_chat_template(CHATML, msgs)
  assert (apply_chat_template("", msgs, markers="<|im_start|>", add_generation_prompt=False)
          == apply_chat_template(CHATML, msgs, add_generation_prompt=False))

def test_missing_jinja2_is_an_error_not_a_fallback(monkeypatch):
  import builtins
  real = builtins.__import__
  def no_jinja(name, *a, **k):
    if name.startswith("jinja2"): raise ImportError(name)
    return real(name, *a, **k)
  monkeypatch.setattr(builtins, "__import__", no_jinja)
  with pytest.raises(ChatTemplateError, match=r"needs jinja2.*tinycore\[llm\]"): apply_chat_template(CHATML, TURNS)
