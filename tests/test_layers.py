"""The house rules that code can check: import direction and where torch internals are used."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_tensordict_never_imports_tdnn() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tensordict").rglob("*.py")
        if any(name == "tdnn" or name.startswith("tdnn.") for name in _imports(p))
        or (
            "tdnn" in p.read_text()
            and p.name != "nn.py"
            and "import" in p.read_text().split("tdnn")[0][-40:]
        )
    ]
    assert offenders == []


def test_core_import_does_not_load_tdnn_and_the_alias_does() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tensordict; assert 'tdnn' not in sys.modules; "
        "import tensordict.nn as nn_alias, tdnn; assert nn_alias is tdnn; "
        "from tensordict.nn import TensorDictModule; print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_the_core_never_loads_the_module_layer() -> None:
    # only the alias module tensordict/nn.py names it, and _module_names.py goes through
    # that alias when one of upstream's four top-level module-layer names is asked for;
    # from_module(as_module=True) goes through a factory the module layer registers
    # (tensordict.utils.register_params_module)
    users = sorted(
        p.name
        for p in (ROOT / "tensordict").rglob("*.py")
        if "import_module(" in p.read_text()
        or "__import__(" in p.read_text()
        or "tensordict.nn" in {*_imports(p)}
        or any(name == "tdnn" or name.startswith("tdnn.") for name in _imports(p))
    )
    assert users == ["_module_names.py", "nn.py"]
    assert '"tensordict.nn"' in (ROOT / "tensordict" / "_module_names.py").read_text()


def test_as_module_without_the_module_layer_says_what_to_import() -> None:
    import subprocess
    import sys

    code = (
        "import torch, tensordict\n"
        "try:\n"
        "    tensordict.TensorDict.from_module(torch.nn.Linear(2, 2), as_module=True)\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert "import tensordict.nn" in done.stdout, done.stderr


def test_tdnn_uses_only_public_tensordict_names() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tdnn").rglob("*.py")
        if any(name.startswith("tensordict._") for name in _imports(p))
    ]
    assert offenders == []


def test_importing_the_library_does_not_load_dynamo() -> None:
    # torch._dynamo costs ~1.2 s of import (each spawned worker pays it): loaded on first
    # use under torch.compile only
    import subprocess
    import sys

    code = "import sys, tensordict, tdnn; print('torch._dynamo' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "False", done.stderr


def test_torch_private_apis_live_in_one_file() -> None:
    users = []
    for p in (ROOT / "tensordict").rglob("*.py"):
        text = p.read_text()
        if "torch._" in text.replace("torch._C._", "") or "torch._C" in text:
            users.append(p.name)
    assert users == ["_torch_compat.py"]


def test_every_module_opens_with_a_docstring() -> None:
    missing = [
        str(p.relative_to(ROOT))
        for package in ("tensordict", "tdnn")
        for p in (ROOT / package).rglob("*.py")
        if ast.get_docstring(ast.parse(p.read_text())) is None
    ]
    assert missing == []


def test_init_modules_only_re_export() -> None:
    for package in ("tensordict", "tdnn"):
        tree = ast.parse((ROOT / package / "__init__.py").read_text())
        for node in tree.body:
            assert isinstance(
                node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.Expr)
            ), f"{package}/__init__.py holds a {type(node).__name__}"


_CONCRETE = {
    "tensordict._td": {"TensorDict"},
    "tensordict._lazy": {"LazyStackedTensorDict"},
    "tensordict._tensorclass": {"TensorClass", "tensorclass"},
    "tensordict._io_persistent": {"PersistentTensorDict"},
}


def _type_only_imports(tree: ast.Module) -> list[tuple[str, str]]:
    """``(module, name)`` imported inside an ``if TYPE_CHECKING:`` block."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.module:
                    found.extend((inner.module, alias.name) for alias in inner.names)
    return found


def test_operation_modules_type_against_the_abstract_bases() -> None:
    # the operations are written once against TensorDictBase (or DenseTensorDictBase for
    # the dense-storage helpers): no module names a concrete collection for its types
    offenders = sorted(
        f"{p.name}: {module}.{name}"
        for p in (ROOT / "tensordict").glob("_*.py")
        for module, name in _type_only_imports(ast.parse(p.read_text()))
        if name in _CONCRETE.get(module, set())
    )
    assert offenders == []


def test_the_type_only_import_check_sees_a_concrete_import() -> None:
    source = "if TYPE_CHECKING:\n    from tensordict._td import TensorDict\n"
    assert _type_only_imports(ast.parse(source)) == [("tensordict._td", "TensorDict")]


def test_module_layer_names_upstream_exports_at_the_top_are_reached_lazily() -> None:
    code = (
        "import sys, tensordict; assert 'tdnn' not in sys.modules; "
        "from tensordict import TensorDictParams, TensorClassModuleBase, "
        "TensorClassModuleWrapper, as_tensordict_module; import tdnn; "
        "assert TensorDictParams is tdnn.TensorDictParams; "
        "assert 'TensorDictParams' not in tensordict.__all__"
    )
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_ragged_helpers_sit_below_the_lazy_stack_class() -> None:
    # the ragged errors and the padding helpers are used by the lazy stack class, never
    # the other way round
    for name in ("_ragged.py", "_ragged_pad.py", "_lazy_ragged.py", "_lazy_index.py"):
        imported = _imports(ROOT / "tensordict" / name)
        assert "tensordict._lazy" not in imported, name
