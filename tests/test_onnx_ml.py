"""The ai.onnx.ml ops skl2onnx emits (trees, linear models, scalers), on scikit-learn models exported here and compared
with ONNX Runtime: labels exactly, scores/values to 1e-5."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="tinycore.onnx needs the onnx package (pip install 'tinycore[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is the reference (pip install 'tinycore[onnx]')")
sklearn = pytest.importorskip("sklearn", reason="scikit-learn builds the models")
skl2onnx = pytest.importorskip("skl2onnx", reason="skl2onnx exports them (scripts/setup.d/onnx.sh installs it)")
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.preprocessing import Normalizer, StandardScaler  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402
from tinycore.onnx import OnnxRunner  # noqa: E402

rng = np.random.default_rng(0)
X = rng.standard_normal((64, 5)).astype(np.float32)
Y2 = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
Y3 = (X[:, 0] > 0).astype(np.int64) + (X[:, 2] > 0.5)

CASES = {
  "random_forest_3class": lambda: RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, Y3),
  "random_forest_binary": lambda: RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, Y2),
  "gradient_boosting_binary": lambda: GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, Y2),
  "gradient_boosting_3class": lambda: GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, Y3),
  "decision_tree": lambda: DecisionTreeClassifier(max_depth=5, random_state=0).fit(X, Y3),
  "random_forest_regressor": lambda: RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, X[:, 1] * 2 + X[:, 3]),
  "gradient_boosting_regressor": lambda: GradientBoostingRegressor(n_estimators=4, max_depth=3, random_state=0).fit(X, X[:, 1] - X[:, 4]),
  "logistic_3class": lambda: LogisticRegression().fit(X, Y3),
  "logistic_binary": lambda: LogisticRegression().fit(X, Y2),
  "linear_regression": lambda: LinearRegression().fit(X, X @ np.arange(5, dtype=np.float32) + 1),
  "standard_scaler": lambda: StandardScaler().fit(X),
  "normalizer_l2": lambda: Normalizer().fit(X),
  "normalizer_l1": lambda: Normalizer(norm="l1").fit(X),
  "normalizer_max": lambda: Normalizer(norm="max").fit(X),
}

# one of each op in the default run (about 5 s each on 2 cores); all of them under -m slow
QUICK = {"random_forest_3class", "gradient_boosting_binary", "logistic_binary", "linear_regression", "standard_scaler", "normalizer_l2"}

@pytest.mark.needs_device
@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in sorted(CASES)])
def test_sklearn_model_matches_onnxruntime(name):
  model = CASES[name]()
  onx = skl2onnx.to_onnx(model, X[:1], options={id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None,
                         target_opset={"": 17, "ai.onnx.ml": 3})
  data = rng.standard_normal((16, 5)).astype(np.float32)
  data[0, 1] = 0.0   # a value on a likely threshold side
  want = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {onx.graph.input[0].name: data})
  got = [v.numpy() for v in OnnxRunner(onx)({onx.graph.input[0].name: data}).values()]
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
    if w.dtype.kind in "iu": np.testing.assert_array_equal(g, w)
    else: np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)

def test_string_labels_are_refused():
  model = RandomForestClassifier(n_estimators=1, max_depth=2, random_state=0).fit(X, np.where(Y2 > 0, "yes", "no"))
  onx = skl2onnx.to_onnx(model, X[:1], options={id(model): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
  from tinycore.onnx import UnsupportedOpError
  with pytest.raises(UnsupportedOpError, match="string class labels"):
    OnnxRunner(onx)({onx.graph.input[0].name: X[:2]})["label"].numpy()
