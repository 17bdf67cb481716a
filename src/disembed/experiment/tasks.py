"""The one owner of task selection: which tasks exist, how they are built from the shared
options, and which evaluation sets must be kept out of training for them."""

from __future__ import annotations

from dataclasses import Field, fields
from typing import Any, Collection, Mapping, Sequence

from ..evaluation import DEFAULT_TASKS, TASKS, EvalOptions, Task


def check_tasks(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` validated against the task registry ("did you mean" for typos); ``all``
    expands to every registered task."""
    out: list[str] = []
    for name in names:
        out += TASKS.names() if name == "all" else [name]
    for name in out:
        TASKS.get(name)  # raises UnknownNameError with a suggestion
    return tuple(dict.fromkeys(out))


def kept_out_sets(task_names: Sequence[str]) -> tuple[str, ...]:
    """The evaluation sets (training-set builder names) the tasks read: these are removed
    from training data. No tasks (a run that only trains): those of the default tasks."""
    names = task_names or DEFAULT_TASKS
    return tuple(dict.fromkeys(TASKS.get(n).metadata.eval_set for n in names))


def build_tasks(names: Sequence[str], options: EvalOptions, *, data_dir: str | None = None,
                supported: Collection[str] | None = None) -> list[Task]:
    """Task instances for ``names``; ``supported``: the encoder's languages (Tatoeba skips
    the others)."""
    return [TASKS.get(name).from_options(options, data_dir=data_dir, supported=supported)
            for name in check_tasks(names)]


def validation_tasks(data_dir: str | None = None) -> list[Task]:
    """Every registered task that declares a validation split, built on it (every item):
    what ``tune`` scores candidates on, besides held-out pairs."""
    built = (TASKS.get(name).validation(data_dir) for name in TASKS.names())
    return [task for task in built if task is not None]


def option_flags() -> list[tuple[str, Field]]:
    """Every task option that declares a command-line flag: ``(task name, field)``."""
    return [(name, f) for name in TASKS.names() for f in fields(TASKS.get(name).Options)
            if f.metadata.get("flag")]


def flag_dest(f: Field) -> str:
    """The argparse destination of an option's flag (``--qe-split`` -> ``qe_split``)."""
    return f.metadata["flag"].lstrip("-").replace("-", "_")


def check_task_options(options: EvalOptions) -> EvalOptions:
    """``options`` with every task's own options checked by that task (unknown task names
    get "did you mean", unknown option names the task's list)."""
    for name in options.task_options:
        TASKS.get(name).options_of(options)
    return options


def eval_options_from_dict(data: Mapping[str, Any]) -> EvalOptions:
    """The saved form of :class:`EvalOptions`; a file from before tasks owned their options
    (``tatoeba_languages``, ``qe_split`` at the top level) is read by each option's flag name."""
    d = dict(data)
    task_options = {k: dict(v) for k, v in (d.pop("task_options", None) or {}).items()}
    for task, f in option_flags():
        if flag_dest(f) in d:
            task_options.setdefault(task, {})[f.name] = d.pop(flag_dest(f))
    return check_task_options(EvalOptions(**d, task_options=task_options))


__all__ = ["DEFAULT_TASKS", "build_tasks", "check_task_options", "check_tasks",
           "eval_options_from_dict", "flag_dest", "kept_out_sets", "option_flags",
           "validation_tasks"]
