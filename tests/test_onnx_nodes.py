"""The ONNX backend node tests (from the installed `onnx` package) run through tinycore.onnx and compared with the
expected outputs shipped with them. Unsupported ops skip naming the op; a mismatch fails. The whole suite is slow (it
compiles a few thousand kernels), so the default run takes a fixed sample across op families and `-m slow` runs all;
the CI lane .ci/lanes/onnx.sh runs it all too."""
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package (pip install 'tinycore[onnx]') ships the node tests")
from tinycore.onnx import conformance  # noqa: E402

# one or two cases per op family that real models use: the quick sample in the default run
QUICK = ["test_add_bcast", "test_matmul_3d", "test_gemm_all_attributes", "test_conv_with_strides_padding", "test_maxpool_2d_pads",
         "test_averagepool_2d_same_upper", "test_batchnorm_example", "test_layer_normalization_4d_axis1", "test_softmax_axis_1",
         "test_gelu_default_1", "test_reshape_reordered_all_dims", "test_slice_neg_steps", "test_concat_3d_axis_negative_1",
         "test_transpose_all_permutations_2", "test_reduce_mean_keepdims_example", "test_argmax_negative_axis_keepdims_example_select_last_index",
         "test_gather_negative_indices", "test_gather_elements_1", "test_scatternd", "test_einsum_batch_matmul", "test_where_example",
         "test_dequantizelinear", "test_quantizelinear", "test_matmulinteger", "test_if", "test_range_float_type_positive_delta",
         "test_cast_FLOAT_to_DOUBLE", "test_expand_dim_changed", "test_split_equal_parts_1d_opset18",
         "test_resize_upsample_scales_linear", "test_sce_mean_weight", "test_attention_4d_gqa_with_past_and_present",
         "test_rms_normalization_2d_axis0", "test_nonmaxsuppression_two_classes", "test_dft_rfft", "test_scan9_sum",
         "test_stft_with_window", "test_cast_FLOAT_to_BFLOAT16", "test_swish", "test_cumprod_1d_exclusive"]

ALL = conformance.case_names()

def _check(name, max_opset=None):
  r = conformance.run_case(name, max_opset=max_opset)
  if r.status == "skip": pytest.skip(f"{r.op}: {r.detail}")
  if r.status == "fail": pytest.fail(f"{r.op}: {r.detail}", pytrace=False)

@pytest.mark.needs_device
@pytest.mark.parametrize("name", [n for n in QUICK if n in ALL])
def test_node_quick(name): _check(name)   # at the onnx package's newest opset (conformance.MAX_OPSET)

@pytest.mark.needs_device
@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_node(name): _check(name)

def test_quick_sample_exists():
  # the sample must not silently shrink when the onnx package renames cases
  missing = [n for n in QUICK if n not in ALL]
  assert not missing, f"quick node cases not in this onnx version: {missing}"
