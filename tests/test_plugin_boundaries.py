"""``serving/``, ``experiment/tune.py``, the MTEB writer and the training-set builder ask
plugins; they never name a recipe, an encoder, a backend or a task in code (docstrings may
tell history), nor match a recipe's or a task's class."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import disembed
from disembed.encoders import BACKENDS, ENCODERS
from disembed.evaluation import TASKS
from disembed.methods import METHODS

SRC = Path(disembed.__file__).parent
FILES = sorted((SRC / "serving").glob("*.py")) + [
    SRC / "experiment" / "tune.py", SRC / "reports" / "mteb_results.py"]
#: files that must name no task (a "seed" there is a random seed, not the recipe)
TASK_FREE = [SRC / "data" / "training_set.py", SRC / "experiment" / "run.py"]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def plugin_names_in(path: Path, tasks_only: bool = False) -> list[str]:
    """Recipe, encoder, backend and task names used as string literals, and recipe, backend
    and task classes named, in the code of ``path`` (the pip extra of ``require(...)`` is
    not a name)."""
    names = set(TASKS.names())
    classes = {TASKS.get(n).__name__ for n in TASKS.names()}
    if not tasks_only:
        names |= set(METHODS.names()) | set(ENCODERS.names()) | set(BACKENDS.names())
        classes |= {METHODS.get(n).__name__ for n in METHODS.names()} | {
            BACKENDS.get(n).__name__ for n in BACKENDS.names()}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "require":
            skip.update(id(a) for a in node.args)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found += [node.value] if node.value in names else []
        elif isinstance(node, ast.Name) and node.id in classes:
            found.append(node.id)
        elif isinstance(node, ast.alias) and node.name in classes:
            found.append(node.name)
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_plugin_is_named_outside_its_own_file(path):
    assert plugin_names_in(path) == []


@pytest.mark.parametrize("path", TASK_FREE, ids=lambda p: p.name)
def test_no_task_is_named_where_the_tasks_are_asked(path):
    assert plugin_names_in(path, tasks_only=True) == []


def test_the_check_finds_a_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"""seed is fine here."""\nfrom x import Baseline, WMT20QETask\n'
                   'GRID = {"seed": 1}\nok = require("y", "st", "z")\n'
                   'SETS = ("tatoeba", "sts17")\n')
    assert sorted(plugin_names_in(bad)) == ["Baseline", "WMT20QETask", "seed", "sts17",
                                            "tatoeba"]
