"""LLM runner: llama-family GGUF models with a KV cache, jitted prefill/decode, sampling, a benchmark and an
OpenAI-compatible server (`python -m tinycore.llm --help`)."""
from tinycore.llm.generate import LLM
from tinycore.llm.tokenizer import Tokenizer
from tinycore.llm.model import Transformer, Config
