"""The Tensor frontend's layering: mixins reach Tensor only through tensor_base (the factory and the declared primitives)."""
import ast, pathlib
import pytest
import tinycore.tensor as tensor_mod
from tinycore.tensor import Tensor
from tinycore.tensor_base import TensorBase, tensor_type

MIXINS = [c for c in Tensor.__mro__[1:] if c.__name__.endswith("Mixin")]

def _module_path(cls: type) -> pathlib.Path: return pathlib.Path(__import__(cls.__module__, fromlist=["_"]).__file__)

def _is_type_checking_block(node: ast.AST) -> bool:
  return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"

def test_every_mixin_builds_on_tensor_base():
  assert len(MIXINS) >= 8, [c.__name__ for c in MIXINS]
  for cls in MIXINS: assert issubclass(cls, TensorBase), f"{cls.__name__} doesn't declare its primitives through TensorBase"

def test_mixins_import_tensor_only_for_type_checking():
  for cls in MIXINS:
    tree = ast.parse(_module_path(cls).read_text())
    allowed = {id(n) for top in tree.body if _is_type_checking_block(top) for n in ast.walk(top)}
    bad = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "tinycore.tensor" and id(n) not in allowed]
    assert not bad, f"{cls.__module__} imports tinycore.tensor at lines {bad}: construct tensors through tensor_base.tensor_type()"

def test_no_op_defined_twice_across_tensor_and_mixins():
  # a name defined in two classes would depend on the order of Tensor's bases: one concern, one place
  owners: dict[str, str] = {}
  for cls in (Tensor, *MIXINS):
    for name, v in vars(cls).items():
      if callable(v) or isinstance(v, (staticmethod, property)):
        if name.startswith("__") and name.endswith("__"): continue
        assert name not in owners, f"{name} is defined in both {owners[name]} and {cls.__name__}"
        owners[name] = cls.__name__

@pytest.mark.needs_device
def test_factory_is_the_tensor_class():
  assert tensor_type() is Tensor is tensor_mod.Tensor
  t = Tensor([1.0, 2.0, 3.0])
  assert isinstance(Tensor.linspace(0, 1, 3), Tensor) and t.pad(((1, 1),), value=5.0).tolist() == [5.0, 1.0, 2.0, 3.0, 5.0]

def _declared_primitives() -> dict[str, list[str]]:
  """name -> parameter names, for every method TensorBase declares (in its TYPE_CHECKING block)."""
  tree = ast.parse(pathlib.Path(_module_path(TensorBase)).read_text())
  cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TensorBase")
  block = next(n for n in cls.body if _is_type_checking_block(n))
  return {f.name: [a.arg for a in (*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs)] for f in block.body if isinstance(f, ast.FunctionDef)}

def test_declared_primitives_match_tensor():
  import inspect
  declared = _declared_primitives()
  assert len(declared) > 30
  for name, params in declared.items():
    impl = inspect.getattr_static(Tensor, name)
    fn = impl.fget if isinstance(impl, property) else impl.__func__ if isinstance(impl, staticmethod) else impl
    got = list(inspect.signature(fn).parameters)
    got = [p for p in got if inspect.signature(fn).parameters[p].kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    assert got == params, f"TensorBase declares {name}({', '.join(params)}) but Tensor has {name}({', '.join(got)})"
