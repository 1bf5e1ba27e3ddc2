# ONNX frontend (issue 27): `onnx` parses models and ships the backend node test data our conformance suite runs;
# onnxruntime is the reference the real-model tests compare against; onnxscript lets torch.onnx.export build test models
step "onnx + onnxruntime + onnxscript: the ONNX frontend's parser, conformance data and reference runtime"
pip install onnx onnxruntime onnxscript || echo "setup:     onnx/onnxruntime not available (ONNX tests will skip)"
if .venv/bin/python -c "import torch" 2>/dev/null; then
  # torchvision only alongside the torch on disk, never letting pip replace torch (that would fetch a CUDA build)
  pip install --no-deps torchvision==0.28.0 || echo "setup:     torchvision 0.28.0 not available (ONNX tests build the nets from torch.nn)"
fi
