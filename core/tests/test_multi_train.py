"""Data-parallel training: the batch sharded over devices, the weights replicated with shard_, SGD and Adam, with and
without TinyJit, must end with the weights the same steps give on one device (to float tolerance), and with every
device's replica of each weight bitwise equal (the all-reduce sums the partials in one order everywhere)."""
import numpy as np
import pytest
from tinycore import Tensor, TinyJit
from tinycore.nn import optim

pytestmark = pytest.mark.needs_device
D2 = ("CPU:0", "CPU:1")
D4 = ("CPU:0", "CPU:1", "CPU:2", "CPU:3")
EMU_NV = ("EMU:0+NV", "EMU:1+NV")
rng = np.random.default_rng(1)
IN, HID, OUT, BATCH, STEPS = 6, 10, 3, 16, 4
INIT = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((IN, HID), (HID,), (HID, OUT))]
DATA = [(rng.standard_normal((BATCH, IN)).astype(np.float32), np.eye(OUT, dtype=np.float32)[rng.integers(0, OUT, BATCH)]) for _ in range(STEPS)]

def _loss(params: list[Tensor], x: Tensor, y: Tensor) -> Tensor:
  w1, b1, w2 = params
  logits = (x @ w1 + b1).relu() @ w2
  return -(logits.log_softmax(1) * y).sum(1).mean()

def _train_step(params: list[Tensor], opt):
  """One optimizer step on _loss, returning the loss (the function TinyJit captures, or that runs eagerly)."""
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = _loss(params, x, y)
    loss.backward()
    opt.step()
    return loss
  return step

def _train(devices, make_opt, jit: bool, data=DATA, init=INIT) -> tuple[list[np.ndarray], list[float], list[Tensor]]:
  params = [Tensor(a, requires_grad=True) for a in init]
  if devices is not None:
    for p in params: p.shard_(devices)   # replicated weights
    Tensor.realize(*params)
  opt = make_opt(params)
  step = _train_step(params, opt)
  run = TinyJit(step) if jit else step
  losses = []
  for xb, yb in data:
    x, y = Tensor(xb), Tensor(yb)
    if devices is not None: x, y = x.shard(devices, 0), y.shard(devices, 0)   # the batch split over the devices
    losses.append(float(run(x, y).numpy()))
  return [p.numpy() for p in params], losses, params

OPTS = {"sgd": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), "adam": lambda ps: optim.Adam(ps, lr=0.01)}

@pytest.mark.parametrize("devices", [D2, D4], ids=["2cpu", "4cpu"])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("opt", list(OPTS))
def test_data_parallel_matches_one_device(opt, jit, devices):
  ref_w, ref_l, _ = _train(None, OPTS[opt], jit=False)
  got_w, got_l, params = _train(devices, OPTS[opt], jit=jit)
  np.testing.assert_allclose(got_l, ref_l, rtol=1e-5, atol=1e-6)
  for g, r in zip(got_w, ref_w): np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
  assert not np.allclose(ref_w[0], INIT[0])   # training moved the weights
  for p in params:
    assert p.device == tuple(Tensor(0, device=d).device for d in devices) and p.is_realized()
    reps = [Tensor(s).numpy() for s in p.uop.src]
    for r in reps[1:]: np.testing.assert_array_equal(r, reps[0])

def test_data_parallel_large_layer():
  # w1's gradient (96 x 64) is big enough that its all-reduce reduce-scatters, then all-gathers
  from tinycore.engine.multi import SCATTER_MIN
  init = [rng.standard_normal(s).astype(np.float32) * 0.1 for s in ((96, 64), (64,), (64, OUT))]
  assert init[0].size >= SCATTER_MIN
  data = [(rng.standard_normal((BATCH, 96)).astype(np.float32), np.eye(OUT, dtype=np.float32)[rng.integers(0, OUT, BATCH)]) for _ in range(3)]
  ref_w, ref_l, _ = _train(None, OPTS["adam"], jit=False, data=data, init=init)
  got_w, got_l, params = _train(D4, OPTS["adam"], jit=True, data=data, init=init)
  np.testing.assert_allclose(got_l, ref_l, rtol=1e-5, atol=1e-6)
  for g, r in zip(got_w, ref_w): np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
  reps = [Tensor(s).numpy() for s in params[0].uop.src]
  for r in reps[1:]: np.testing.assert_array_equal(r, reps[0])

def test_jit_replays_on_the_shards_in_place():
  params = [Tensor(a, requires_grad=True).shard_(D2) for a in INIT]
  Tensor.realize(*params)
  bufs = [[s.base.arg for s in p.uop.src] for p in params]
  opt = optim.SGD(params, lr=0.1)
  step = TinyJit(_train_step(params, opt))
  for xb, yb in DATA: step(Tensor(xb).shard(D2, 0), Tensor(yb).shard(D2, 0))
  assert step.cnt == len(DATA) and len(step.jit_cache) > 0
  assert [[s.base.arg for s in p.uop.src] for p in params] == bufs   # updated where they live
  from tinycore.engine.jit import JitError
  with pytest.raises(JitError, match="changed"): step(Tensor(DATA[0][0]).shard(D2, 1), Tensor(DATA[0][1]).shard(D2, 0))

def test_jit_sharded_and_plain_inputs_returned():
  @TinyJit
  def f(x: Tensor, y: Tensor):
    return x * 2 + y.sum().to(x.device), y, x
  for k in range(4):
    a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3,)).astype(np.float32)
    x, y = Tensor(a).shard(D2, 0).realize(), Tensor(b).realize()
    out, y_out, x_out = f(x, y)
    np.testing.assert_allclose(out.numpy(), a * 2 + b.sum(), rtol=1e-6)
    np.testing.assert_array_equal(y_out.numpy(), b); np.testing.assert_array_equal(x_out.numpy(), a)   # inputs come back as this call's
  assert f.cnt == 4

def test_emulated_gpus():
  # two NV devices served by the emulator: the same step as on one CPU
  data = DATA[:2]
  ref_w, ref_l, _ = _train(None, OPTS["sgd"], jit=False, data=data)
  got_w, got_l, _ = _train(EMU_NV, OPTS["sgd"], jit=True, data=data)
  np.testing.assert_allclose(got_l, ref_l, rtol=1e-4, atol=1e-5)
  for g, r in zip(got_w, ref_w): np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)

def test_emulated_gpus_ops():
  a = rng.standard_normal((8, 6)).astype(np.float32)
  w = rng.standard_normal((6, 4)).astype(np.float32)
  x = Tensor(a).shard(EMU_NV, 0)
  np.testing.assert_allclose((x * 2 + 1).numpy(), a * 2 + 1, rtol=1e-6)
  np.testing.assert_allclose(x.sum(0).numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose((Tensor(a).shard(EMU_NV, 1) @ Tensor(w).shard(EMU_NV, 0)).numpy(), a @ w, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(x.to("CPU").numpy(), a)
  mixed = ("CPU", "EMU:0+NV")   # two backends in one tuple: copies between them
  np.testing.assert_allclose((Tensor(a).shard(mixed, 1) @ Tensor(w).shard(mixed, 0)).numpy(), a @ w, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(Tensor(a).shard(mixed, 0).sum(0).numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
