"""Evaluation: one file per task, pure metrics, typed results.

>>> task = TASKS.get("tatoeba")(languages="tatoeba-14", max_items=None, seed=0)
>>> scores = task.evaluate(embed, views)          # doctest: +SKIP
>>> scores.main_score("meaning")                  # doctest: +SKIP
"""

from __future__ import annotations

from ..data.training_set import HELD_OUT_TEXTS
from ..exceptions import ConfigError
from ..registry import Registry
from .base import (
    AVERAGE_PREFIX,
    Embed,
    EvalOptions,
    PairedSubset,
    Task,
    TaskMetadata,
    Views,
    raw_views,
)
from .bucc import BuccTask
from .qe import WMT20QETask
from .sts import STS17Task
from .task_scores import ScoreRow, TaskScores
from .tatoeba import TatoebaTask

#: task name -> Task class; ``TASKS.get(name)(**options)`` builds one.
TASKS: Registry[type[Task]] = Registry("task")


def register_task(cls: type[Task]) -> None:
    """List ``cls`` under its ``metadata.name``, and its data set's sentences
    (``cls.texts``) under ``metadata.eval_set`` for the training-set overlap filter."""
    TASKS.add(cls.metadata.name, cls)
    if cls.metadata.eval_set:
        HELD_OUT_TEXTS.add(cls.metadata.eval_set, cls.texts)


register_task(TatoebaTask)
register_task(STS17Task)
register_task(WMT20QETask)
register_task(BuccTask)

def average_members(scores: TaskScores, average: str | None = None) -> list[str]:
    """The subsets an average of ``scores`` (default: its main one) is over, as the task
    that computed it groups them; ``[]`` where the task cannot be rebuilt from its config."""
    name = (average or scores.main_subset).removeprefix(AVERAGE_PREFIX)
    try:
        task = TASKS.get(scores.task).from_config(scores.config)
    except (ConfigError, TypeError):
        return []
    return task.average_groups(list(scores.data_sizes) or scores.subsets()).get(name, [])


#: The tasks of the main job (``disembed bench``) and of ``evaluate`` by default.
DEFAULT_TASKS = ("tatoeba", "sts17", "wmt20-qe")

__all__ = ["DEFAULT_TASKS", "TASKS", "BuccTask", "Embed", "EvalOptions", "PairedSubset",
           "STS17Task", "ScoreRow", "Task", "TaskMetadata", "TaskScores", "TatoebaTask",
           "Views", "WMT20QETask", "average_members", "raw_views", "register_task"]
