"""The shape the house style asks for, checked over the whole package: no function over 60
lines, and at most 10 imports of disembed modules inside functions, each one listed here
with the optional dependency it keeps out of a core install (an import in a function is
otherwise a back-stair around the layers that import-linter checks)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import disembed

SRC = Path(disembed.__file__).parent
MAX_LINES = 60
MAX_LAZY = 10
#: (file, imported module) -> the optional package that module imports at its top
LAZY_ALLOWED = {
    ("serving/app.py", "routes"): "starlette",  # fastapi's, the [serve] extra
    ("serving/st_pipeline.py", "exported_module"): "sentence_transformers",  # [st]
}


def _functions(tree: ast.AST):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def lazy_internal_imports(root: Path = SRC) -> list[tuple[str, str]]:
    """``(file, module)`` of every import of a disembed module inside a function."""
    out = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for fn in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (
                        node.level or (node.module or "").startswith("disembed")):
                    for alias in ([] if node.module else node.names):
                        out.add((rel, alias.name))  # from . import schemas
                    if node.module:
                        out.add((rel, node.module.rsplit(".", 1)[-1]))
                elif isinstance(node, ast.Import):
                    out |= {(rel, a.name) for a in node.names if a.name.startswith("disembed")}
    return sorted(out)


def long_functions(root: Path = SRC) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        for fn in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            lines = fn.end_lineno - fn.lineno + 1
            if lines > MAX_LINES:
                out.append(f"{path.relative_to(root)}:{fn.lineno} {fn.name} ({lines} lines)")
    return out


def _imports_at_top(path: Path, package: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)]
    return any(name.split(".")[0] == package for name in names)


def test_no_function_is_longer_than_60_lines():
    assert long_functions() == []


def test_lazy_internal_imports_are_few_and_each_guards_an_optional_dependency():
    lazy = lazy_internal_imports()
    assert len(lazy) <= MAX_LAZY, lazy
    assert [x for x in lazy if x not in LAZY_ALLOWED] == [], (
        "an import inside a function that guards no optional dependency: import it at the "
        "top of the module (or list it here with the extra it keeps out of a core install)")
    for (file, module), package in LAZY_ALLOWED.items():
        target = SRC / Path(file).parent / f"{module}.py"
        assert _imports_at_top(target, package), f"{target} no longer imports {package}"


def test_the_checks_find_what_they_look_for(tmp_path):
    """A 61-line function and a back-stair import inside one are both found."""
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (tmp_path / "bad.py").write_text(
        f"def long():\n{body}\n\n\ndef lazy():\n    from .other import thing\n"
        "    from disembed.methods import base\n")
    assert long_functions(tmp_path) == ["bad.py:1 long (61 lines)"]
    assert lazy_internal_imports(tmp_path) == [("bad.py", "methods"), ("bad.py", "other")]


def test_every_module_is_in_an_import_linter_layer():
    """Issue 45: ``_openmp.py`` was in no layer, so import-linter checked nothing of it."""
    import pkgutil

    import tomllib

    pyproject = SRC.parents[1] / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("an installed disembed: no pyproject.toml beside it")
    contracts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"][
        "contracts"]
    layers = {name.strip() for c in contracts if c["type"] == "layers"
              for layer in c["layers"] for name in layer.split("|")}
    modules = [m.name for m in pkgutil.walk_packages(disembed.__path__, "disembed.")]
    outside = [m for m in modules
               if not any(m == name or m.startswith(name + ".") for name in layers)]
    assert len(modules) > 100 and outside == []
