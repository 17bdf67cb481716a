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
        # -> {"meaning": (n, d1), "language": (n, d2)} (any subset of keys);
        # a Views with a ``texts`` parameter is also given the n texts (texts=...)
"""

from __future__ import annotations

import inspect
import logging
import time
import zlib
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Mapping

import numpy as np

from ..data.languages import language_script
from ..exceptions import ConfigError, ShapeError
from ..util.constraints import SEED, Interval
from ..util.fields import check_fields
from ..util.jsonsafe import json_safe
from ..version import __version__
from .task_scores import AVERAGE_PREFIX, PerItem, ScoreRow, TaskScores, average_rows

logger = logging.getLogger(__name__)

Embed = Callable[[list[str]], np.ndarray]
Views = Callable[[np.ndarray, str], dict[str, np.ndarray]]

__all__ = ["AVERAGE_PREFIX", "Embed", "EvalOptions", "HubDataset", "HubSubset", "MetricName",
           "PairedSubset", "ScoreRow", "Task", "TaskMetadata", "TaskOptions", "TaskScores",
           "Views", "raw_views"]


def raw_views(embeddings: np.ndarray, lang: str) -> dict[str, np.ndarray]:
    """The baseline Views: the raw embedding is the meaning, there is no language part."""
    return {"meaning": embeddings}


@dataclass(frozen=True)
class HubDataset:
    """A data set on the Hugging Face Hub: its id and commit (``None``: not pinned, where
    disembed reads the same data from another source, named in ``TaskMetadata.reference``)."""

    path: str  # e.g. "mteb/tatoeba-bitext-mining"
    revision: str | None = None


@dataclass(frozen=True)
class MetricName:
    """One metric's names outside disembed."""

    mteb: str  # MTEB's score key, e.g. "cosine_spearman"
    hub: str  # the Hub model-index metric type, e.g. "cos_sim_spearman"
    text: str  # what it is, in words, for labels


@dataclass(frozen=True)
class HubSubset:
    """A subset as MTEB and the Hub name it: ``deu-eng`` with ``["deu-Latn", "eng-Latn"]``."""

    name: str
    languages: tuple[str, ...]


@dataclass(frozen=True)
class TaskMetadata:
    """What a task is, declared once per task class: what MTEB's ``TaskMetadata`` carries
    (name, type, Hub data set and revision, eval splits, main score) and what disembed's
    tables, model cards, MTEB results and training-set filter read from it.

    ``metrics``/``main_metric``/``main_subset`` are disembed's rows and headline (an
    average named in ``average_groups``); ``metric_names`` gives each metric's MTEB and Hub
    names, ``main_score`` the MTEB name of the per-subset metric MTEB's leaderboard ranks
    by. ``mteb_name``: MTEB's task of the same protocol, ``None`` where MTEB has none.
    """

    name: str  # registry name, e.g. "tatoeba"
    description: str
    reference: str  # paper(s) and data source
    data_folder: str  # folder under the data directory
    subset_kind: str  # "language", "track" or "pair"
    metrics: tuple[str, ...]  # metrics in every per-subset row
    main_metric: str
    main_subset: str  # e.g. "avg:tatoeba-14"
    eval_set: str = ""  # the data set it reads, kept out of training (data.training_set names)
    label: str = ""  # a human name, e.g. "Tatoeba (LASER v1)"
    type: str = "STS"  # MTEB's task type: "BitextMining", "STS", ...
    hub_task: str = "sentence-similarity"  # the Hub's task type for a model card
    dataset: HubDataset | None = None
    eval_splits: tuple[str, ...] = ("test",)
    mteb_name: str | None = None
    main_score: str = ""
    metric_names: Mapping[str, MetricName] = field(default_factory=dict)
    validation_split: str | None = None  # a split ``tune`` may score candidates on

    def __post_init__(self) -> None:
        if self.main_metric not in self.metrics:
            raise ConfigError(f"task {self.name}: main_metric {self.main_metric!r} is not "
                              f"one of its metrics {self.metrics}")
        unnamed = [m for m in self.metrics if m not in self.metric_names]
        if unnamed:
            raise ConfigError(f"task {self.name}: metrics {unnamed} have no MetricName in "
                              "metric_names (their MTEB and Hub names)")
        if self.main_score not in {n.mteb for n in self.metric_names.values()}:
            raise ConfigError(f"task {self.name}: main_score {self.main_score!r} is no "
                              "metric's MTEB name in metric_names")

    def metric_of(self, mteb_name: str) -> str:
        """disembed's name of the metric MTEB calls ``mteb_name``."""
        return next(k for k, v in self.metric_names.items() if v.mteb == mteb_name)

    @property
    def main_score_metric(self) -> str:
        """disembed's name of :attr:`main_score` (``f1``, ``spearman``, ...)."""
        return self.metric_of(self.main_score)


@dataclass(frozen=True)
class TaskOptions:
    """A task's own options: a task with some declares a frozen subclass (``Task.Options``).

    A field's ``metadata`` may name its command-line flag (``{"flag": "--qe-split",
    "help": ..., "choices": (...)}``); every verb that evaluates offers it.
    """

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class EvalOptions:
    """The options every task is built from (one object, so every verb builds tasks alike).

    Attributes:
        max_items: seeded subsample per language / track / pair (``None`` = every item,
            the published protocol). seed: the subsample seed.
        task_options: task name -> that task's own options (fields of its ``Options``,
            e.g. ``{"tatoeba": {"languages": "de,zh"}}``); a task not named takes its
            defaults.
    """

    _field_constraints: ClassVar[dict] = {"max_items": [Interval(int, 2, None), None],
                                           "seed": [SEED]}

    max_items: int | None = None
    seed: int = 0
    task_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)
        opts = self.task_options
        if not isinstance(opts, Mapping) or not all(isinstance(v, Mapping) for v in opts.values()):
            raise ConfigError(f"task_options must map task names to option dicts, e.g. "
                              f"{{'tatoeba': {{'languages': 'de,zh'}}}}; got {opts!r}")
        object.__setattr__(self, "task_options", {str(k): dict(v) for k, v in opts.items()})

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"max_items": self.max_items, "seed": self.seed,
                          "task_options": {k: {f: list(x) if isinstance(x, tuple) else x
                                               for f, x in v.items()}
                                           for k, v in self.task_options.items()}})


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
    #: the task's own options (fields named as its ``__init__`` arguments)
    Options: ClassVar[type[TaskOptions]] = TaskOptions

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
    def options_of(cls, options: EvalOptions) -> TaskOptions:
        """This task's own options in ``options.task_options`` (its defaults where none)."""
        given = options.task_options.get(cls.metadata.name, {})
        known = [f.name for f in fields(cls.Options)]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ConfigError(f"task {cls.metadata.name} has no option(s) {unknown}; its "
                              f"options are {known or 'none'}")
        return cls.Options(**given)

    @classmethod
    def from_options(cls, options: EvalOptions, *, data_dir: str | None = None,
                     supported: Collection[str] | None = None) -> "Task":
        """This task built from the shared options and its own; ``supported``: the
        encoder's languages (a task that reads them overrides this)."""
        own = {f.name: getattr(cls.options_of(options), f.name) for f in fields(cls.Options)}
        return cls(**own, max_items=options.max_items, seed=options.seed, data_dir=data_dir)

    @classmethod
    def validation(cls, data_dir: str | None = None) -> "Task | None":
        """The task on its ``metadata.validation_split``, every item, for ``tune``; ``None``
        for a task that declares none."""
        return None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Task":
        """The task again from its recorded :meth:`config` (a result file's ``config``)."""
        own = {f.name: config[f.name] for f in fields(cls.Options)
               if config.get(f.name) is not None}
        options = EvalOptions(max_items=config.get("max_items"), seed=config.get("seed") or 0,
                              task_options={cls.metadata.name: own})
        return cls.from_options(options, data_dir=config.get("data_dir"),
                                supported=config.get("supported"))

    @classmethod
    def hub_subset(cls, subset: str) -> HubSubset:
        """``subset`` as MTEB and the Hub name it: a track or pair ``en-de`` keeps its name,
        its languages as language-script codes (``["eng-Latn", "deu-Latn"]``)."""
        parts = [language_script(x) for x in subset.split("-")]
        return HubSubset(subset, tuple(dict.fromkeys(parts)))

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
                                 subset.lang_a, subset, list(subset.texts_a))
            view_b = _call_views(views, _call_embed(embed, subset.texts_b, subset, "b"),
                                 subset.lang_b, subset, list(subset.texts_b))
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


def _takes_texts(views: Views) -> bool:
    """Whether ``views`` has a ``texts`` parameter (a view that reads the texts themselves,
    e.g. their script for an untagged meaning)."""
    try:
        return "texts" in inspect.signature(views).parameters
    except (TypeError, ValueError):  # a builtin or C callable: no signature to read
        return False


def _call_views(views: Views, e: np.ndarray, lang: str, subset: PairedSubset,
                texts: list[str]) -> dict[str, np.ndarray]:
    out = views(e, lang, texts=texts) if _takes_texts(views) else views(e, lang)
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
