"""The ONNX backend node tests (shipped inside the `onnx` package) as our conformance suite.

Each case is a folder with model.onnx and test_data_set_*/{input,output}_N.pb. `run_case` runs one and says pass / skip
(with the reason: the op we lack, an opset past MAX_OPSET, a non-tensor input) / fail (with the mismatch);
`python -m tinycore.onnx.conformance` prints the tally by op family."""
from __future__ import annotations
import glob, os, sys, time, collections
from dataclasses import dataclass
import numpy as np

def _default_max_opset() -> int:
  """The installed onnx package's newest opset (every node test it ships), unless TINYCORE_ONNX_MAX_OPSET says otherwise."""
  if "TINYCORE_ONNX_MAX_OPSET" in os.environ: return int(os.environ["TINYCORE_ONNX_MAX_OPSET"])
  try:
    import onnx
    return int(onnx.defs.onnx_opset_version())
  except ImportError: return 21

MAX_OPSET = _default_max_opset()
RTOL, ATOL = 1e-3, 1e-5   # the onnx backend runner's rtol; an atol that tolerates float32 ulps near zero
# float16 outputs: one float16 ulp at 1.0 (2^-10). The expanded fp16 graphs' expected values round every intermediate to
# float16; tinycore may round at other points, which moves a result in (0.5, 1) by one ulp (2^-11 > rtol * value)
FP16_ATOL = 2.0 ** -10
BF16_TOL = 2.0 ** -7    # bfloat16 outputs (8 significant bits): one bfloat16 ulp at 1.0, relative and absolute
# numpy has no bfloat16/float8: the onnx package returns ml_dtypes arrays, tinycore's .numpy() widens them to float32
# (exactly); those are compared as float32 after checking the Tensor's own dtype
_ML_DTYPES = {"bfloat16": "bfloat16", "float8_e4m3fn": "fp8e4m3", "float8_e5m2": "fp8e5m2"}

# Cases whose expected outputs follow a semantic we deliberately don't match. Each entry says why; nothing else may fail.
_RECIPROCAL_DIV = ("tinycore's float division multiplies by the reciprocal (within 1 ulp of IEEE division); here x/scale = "
                   "-2.5/0.0196078 lands on the tie -127.5 instead of -127.49999, and round-half-even then picks the other integer")
EXPECTED_FAILURES: dict[str, str] = {"test_dynamicquantizelinear": _RECIPROCAL_DIV, "test_dynamicquantizelinear_expanded": _RECIPROCAL_DIV}

@dataclass
class CaseResult:
  name: str
  status: str          # "pass" | "skip" | "fail"
  detail: str = ""
  op: str = ""

def node_test_root() -> str:
  """The node test folders: the copy inside the onnx package where its wheel ships one (older releases), else generated
  once from the package's own case scripts (onnx.backend.test.case.node: the same models and numpy-computed expected
  outputs) into tinycore's cache."""
  import onnx
  shipped = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
  if os.path.isdir(shipped) and os.listdir(shipped): return shipped
  from tinycore.helpers import cache_dir
  root = os.path.join(cache_dir(), f"onnx-node-tests-{onnx.__version__}")
  if not os.path.isdir(root): _generate(root)
  return root

def _generate(root: str) -> None:
  import shutil, tempfile, warnings
  from onnx import numpy_helper
  from onnx.backend.test.case import node
  os.makedirs(os.path.dirname(root), exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".onnx-node-", dir=os.path.dirname(root))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cases = node.collect_testcases(None)
  for case in cases:
    if not all(vi.type.HasField("tensor_type") for vi in list(case.model.graph.input) + list(case.model.graph.output)):
      continue   # sequence/map/optional values: not tensors, not run by tinycore.onnx
    d = os.path.join(tmp, case.name)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f: f.write(case.model.SerializeToString())
    for i, (ins, outs) in enumerate(case.data_sets):
      ds = os.path.join(d, f"test_data_set_{i}")
      os.makedirs(ds)
      for kind, vals, vis in (("input", ins, case.model.graph.input), ("output", outs, case.model.graph.output)):
        for j, v in enumerate(vals):
          t = v if hasattr(v, "SerializeToString") else numpy_helper.from_array(np.asarray(v), vis[j].name)
          with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f: f.write(t.SerializeToString())
  try: os.rename(tmp, root)   # atomic: a concurrent generator that got there first wins, this copy is dropped
  except OSError: shutil.rmtree(tmp, ignore_errors=True)

def case_names() -> list[str]:
  root = node_test_root()
  return sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "model.onnx")))

def _main_op(graph) -> str:
  ops = [n.op_type for n in graph.node]
  return next((o for o in ops if o != "Constant"), ops[0] if ops else "?")

def _read_tensors(folder: str, prefix: str):
  import onnx
  from onnx import numpy_helper
  out = []
  for f in sorted(glob.glob(os.path.join(folder, f"{prefix}_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3])):
    raw = open(f, "rb").read()
    t = onnx.TensorProto()
    t.ParseFromString(raw)
    if not t.dims and not t.raw_data and t.data_type == 0: return None   # a sequence/optional/map value, not a tensor
    out.append(numpy_helper.to_array(t))
  return out

def run_case(name: str, device: str | None = None, max_opset: int | None = None) -> CaseResult:
  import onnx
  from tinycore.onnx.runner import OnnxRunner, _graph_ops
  from tinycore.onnx.registry import UnsupportedOpError, load_all
  folder = os.path.join(node_test_root(), name)
  model = onnx.load(os.path.join(folder, "model.onnx"))
  op = _main_op(model.graph)
  opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
  limit = MAX_OPSET if max_opset is None else max_opset
  if opset > limit: return CaseResult(name, "skip", f"opset {opset} > {limit}", op)
  missing = sorted(o for o in _graph_ops(model.graph) if o not in load_all())
  if missing: return CaseResult(name, "skip", f"unsupported op {', '.join(missing)}", op)
  for vi in list(model.graph.input) + list(model.graph.output):
    if not vi.type.HasField("tensor_type"): return CaseResult(name, "skip", f"non-tensor value {vi.name!r} ({vi.type.WhichOneof('value')})", op)
  sets = sorted(glob.glob(os.path.join(folder, "test_data_set_*")))
  try:
    runner = OnnxRunner(os.path.join(folder, "model.onnx"), device=device)
    init = set(runner.model.weights)
    in_names = [i.name for i in model.graph.input if i.name not in init]
    for ds in sets:
      ins, outs = _read_tensors(ds, "input"), _read_tensors(ds, "output")
      if ins is None or outs is None: return CaseResult(name, "skip", "non-tensor test data", op)
      got = runner(dict(zip(in_names, [_as_input(x, runner.device) for x in ins])))
      for (oname, gt), want in zip(got.items(), outs):
        g = gt.numpy()
        if want.dtype.name in _ML_DTYPES:
          if gt.dtype.name != _ML_DTYPES[want.dtype.name]:
            return _fail(name, op, f"output {oname!r}: dtype {gt.dtype.name}, expected {want.dtype.name}")
          want = want.astype(np.float32)
          if gt.dtype.name == "bfloat16" and not np.allclose(g, want, rtol=BF16_TOL, atol=BF16_TOL, equal_nan=True):
            return _fail(name, op, f"output {oname!r}: max abs diff {np.nanmax(np.abs(g - want)):.3g} (bfloat16: rtol = atol = {BF16_TOL})")
          if gt.dtype.name == "bfloat16": continue
        if g.dtype != want.dtype and not (want.dtype == np.dtype("O")):
          return _fail(name, op, f"output {oname!r}: dtype {g.dtype}, expected {want.dtype}")
        if g.shape != want.shape: return _fail(name, op, f"output {oname!r}: shape {g.shape}, expected {want.shape}")
        if want.dtype.kind in "fc":
          atol = FP16_ATOL if want.dtype == np.float16 else ATOL
          if not np.allclose(g, want, rtol=RTOL, atol=atol, equal_nan=True):
            err = np.nanmax(np.abs(g.astype(np.float64) - want.astype(np.float64))) if g.size else 0.0
            return _fail(name, op, f"output {oname!r}: max abs diff {err:.3g} (rtol {RTOL}, atol {atol})")
        elif not np.array_equal(g, want):
          return _fail(name, op, f"output {oname!r}: {int((g != want).sum())} of {g.size} values differ")
  except UnsupportedOpError as e: return CaseResult(name, "skip", f"unsupported: {e}", op)
  except Exception as e: return _fail(name, op, f"{type(e).__name__}: {e}")
  return CaseResult(name, "pass", "", op)

def _as_input(x: np.ndarray, device):
  """A test input as the runner takes it: an ml_dtypes array (bfloat16/float8) becomes a Tensor of that dtype, cast from
  its exact float32 widening."""
  if x.dtype.name not in _ML_DTYPES: return x
  from tinycore.tensor import Tensor
  from tinycore.dtype import dtypes
  return Tensor(x.astype(np.float32), device=device).cast(getattr(dtypes, _ML_DTYPES[x.dtype.name]))

def _fail(name, op, detail) -> CaseResult:
  if name in EXPECTED_FAILURES: return CaseResult(name, "skip", f"expected failure: {EXPECTED_FAILURES[name]} ({detail})", op)
  return CaseResult(name, "fail", detail, op)

def op_family(op: str) -> str:
  from tinycore.onnx.registry import load_all
  fn = load_all().get(op)
  return fn.__module__.rsplit("ops_", 1)[-1] if fn is not None else "unsupported"

def main(argv=None) -> int:
  import argparse
  p = argparse.ArgumentParser(prog="python -m tinycore.onnx.conformance", description=__doc__)
  p.add_argument("-k", default="", help="only cases whose name contains this")
  p.add_argument("--device", default=None)
  p.add_argument("-v", action="store_true", help="print every failure and skip reason")
  p.add_argument("--max-opset", type=int, default=None, help=f"run cases up to this opset (default {MAX_OPSET})")
  a = p.parse_args(argv)
  t0 = time.perf_counter()
  tally: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  results = [run_case(n, a.device, a.max_opset) for n in case_names() if a.k in n]
  for r in results:
    tally[op_family(r.op)][r.status] += 1
    if a.v and r.status != "pass": print(f"{r.status:4s} {r.name}: {r.detail}")
  print(f"{'family':14s} {'pass':>5s} {'fail':>5s} {'skip':>5s}")
  for fam in sorted(tally): print(f"{fam:14s} {tally[fam]['pass']:5d} {tally[fam]['fail']:5d} {tally[fam]['skip']:5d}")
  tot = collections.Counter(r.status for r in results)
  print(f"{'total':14s} {tot['pass']:5d} {tot['fail']:5d} {tot['skip']:5d}   ({len(results)} cases, {time.perf_counter() - t0:.0f}s)")
  return 1 if tot["fail"] else 0

if __name__ == "__main__": sys.exit(main())
