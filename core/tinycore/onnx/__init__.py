"""Run ONNX models with tinycore: `OnnxRunner(path)(inputs) -> outputs` (see docs/onnx.md)."""
from tinycore.onnx.loader import load, LoadedModel
from tinycore.onnx.registry import UnsupportedOpError
from tinycore.onnx.runner import OnnxRunner

__all__ = ["OnnxRunner", "load", "LoadedModel", "UnsupportedOpError"]
