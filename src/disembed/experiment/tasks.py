"""The one owner of task selection: which tasks exist, how they are built from the shared
options, and which evaluation sets must be kept out of training for them."""

from __future__ import annotations

from typing import Collection, Sequence

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


__all__ = ["DEFAULT_TASKS", "build_tasks", "check_tasks", "kept_out_sets"]
