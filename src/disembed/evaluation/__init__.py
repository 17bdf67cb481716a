"""Evaluation: one file per task, pure metrics, typed results.

>>> task = TASKS.get("tatoeba")(languages="tatoeba-14", max_items=None, seed=0)
>>> scores = task.evaluate(embed, views)          # doctest: +SKIP
>>> scores.main_score("meaning")                  # doctest: +SKIP
"""

from __future__ import annotations

from ..registry import Registry
from .base import Embed, EvalOptions, PairedSubset, Task, TaskMetadata, Views, raw_views
from .bucc import BuccTask
from .qe import WMT20QETask
from .results import ScoreRow, TaskScores
from .sts import STS17Task
from .tatoeba import TatoebaTask

#: task name -> Task class; ``TASKS.get(name)(**options)`` builds one.
TASKS: Registry[type[Task]] = Registry("task")
TASKS.add("tatoeba", TatoebaTask)
TASKS.add("sts17", STS17Task)
TASKS.add("wmt20-qe", WMT20QETask)
TASKS.add("bucc", BuccTask)

#: The tasks of the main job (``disembed bench``) and of ``evaluate`` by default.
DEFAULT_TASKS = ("tatoeba", "sts17", "wmt20-qe")

__all__ = ["DEFAULT_TASKS", "TASKS", "BuccTask", "Embed", "EvalOptions", "PairedSubset",
           "STS17Task", "ScoreRow", "Task", "TaskMetadata",
           "TaskScores", "TatoebaTask", "Views", "WMT20QETask", "raw_views"]
