"""Packaging can't rot: every distribution in the repository builds an sdist and, from that sdist, a wheel; core and the
CPU plugin (and tinyctl) install from those wheels into a fresh virtual environment and compute there, outside this checkout.

Offline: the build uses the hatchling already installed (--no-isolation), and the fresh environment installs with
--no-index from the built wheels plus a wheelhouse made from this environment's own installed copies of their declared
dependencies (numpy, pluggy, attrs, typer and its own), so pip still resolves every declared dependency but reaches no
index. Slow (about a minute): run with `pytest -m slow tests/test_packaging.py`; .ci/run runs it as a step of its own."""
from __future__ import annotations
import base64, csv, hashlib, io, os, re, subprocess, sys, tarfile, zipfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = {"core": "tinycore", "cli": "tinyctl", **{f"plugins/{p.name}": f"tinycore-{p.name}" for p in sorted((ROOT / "plugins").iterdir())
                                                             if (p / "pyproject.toml").is_file()}}

def _run(*cmd: str | Path, cwd: Path | None = None, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
  r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
  if r.returncode != 0: raise AssertionError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
  return r

def _norm(name: str) -> str: return re.sub(r"[-_.]+", "_", name).lower()

def wheel_from_installed(name: str, out: Path) -> Path:
  """A wheel of installed distribution `name`, made from the files its RECORD lists (the offline wheelhouse).
  Scripts outside site-packages (`../../bin`) are left out: the fresh environment makes its own."""
  d = distribution(name)
  tags = [ln.split(":", 1)[1].strip().split("-") for ln in (d.read_text("WHEEL") or "").splitlines() if ln.startswith("Tag:")]
  tag = "-".join(".".join(dict.fromkeys(t[i] for t in tags)) for i in range(3))   # py2-none-any + py3-none-any: py2.py3-none-any
  dist_info = f"{_norm(d.metadata['Name'])}-{d.version}.dist-info"
  path = out / f"{_norm(d.metadata['Name'])}-{d.version}-{tag}.whl"
  rows = []
  with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    for f in d.files or []:
      src = Path(str(d.locate_file(f)))
      if ".." in f.parts or f.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json") or "__pycache__" in f.parts or not src.is_file():
        continue
      data = src.read_bytes()
      arc = str(f).replace(f.parts[0], dist_info, 1) if f.parts[0].endswith(".dist-info") else str(f)
      z.writestr(arc, data)
      rows.append((arc, "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode(), str(len(data))))
    buf = io.StringIO()
    csv.writer(buf).writerows([*rows, (f"{dist_info}/RECORD", "", "")])
    z.writestr(f"{dist_info}/RECORD", buf.getvalue())
  return path

def runtime_closure(name: str) -> set[str]:
  """The installed distributions `name` needs at run time on this platform (no extras), tinycore's own left out."""
  from packaging.requirements import Requirement
  todo, seen = [name], set()
  while todo:
    for req in distribution(todo.pop()).requires or []:
      r = Requirement(req)
      if (r.marker is not None and not r.marker.evaluate({"extra": ""})) or _norm(r.name).startswith(("tinycore", "tinyctl")): continue
      if (n := _norm(r.name)) not in seen: seen.add(n); todo.append(r.name)
  return seen

@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
  """Every distribution built: `python -m build` makes the sdist, then the wheel from that sdist (so a file missing from
  the sdist fails here, not on a user's machine)."""
  pytest.importorskip("build", reason="the packaging test needs `build` (scripts/setup --test installs it)")
  pytest.importorskip("hatchling", reason="the packaging test builds with the installed hatchling (--no-isolation, offline)")
  out = tmp_path_factory.mktemp("dist")
  for folder in DISTRIBUTIONS: _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT / folder)
  return out

def test_every_distribution_builds_wheel_and_sdist(built: Path):
  for folder, dist in DISTRIBUTIONS.items():
    wheels, sdists = list(built.glob(f"{_norm(dist)}-*.whl")), list(built.glob(f"{_norm(dist)}-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, (dist, sorted(p.name for p in built.iterdir()))
    with zipfile.ZipFile(wheels[0]) as z:
      names = z.namelist()
      pkg = next(p.name for p in (ROOT / folder).iterdir() if (p / "__init__.py").is_file())
      assert f"{pkg}/__init__.py" in names, f"{wheels[0].name} lacks its package {pkg}"
      assert not any(n.startswith("tests/") for n in names), f"{wheels[0].name} ships the tests folder"
      if folder.startswith("plugins/"):   # the plugin is found through its entry point: it must be in the wheel's metadata
        eps = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        assert "[tinycore.backends]" in eps, eps
    with tarfile.open(sdists[0]) as t:
      assert any(m.name.endswith("/pyproject.toml") for m in t.getmembers()), f"{sdists[0].name} has no pyproject.toml"

def test_install_core_and_cpu_from_wheels_and_compute(built: Path, tmp_path: Path):
  house = tmp_path / "wheelhouse"
  house.mkdir()
  try:
    for dep in runtime_closure("tinycore") | runtime_closure("tinyctl"): wheel_from_installed(dep, house)
  except PackageNotFoundError as e: pytest.skip(f"{e} is not installed here to make the offline wheelhouse from")
  venv = tmp_path / "venv"
  _run(sys.executable, "-m", "venv", venv)
  py = venv / "bin" / "python"
  _run(py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--find-links", built, "--find-links", house,
       "tinycore", "tinycore-cpu", "tinyctl")
  env = {k: v for k, v in os.environ.items() if not k.startswith(("TINYCORE_", "PYTHON")) and k not in ("DEV", "VIRTUAL_ENV")}
  code = ("import numpy as np, tinycore, tinycore_cpu\n"
          "from tinycore import Tensor, Device\n"
          "x = np.arange(12, dtype=np.float32).reshape(3, 4)\n"
          "got = (Tensor(x) @ Tensor(x.T) + 1).relu().sum(1).numpy()\n"
          "np.testing.assert_allclose(got, np.maximum(x @ x.T + 1, 0).sum(1), rtol=1e-6)\n"
          "print(Device.DEFAULT, tinycore.__file__, tinycore_cpu.__file__)")
  out = _run(py, "-c", code, cwd=tmp_path, env=env).stdout.split()   # cwd outside the checkout: nothing imports from it
  assert out[0] == "CPU" and all(str(venv) in f for f in out[1:]), out
  # the errors a user of this minimal install meets name the fix: the distribution for a device, the extra for a module
  probe = "from tinycore import Device\ntry: Device.DEFAULT\nexcept Exception as e: print(type(e).__name__, '|', e)"
  nv = _run(py, "-c", probe, cwd=tmp_path, env={**env, "DEV": "NV"}).stdout
  assert nv.startswith("UnknownDeviceError |") and "NV is provided by tinycore-nv: `pip install tinycore-nv`" in nv, nv
  have_llvmlite = _run(py, "-c", "import importlib.util as u; print(u.find_spec('llvmlite') is not None)", cwd=tmp_path, env=env).stdout.strip()
  if have_llvmlite == "False":
    llvm = _run(py, "-c", probe, cwd=tmp_path, env={**env, "DEV": "CPU:LLVM"}).stdout
    assert llvm.startswith("MissingDependencyError |") and "pip install 'tinycore-cpu[llvm]'" in llvm, llvm
  # tinyctl, installed from its wheel with only its declared dependencies: it runs, and the check it makes passes
  doctor = _run(venv / "bin" / "tinyctl", "doctor", "CPU", "--json", cwd=tmp_path, env=env).stdout
  import json
  assert any(f["kind"] == "device" and f["device"] == "CPU" and f["ok"] for f in json.loads(doctor)), doctor
