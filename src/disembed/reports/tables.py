"""Markdown tables from :class:`~disembed.evaluation.TaskScores`.

Accuracies and correlations (stored raw in [0, 1] / [-1, 1]) are shown x100 with one
decimal; ``nan`` shows as ``n/a`` and a score that was never computed as ``-``.
Every function is pure and returns a string.
"""

from __future__ import annotations

import math
from typing import Sequence, Union

from ..evaluation.task_scores import TaskScores

Labeled = Union[tuple[str, TaskScores], TaskScores]
#: "untagged": the meaning part with no language tag given (the model identifies it;
#: ``experiment.steps.with_untagged``), "-" for models that use no language
DEFAULT_VIEWS = ("meaning", "untagged", "language")



def task_options_text(task_options: dict | None) -> str:
    """Each task's own options in words, ``"tatoeba languages: de,zh; "`` (``""``: none)."""
    parts = [f"{task} {name}: {','.join(v) if isinstance(v, list) else v}"
             for task, opts in (task_options or {}).items() for name, v in opts.items()
             if v is not None]
    return "".join(p + "; " for p in parts)


def format_score(value: float | None) -> str:
    """``0.8123`` -> ``"81.2"``; ``nan`` -> ``"n/a"``; ``None`` (absent) -> ``"-"``."""
    if value is None:
        return "-"
    if math.isnan(value):
        return "n/a"
    return f"{100 * value:.1f}"


def _labeled(results: Sequence[Labeled]) -> list[tuple[str, TaskScores]]:
    out = []
    for item in results:
        if isinstance(item, TaskScores):
            out.append((item.config.get("label", ""), item))
        else:
            label, scores = item
            out.append((str(label), scores))
    return out


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    align = ["---"] + ["---:"] * (len(header) - 1)
    lines = [header, align, *rows]
    return "\n".join("| " + " | ".join(_cell(c) for c in line) + " |" for line in lines)


def _lookup(scores: TaskScores, view: str, subset: str, metric: str) -> float | None:
    rows = scores.averages if subset.startswith("avg:") else scores.rows
    for r in rows:
        if (r.view, r.subset, r.metric) == (view, subset, metric):
            return r.value
    return None


def summary_table(results: Sequence[Labeled], views: Sequence[str] = DEFAULT_VIEWS) -> str:
    """One row per label; one column per (task main score, view).

    Args:
        results: ``(label, TaskScores)`` pairs (several tasks per label allowed), or bare
            TaskScores (label from ``config["label"]``, else empty).
        views: which views get a column, in order.
    """
    pairs = _labeled(results)
    tasks: dict[str, tuple[str, str]] = {}  # task -> (main metric, main subset)
    for _, s in pairs:
        tasks.setdefault(s.task, (s.main_metric, s.main_subset))
    present = {v for _, s in pairs for v in s.views()}
    views = [v for v in views if v in present or v in ("meaning", "language")]
    labels = list(dict.fromkeys(label for label, _ in pairs))
    header = ["method"] + [f"{t} {view} ({metric}, {subset})"
                           for t, (metric, subset) in tasks.items() for view in views]
    rows = []
    for label in labels:
        by_task = {s.task: s for lab, s in pairs if lab == label}
        row = [label]
        for t, (metric, subset) in tasks.items():
            for view in views:
                s = by_task.get(t)
                row.append(format_score(None if s is None else _lookup(s, view, subset, metric)))
        rows.append(row)
    return _markdown(header, rows)


def detail_table(results: Sequence[Labeled], task: str, metric: str | None = None,
                 views: Sequence[str] = DEFAULT_VIEWS) -> str:
    """Per-subset table for one task: rows = subsets then averages, columns = label x view.

    Args:
        task: the task name (``"tatoeba"``). metric: default = the task's main metric.
    """
    pairs = [(label, s) for label, s in _labeled(results) if s.task == task]
    if not pairs:
        return f"(no results for task {task!r})"
    metric = metric or pairs[0][1].main_metric
    subsets: dict[str, None] = {}
    averages: dict[str, int] = {}
    for _, s in pairs:
        subsets.update(dict.fromkeys(s.subsets()))
        for r in s.averages:
            averages.setdefault(r.subset, r.n)
    columns = [(label, s, view) for label, s in pairs for view in views if view in s.views()]
    header = [f"{task} {metric}"] + [f"{label} {view}".strip() for label, _, view in columns]
    rows = [[sub] + [format_score(_lookup(s, v, sub, metric)) for _, s, v in columns]
            for sub in subsets]
    rows += [[f"{avg} (n={n})"] + [format_score(_lookup(s, v, avg, metric)) for _, s, v in columns]
             for avg, n in averages.items()]
    return _markdown(header, rows)


def render_tables(results: Sequence[Labeled], views: Sequence[str] = DEFAULT_VIEWS,
                  details: bool = True) -> str:
    """The summary table, then (``details=True``) one detail table per task, as markdown."""
    parts = ["## Summary", "", summary_table(results, views)]
    if details:
        tasks = list(dict.fromkeys(s.task for _, s in _labeled(results)))
        for task in tasks:
            parts += ["", f"## {task}", "", detail_table(results, task, views=views)]
    return "\n".join(parts) + "\n"
