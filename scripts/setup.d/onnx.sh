# ONNX frontend (issue 27): `onnx` parses models and ships the backend node test data our conformance suite runs;
# onnxruntime is the reference the real-model tests compare against; onnxscript lets torch.onnx.export build test models
step "onnx + onnxruntime + onnxscript: the ONNX frontend's parser, conformance data and reference runtime"
pip install onnx onnxruntime onnxscript || echo "setup:     onnx/onnxruntime not available (ONNX tests will skip)"
# no torchvision: the PyPI wheel matching torch 2.13.0 is the CUDA build, whose C ops don't load against the CPU torch
# on disk ("operator torchvision::nms does not exist"); the tests build resnet18 / mobilenet_v3_small from torch.nn
# skl2onnx (scikit-learn -> ONNX, no torch): the ai.onnx.ml tests export trees, linear models, scalers with it
step "skl2onnx: scikit-learn models exported to ONNX for the ai.onnx.ml tests"
pip install skl2onnx || echo "setup:     skl2onnx not available (the ai.onnx.ml tests will skip)"
