"""The task base: declarative metadata + a loader + a pure scorer, and the shared evaluate loop.

Every task here compares two sides of aligned pairs (a sentence and its translation,
two sentences rated for similarity, a source and its MT). A task subclass declares
:class:`TaskMetadata`, loads :class:`PairedSubset` s, scores one subset from two view
matrices (pure), and names its average groups. :meth:`Task.evaluate` does the rest:
subsampling, one ``embed`` call per (subset, side), one ``views`` call per
(subset, side), scoring every view both sides returned, averages and provenance.

The contract with the rest of the library::

    Embed = Callable[[list[str]], np.ndarray]        # texts -> (n, d) float32
    Views = Callable[[np.ndarray, str], dict[str, np.ndarray]]
        # (n, d) embeddings of sentences in ONE canonical language, that language
        # -> {"meaning": (n, d1), "language": (n, d2)} (any subset of keys)
"""

from __future__ import annotations

import logging
import time
import zlib
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection

import numpy as np

from ..exceptions import ShapeError
from ..util.constraints import SEED, Interval
from ..util.fields import check_fields
from ..version import __version__
from .task_scores import AVERAGE_PREFIX, PerItem, ScoreRow, TaskScores, average_rows

logger = logging.getLogger(__name__)

Embed = Callable[[list[str]], np.ndarray]
Views = Callable[[np.ndarray, str], dict[str, np.ndarray]]

__all__ = ["AVERAGE_PREFIX", "Embed", "EvalOptions", "PairedSubset", "ScoreRow", "Task",
           "TaskMetadata", "TaskScores", "Views", "raw_views"]


def raw_views(embeddings: np.ndarray, lang: str) -> dict[str, np.ndarray]:
    """The baseline Views: the raw embedding is the meaning, there is no language part."""
    return {"meaning": embeddings}


@dataclass(frozen=True)
class TaskMetadata:
    """What a task is, declared once per task class."""

    name: str  # registry name, e.g. "tatoeba"
    description: str
    reference: str  # paper(s) and data source
    data_folder: str  # folder under the data directory
    subset_kind: str  # "language", "track" or "pair"
    metrics: tuple[str, ...]  # metrics in every per-subset row
    main_metric: str
    main_subset: str  # e.g. "avg:tatoeba-14"
    eval_set: str = ""  # the data set it reads, kept out of training (data.training_set names)


@dataclass(frozen=True)
class EvalOptions:
    """The options every task is built from (one object, so every verb builds tasks alike).

    Attributes:
        max_items: seeded subsample per language / track / pair (``None`` = every item,
            the published protocol). seed: the subsample seed.
        tatoeba_languages: ``"tatoeba-14"``, ``"tatoeba-36"``, ``"all"`` or a list of codes.
        qe_split: the WMT QE split, ``"test"`` (WMT20) or ``"test21"``.
    """

    _field_constraints: ClassVar[dict] = {"max_items": [Interval(int, 2, None), None],
                                           "seed": [SEED]}

    max_items: int | None = None
    seed: int = 0
    tatoeba_languages: str | tuple[str, ...] = "tatoeba-14"
    qe_split: str = "test"

    def __post_init__(self) -> None:
        check_fields(self)
        langs = self.tatoeba_languages
        if isinstance(langs, str) and "," in langs:  # "de,zh" from a command line
            object.__setattr__(self, "tatoeba_languages",
                               tuple(x.strip() for x in langs.split(",") if x.strip()))
        elif not isinstance(langs, str):
            object.__setattr__(self, "tatoeba_languages", tuple(langs))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if isinstance(self.tatoeba_languages, tuple):
            d["tatoeba_languages"] = list(self.tatoeba_languages)
        return d


@dataclass(frozen=True)
class PairedSubset:
    """One subset's two aligned sides (``texts_a[i]`` pairs with ``texts_b[i]``)."""

    name: str  # "de", "en-de", ...
    lang_a: str  # canonical language of texts_a
    lang_b: str
    texts_a: list[str]
    texts_b: list[str]
    gold: np.ndarray | None = None  # (n,) float64, or None for retrieval

    def __len__(self) -> int:
        return len(self.texts_a)

    def take(self, idx: np.ndarray) -> PairedSubset:
        gold = None if self.gold is None else self.gold[idx]
        return PairedSubset(self.name, self.lang_a, self.lang_b,
                            [self.texts_a[i] for i in idx], [self.texts_b[i] for i in idx], gold)


class Task(ABC):
    """Base of every task. Options live in ``__init__``; :meth:`config` records them.

    Args:
        max_items: keep at most this many items per subset, a seeded random subsample
            (``None`` = all). seed: the subsample seed. data_dir: the data directory.
    """

    metadata: ClassVar[TaskMetadata]

    @classmethod
    @abstractmethod
    def texts(cls, data_dir: Path) -> list[str]:
        """Every sentence the task's data set holds under ``data_dir`` (its
        ``metadata.data_folder``), every split it or ``tune`` scores on: what the
        training-set builder keeps out of training pairs."""

    def __init__(self, *, max_items: int | None = None, seed: int = 0,
                 data_dir: str | None = None) -> None:
        EvalOptions(max_items=max_items, seed=seed)  # checked by EvalOptions' declaration
        self.max_items = max_items
        self.seed = int(seed)
        self.data_dir = data_dir

    @classmethod
    def from_options(cls, options: EvalOptions, *, data_dir: str | None = None,
                     supported: Collection[str] | None = None) -> "Task":
        """This task built from the shared options; ``supported``: the encoder's languages."""
        return cls(max_items=options.max_items, seed=options.seed, data_dir=data_dir)

    # -- what a subclass provides ------------------------------------------------------
    @abstractmethod
    def load_subsets(self) -> list[PairedSubset]:
        """Read every selected subset from the data directory."""

    @abstractmethod
    def score_subset(self, subset: PairedSubset, a: np.ndarray, b: np.ndarray
                     ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """Pure scorer: (n, d) views of both sides -> ({metric: value}, {name: (n,) array})."""

    @abstractmethod
    def average_groups(self, subsets: list[str]) -> dict[str, list[str]]:
        """Average name (without ``avg:``) -> member subsets, among ``subsets`` evaluated."""

    def options(self) -> dict[str, Any]:
        """Task-specific options for :meth:`config` (JSON-safe)."""
        return {}

    def main_subset(self, averages: list[ScoreRow]) -> str:
        return self.metadata.main_subset

    # -- shared machinery ----------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {"task": self.metadata.name, "max_items": self.max_items, "seed": self.seed,
                "data_dir": None if self.data_dir is None else str(self.data_dir),
                **self.options()}

    def subsample(self, subset: PairedSubset) -> PairedSubset:
        """At most ``max_items`` items, chosen by (seed, subset name): deterministic, sorted."""
        if self.max_items is None or len(subset) <= self.max_items:
            return subset
        rng = np.random.default_rng([self.seed, zlib.crc32(subset.name.encode("utf-8"))])
        idx = np.sort(rng.choice(len(subset), size=self.max_items, replace=False))
        logger.info("%s %s: subsampled %d of %d items (seed %d)", self.metadata.name,
                    subset.name, self.max_items, len(subset), self.seed)
        return subset.take(idx)

    def evaluate(self, embed: Embed, views: Views | None = None) -> TaskScores:
        """Score every view ``views`` returns, on every subset (``views=None``: raw embedding)."""
        views = views or raw_views
        start = time.perf_counter()
        rows: list[ScoreRow] = []
        per_item: PerItem = {}
        sizes: dict[str, int] = {}
        for subset in self.load_subsets():
            subset = self.subsample(subset)
            sizes[subset.name] = len(subset)
            view_a = _call_views(views, _call_embed(embed, subset.texts_a, subset, "a"),
                                 subset.lang_a, subset)
            view_b = _call_views(views, _call_embed(embed, subset.texts_b, subset, "b"),
                                 subset.lang_b, subset)
            shared = [v for v in view_a if v in view_b]
            if len(shared) != len(view_a) or len(shared) != len(view_b):
                logger.warning("%s %s: views differ between sides (%s vs %s); scoring %s",
                               self.metadata.name, subset.name, sorted(view_a),
                               sorted(view_b), shared)
            for view in shared:
                try:
                    values, items = self.score_subset(subset, view_a[view], view_b[view])
                except ShapeError as exc:
                    raise ShapeError(f"{self.metadata.name} {subset.name}, view {view!r} "
                                     f"({subset.lang_a} vs {subset.lang_b}): {exc}") from exc
                rows.extend(ScoreRow(view, subset.name, m, float(v), len(subset))
                            for m, v in values.items())
                per_item.update({(view, subset.name, k): arr for k, arr in items.items()})
            logger.debug("%s %s: scored %d items", self.metadata.name, subset.name, len(subset))
        groups = self.average_groups(list(sizes))
        averages = average_rows(rows, groups, list(self.metadata.metrics))
        scores = TaskScores(
            task=self.metadata.name, main_metric=self.metadata.main_metric,
            main_subset=self.main_subset(averages), rows=rows, averages=averages,
            config=self.config(), data_sizes=sizes, seconds=time.perf_counter() - start,
            version=__version__, per_item=per_item,
        )
        for view in scores.views():
            logger.info("%s [%s] %s %s = %.4f", self.metadata.name, view, scores.main_subset,
                        scores.main_metric, scores.main_score(view))
        return scores


def _call_embed(embed: Embed, texts: list[str], subset: PairedSubset, side: str) -> np.ndarray:
    e = np.asarray(embed(list(texts)))
    if e.ndim != 2 or e.shape[0] != len(texts):
        raise ShapeError(
            f"embed returned shape {e.shape} for {len(texts)} texts of subset {subset.name!r} "
            f"(side {side}); expected ({len(texts)}, d). Embed must map a list of n texts to "
            "an (n, d) array."
        )
    return e


def _call_views(views: Views, e: np.ndarray, lang: str, subset: PairedSubset
                ) -> dict[str, np.ndarray]:
    out = views(e, lang)
    if not isinstance(out, dict) or not out:
        raise ShapeError(
            f"views returned {type(out).__name__} for language {lang!r} (subset "
            f"{subset.name!r}); expected a non-empty dict like {{'meaning': (n, d1)}}"
        )
    checked = {}
    for name, arr in out.items():
        arr = np.asarray(arr)
        if arr.ndim != 2 or arr.shape[0] != e.shape[0]:
            raise ShapeError(
                f"view {name!r} for language {lang!r} (subset {subset.name!r}) has shape "
                f"{arr.shape}; expected ({e.shape[0]}, d) with one row per input embedding"
            )
        checked[name] = arr
    return checked
