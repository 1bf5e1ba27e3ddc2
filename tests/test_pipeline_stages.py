"""The pipeline belongs to the plugins (issue 19): a plugin's `tinycore_rewrite_rules(device, stage)` changes its
device's code at each named stage, only for its own device; and a backend core never saw that reuses the CPU renderer
gets the CPU's optimizations (core asks the renderer's capabilities, never the device's name)."""
import numpy as np
import pytest
from tinycore import plugins
from tinycore.device import Device
from tinycore.rewrite import PatternMatcher, UPat
from tinycore.uop import UOp, Ops
pytestmark = pytest.mark.needs_device

class StagePlugin:
  """Device STG: the CPU's renderer and runtime under a new name, plus whatever rules `RULES` holds per stage."""
  TINYCORE_PLUGIN_API = (plugins.PLUGIN_API, plugins.PLUGIN_API)
  RULES: dict = {}
  asked: list = []
  @staticmethod
  def tinycore_devices():
    def _open(name, spec):
      from tinycore.device import Compiled
      host = Device["CPU"]
      return Compiled(name, host.allocator, host.renderer, host.runtime)
    return [{"name": "STG", "factory": _open, "priority": -20}]
  @staticmethod
  def tinycore_renderers(device): return [{"name": "C", "default": True}] if device == "STG" else None
  @staticmethod
  def tinycore_rewrite_rules(device, stage):
    StagePlugin.asked.append((device, stage))
    return StagePlugin.RULES.get(stage) if device == "STG" else None

class Meddler:
  """Another plugin that tries to rewrite a device it doesn't provide."""
  TINYCORE_PLUGIN_API = (plugins.PLUGIN_API, plugins.PLUGIN_API)
  @staticmethod
  def tinycore_rewrite_rules(device, stage): return PatternMatcher([(UPat(Ops.SQRT, name="x"), lambda x: x.src[0] * 0 + 7)])

@pytest.fixture
def stg(registry):
  StagePlugin.RULES, StagePlugin.asked = {}, []
  registry.load_all()
  registry.register(StagePlugin, "stg")
  return registry

def _sqrt_to_exp2_log2(x: UOp) -> UOp:
  # a decomposition of an op the device "lacks": sqrt(v) = 2^(log2(v)/2)
  v = x.src[0]
  return UOp(Ops.EXP2, x.dtype, (UOp(Ops.LOG2, x.dtype, (v,)) * UOp.const(x.dtype, 0.5),))

_fresh = iter(range(1, 1 << 30))
def _run(expr, device):
  """expr on a fresh input (a constant no other call used, so its kernels compile now and the stage rules run; clearing
  the process's runner cache instead would dispose compiled programs still in use); returns the new kernels' source."""
  from tinycore import Tensor
  from tinycore.engine.run import _runners
  before = set(_runners)
  x = np.array([1.0, 4.0, 9.0, 2.0] * 8, np.float32)
  k = next(_fresh) * 1e-30
  out = expr(Tensor(x, device=device) + k).numpy()
  src = "\n".join(r.p.src for key, r in list(_runners.items()) if key not in before and key[0] == device)
  return x, out, src

@pytest.mark.parametrize("stage", ["tensor", "kernel", "program"])
def test_rule_at_each_stage_changes_the_code(stg, stage):
  StagePlugin.RULES[stage] = PatternMatcher([(UPat(Ops.SQRT, name="x"), _sqrt_to_exp2_log2)])
  x, out, src = _run(lambda t: t.sqrt(), "STG")
  np.testing.assert_allclose(out, np.sqrt(x), rtol=1e-5)
  assert "sqrt" not in src and "log2" in src, src      # the decomposition is what the renderer saw
  assert ("STG", stage) in StagePlugin.asked
  _, _, cpu_src = _run(lambda t: t.sqrt(), "CPU")          # CPU's pipeline is untouched
  assert "sqrt" in cpu_src

def test_rules_only_from_the_owner(stg):
  stg.register(Meddler, "meddler")
  x, out, _ = _run(lambda t: t.sqrt(), "STG")
  np.testing.assert_allclose(out, np.sqrt(x), rtol=1e-6)   # the meddler's rule (sqrt -> 7) never applied

def test_bad_rule_answer_is_a_clear_error(stg):
  StagePlugin.RULES["kernel"] = "not a matcher"
  with pytest.raises(TypeError, match=r"stg.*tinycore_rewrite_rules\('STG', 'kernel'\).*PatternMatcher"): _run(lambda t: t + 1, "STG")

def test_new_device_with_cpu_renderer_gets_cpu_kernels(stg):
  """Same renderer, new name: the same optimized kernels (vector tiles, panels, thread split), run by the same runtime,
  so the same speed (a device-name gate made this 4.4x slower; bench/ measures the ratio, a shared CI machine can't)."""
  from tinycore import Tensor
  from tinycore.codegen import get_program
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((512, 512)).astype(np.float32), rng.standard_normal((512, 512)).astype(np.float32)
  srcs = {}
  for dev in ("CPU", "STG"):
    ta, tb = Tensor(a, device=dev).realize(), Tensor(b, device=dev).realize()
    sched = [si for si in (ta @ tb).schedule() if not si.is_copy]
    srcs[dev] = [get_program(si.ast, Device[dev].renderer, device=dev).src for si in sched]
    np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-4, atol=1e-3)
  assert srcs["CPU"] == srcs["STG"] and "tc_float_16" in srcs["STG"][-1]
  assert Device["STG"].runtime is Device["CPU"].runtime
