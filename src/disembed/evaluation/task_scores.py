"""Typed evaluation results: one :class:`ScoreRow` per number, gathered in :class:`TaskScores`.

Correlations and accuracies are stored raw (accuracies in [0, 1], correlations in
[-1, 1]); the x100 of the papers is applied by :mod:`disembed.reports.tables`.
``to_dict`` is JSON-safe (``nan`` -> ``null``); ``per_item`` arrays stay in memory.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import ConfigError
from ..util.jsonsafe import json_safe, write_json

AVERAGE_PREFIX = "avg:"


@dataclass(frozen=True)
class ScoreRow:
    """One number: ``metric`` of ``view`` on ``subset``, over ``n`` items.

    ``subset`` is a language (``"de"``), a track or pair (``"en-de"``), or an average
    (``"avg:tatoeba-14"``); for an average ``n`` is the number of subsets averaged.
    """

    view: str  # "meaning", "language", ...
    subset: str
    metric: str  # "acc_xx2en", "acc_en2xx", "acc_mean", "pearson", "spearman"
    value: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScoreRow:
        value = float("nan") if d["value"] is None else float(d["value"])
        return cls(str(d["view"]), str(d["subset"]), str(d["metric"]), value, int(d["n"]))


#: (view, subset, metric) -> per-item array, e.g. per-query credit or per-pair cosine.
PerItem = dict[tuple[str, str, str], np.ndarray]


@dataclass
class TaskScores:
    """Everything one task evaluation produced.

    Attributes:
        task: task name (``"tatoeba"``).
        main_metric / main_subset: the declared main score, e.g. ``acc_mean`` on
            ``avg:tatoeba-14``; :meth:`main_score` reads it for one view.
        rows: per-subset scores. averages: ScoreRows whose subset starts with ``avg:``.
        config: the task options, data_sizes: items used per subset (after subsampling).
        per_item: in memory only, not serialised (see :data:`PerItem`).
    """

    task: str
    main_metric: str
    main_subset: str
    rows: list[ScoreRow] = field(default_factory=list)
    averages: list[ScoreRow] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    data_sizes: dict[str, int] = field(default_factory=dict)
    seconds: float = float("nan")
    version: str = ""
    per_item: PerItem = field(default_factory=dict, repr=False, compare=False)

    def views(self) -> list[str]:
        """View names in first-seen order."""
        return list(dict.fromkeys(r.view for r in self.rows + self.averages))

    def subsets(self) -> list[str]:
        """Per-subset names (no averages) in first-seen order."""
        return list(dict.fromkeys(r.subset for r in self.rows))

    def get(self, view: str, subset: str, metric: str) -> float:
        """The value of one row, ``nan`` when there is no such row."""
        for r in self.averages if subset.startswith(AVERAGE_PREFIX) else self.rows:
            if (r.view, r.subset, r.metric) == (view, subset, metric):
                return r.value
        return float("nan")

    def main_score(self, view: str = "meaning") -> float:
        """The declared main average (``main_metric`` on ``main_subset``) for ``view``."""
        if view not in self.views():
            raise ConfigError(
                f"{self.task} has no scores for view {view!r}; it has {self.views()}"
            )
        return self.get(view, self.main_subset, self.main_metric)

    def protocol(self) -> dict[str, Any]:
        """How many items the scores came from: ``items`` (all subsets), ``subsets``,
        ``max_items_per_subset`` (None: every item) and the sampling ``seed``."""
        sizes = self.data_sizes or {}
        return {"items": int(sum(sizes.values())), "subsets": len(sizes),
                "max_items_per_subset": self.config.get("max_items"),
                "seed": self.config.get("seed")}

    def protocol_text(self) -> str:
        """:meth:`protocol` in words, e.g. "600 items over 2 subsets, a seeded sample ..."."""
        p = self.protocol()
        sample = (f"a seeded sample of at most {p['max_items_per_subset']} items per subset "
                  f"(seed {p['seed'] or 0})" if p["max_items_per_subset"] else "every test item")
        return f"{p['items']} items over {p['subsets']} subsets, {sample}"

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "task": self.task,
                "main_metric": self.main_metric,
                "main_subset": self.main_subset,
                "rows": [r.to_dict() for r in self.rows],
                "averages": [r.to_dict() for r in self.averages],
                "config": self.config,
                "data_sizes": self.data_sizes,
                "seconds": self.seconds,
                "version": self.version,
            }
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskScores:
        seconds = d.get("seconds")
        return cls(
            task=d["task"],
            main_metric=d["main_metric"],
            main_subset=d["main_subset"],
            rows=[ScoreRow.from_dict(r) for r in d["rows"]],
            averages=[ScoreRow.from_dict(r) for r in d["averages"]],
            config=dict(d.get("config", {})),
            data_sizes={str(k): int(v) for k, v in d.get("data_sizes", {}).items()},
            seconds=float("nan") if seconds is None else float(seconds),
            version=str(d.get("version", "")),
        )

    def to_json(self, path: str | Path | None = None) -> str:
        """Strict JSON text (non-finite as ``null``); also written atomically to ``path``."""
        return write_json(self.to_dict(), path)

    @classmethod
    def from_json(cls, path: str | Path) -> TaskScores:
        """Read a file written by :meth:`to_json`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def average_rows(
    rows: list[ScoreRow], groups: dict[str, list[str]], metrics: list[str]
) -> list[ScoreRow]:
    """Unweighted mean of ``metrics`` over each group's subsets, per view.

    A group with none of its subsets present is left out; a ``nan`` member makes the
    average ``nan`` (never silently dropped). ``n`` of an average = subsets averaged.
    """
    table = {(r.view, r.subset, r.metric): r.value for r in rows}
    views = list(dict.fromkeys(r.view for r in rows))
    out = []
    for name, members in groups.items():
        for view in views:
            for metric in metrics:
                values = [table[(view, s, metric)] for s in members if (view, s, metric) in table]
                if values:
                    out.append(ScoreRow(view, AVERAGE_PREFIX + name, metric,
                                        float(np.mean(values)), len(values)))
    return out
