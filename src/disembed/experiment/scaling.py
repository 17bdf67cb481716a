"""The data-scaling study: every method at several training sizes, several seeds each.

For each size (pairs per language; ``None`` = the whole pool) and method, trained recipes
run once per seed, closed-form ones once (they have no seed). The training sets are nested
prefixes of one seeded order and leave the same held-out slice aside at every size, so
"all" means "everything but the held-out pairs" and sizes differ only in how much data.
Every run is saved and reused, so the study can be interrupted, extended with a size or a
method, and re-rendered without retraining; methods can be split over several processes
(same ``out_dir``) and a last call with all of them writes the report.

Per size, each method is compared with the reference (mean-centering by default) on the
mean over seeds of each task's main score, by a two-level bootstrap that resamples the
seeds and then the items (:func:`~disembed.analysis.significance.compare_seeds`); the
p-values of all comparisons of one study are Holm-corrected together. The seed-ensemble
score (per-item scores averaged over seeds) is kept as a labelled extra. Tatoeba is also
reported on the training languages (seen) and the other Tatoeba-36 languages (unseen) apart.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.significance import compare_seeds, holm
from ..encoders import DEFAULT_ENCODER
from ..evaluation import DEFAULT_TASKS, EvalOptions, TaskScores
from ..exceptions import ConfigError
from ..methods import method_class
from ..provenance import environment
from ..reports.scaling_report import write_scaling
from ..results import ExperimentResult, RunResult
from ..util.folders import mark_folder
from ..util.text import slug
from .run import RunHooks, RunOutputs, finished_run, run
from .spec import DEFAULT_TRAIN_LANGUAGES, RunSpec, TrainingData, Workspace
from .steps import UNTAGGED_VIEW, open_encoder, uses_language
from .tasks import check_task_options

logger = logging.getLogger(__name__)

DEFAULT_SCALING_METHODS = ("baseline", "mean-centering", "seed", "seed-centered", "inter",
                           "dream", "meat", "oracle+meat", "lir", "lsar", "leace")
#: Per-run numbers of the study: (name, task, view, subset) on the task's declared main
#: metric (``TaskMetadata.main_metric``); subset ``None``: the task's main average, ``seen``
#: / ``unseen``: the mean over the training languages or the others (a task whose subsets
#: are languages)
METRICS = (("tatoeba", "tatoeba", "meaning", None),
           ("tatoeba_seen", "tatoeba", "meaning", "seen"),
           ("tatoeba_unseen", "tatoeba", "meaning", "unseen"),
           ("sts17", "sts17", "meaning", None),
           ("sts17_mono", "sts17", "meaning", "avg:monolingual"),
           ("wmt20-qe", "wmt20-qe", "meaning", None),
           ("leakage_tatoeba", "tatoeba", "language", None),
           ("tatoeba_notag", "tatoeba", UNTAGGED_VIEW, None),
           ("tatoeba_unseen_notag", "tatoeba", UNTAGGED_VIEW, "unseen"),
           ("sts17_notag", "sts17", UNTAGGED_VIEW, None),
           ("wmt20-qe_notag", "wmt20-qe", UNTAGGED_VIEW, None))


@dataclass
class ScalingConfig:
    """The study's grid; ``params`` holds per-method settings (e.g. ``tune``'s choice)."""

    encoder: str = DEFAULT_ENCODER
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_SCALING_METHODS))
    sizes: list[int | None] = field(default_factory=lambda: [500, 2000, 5000, None])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    languages: list[str] = field(default_factory=lambda: list(DEFAULT_TRAIN_LANGUAGES))
    holdout_per_language: int = 300
    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    max_eval_items: int | None = None
    #: each task's own options by task name; the study's default reads Tatoeba over its 36
    #: XTREME languages, so that most are languages the recipes were not trained on
    task_options: dict[str, dict] = field(
        default_factory=lambda: {"tatoeba": {"languages": "tatoeba-36"}})
    params: dict[str, dict] = field(default_factory=dict)
    reference: str = "mean-centering"
    n_resamples: int = 2000
    out_dir: str = "runs/scaling"
    #: where it reads and writes (data, cache and its dtype, encoding batch size, force)
    workspace: Workspace = field(default_factory=Workspace)
    #: report only the points already finished in ``out_dir`` (fit nothing): a study whose
    #: methods ran at different sizes or seeds, e.g. a slow recipe at the small sizes only
    finished_only: bool = False

    def __post_init__(self) -> None:
        if not self.sizes or not self.seeds:
            raise ConfigError("the study needs at least one size and one seed")
        for method in self.methods:
            method_class(method)
        self.training_data(self.sizes[0])

    def training_data(self, size: int | None) -> TrainingData:
        return TrainingData(tuple(self.languages), size,
                            holdout_per_language=self.holdout_per_language)

    def evaluation(self) -> EvalOptions:
        return check_task_options(EvalOptions(max_items=self.max_eval_items,
                                              task_options=self.task_options))

    def points(self) -> list[Point]:
        """Every (size, method, seed) of the study with its spec and run folder; a method
        that needs no data has one run, shared by all sizes."""
        out = []
        for size in self.sizes:
            for method in self.methods:
                cls = method_class(method)
                seeds = self.seeds if "seed" in cls.param_names() else self.seeds[:1]
                for seed in seeds:
                    spec = RunSpec(method=method, params=dict(self.params.get(method, {})),
                                   encoder=self.encoder,
                                   data=self.training_data(size) if cls.needs_data else None,
                                   tasks=tuple(self.tasks), evaluation=self.evaluation(),
                                   seed=seed, label=method)
                    where = _size_name(size) if cls.needs_data else "no-training"
                    out.append(Point(_size_name(size), method, spec,
                                     Path(self.out_dir) / where / slug(method) / f"seed-{seed}"))
        return out


@dataclass(frozen=True)
class Point:
    """One run of the study: its size name, method, spec and folder."""

    size: str
    method: str
    spec: RunSpec
    folder: Path


def _size_name(size: int | None) -> str:
    return "all" if size is None else str(size)


def run_scaling(config: ScalingConfig) -> ExperimentResult:
    """Run (or reuse) every point and write ``scaling.json``, ``scaling.md``, the plots."""
    t0 = time.perf_counter()
    workspace = config.workspace
    encoder = open_encoder(RunSpec(encoder=config.encoder), workspace)
    mark_folder(Path(config.out_dir))  # a rerun recognises the folder as its own
    done: dict[str, RunResult] = {}
    entries, missing = [], []
    for point in config.points():
        key = point.spec.fingerprint()
        if key not in done:
            found = (finished_run(point.spec, point.folder, encoder, workspace)
                     if config.finished_only else
                     run(point.spec, workspace, outputs=RunOutputs(run_dir=point.folder),
                         encoder=encoder, hooks=RunHooks(required_views=(UNTAGGED_VIEW,))))
            if found is None:
                missing.append(f"{point.method} at {point.size} pairs/lang, seed "
                               f"{point.spec.seed}")
                continue
            done[key] = found
        entries.append((point, done[key]))
    if missing:
        logger.info("not run (left out of the report): %s", "; ".join(missing))
    result = ExperimentResult("scaling", asdict(config), list(done.values()),
                              comparisons=compare_to_reference(config, entries),
                              extras={"points": summarise(config, entries),
                                      "not_run": missing},
                              timings={"total_seconds": time.perf_counter() - t0},
                              environment=environment())
    write_scaling(result, Path(config.out_dir))
    return result


def run_metrics(result: RunResult, training_languages: set[str]) -> dict[str, float]:
    """The study's numbers for one run (see :data:`METRICS`); ``nan`` where not evaluated.

    The no-tag numbers (view ``untagged``: the model identifies each sentence's language
    from its embedding) are the gold-tag ones for a recipe that uses no language (it has no
    ``untagged`` view: tag or not, its output is the same); ``nan`` for a run of a recipe
    that uses one but was saved before the untagged view existed.
    """
    by_task = {s.task: s for s in result.scores}
    out = {}
    for name, task, view, subset in METRICS:
        s = by_task.get(task)
        view = compared_view(result, view)
        if s is None or view not in s.views():
            out[name] = float("nan")
        elif subset in ("seen", "unseen"):
            out[name] = _language_split(s, view, training_languages, subset == "seen")
        elif subset is None:
            out[name] = s.main_score(view)
        else:
            out[name] = s.get(view, subset, s.main_metric)
    return out


def _language_split(scores: TaskScores, view: str, seen: set[str], want_seen: bool) -> float:
    """The main metric's mean over the language subsets in ``seen`` (or not in it)."""
    values = [r.value for r in scores.rows if r.view == view and r.metric == scores.main_metric
              and (r.subset in seen) == want_seen]
    return float(np.mean(values)) if values else float("nan")


def summarise(config: ScalingConfig, entries: list[tuple[Point, RunResult]]
              ) -> list[dict[str, Any]]:
    """One row per (size, method): each metric's mean, min and max over seeds, and the
    training size actually used."""
    rows = []
    for size in dict.fromkeys(p.size for p, _ in entries):
        for method in config.methods:
            group = _group(entries, size, method)
            if not group:
                continue
            values = [run_metrics(r, set(config.languages)) for r in group]
            row: dict[str, Any] = {"size": size, "method": method, "seeds": len(group),
                                   "train_pairs": (group[0].training.get("data") or {}).get(
                                       "total_pairs", 0)}
            for name in values[0]:
                v = np.array([x[name] for x in values], dtype=np.float64)
                row[name] = float(np.mean(v))
                row[name + "_min"], row[name + "_max"] = float(np.min(v)), float(np.max(v))
            rows.append(row)
    return rows


def _group(entries: list[tuple[Point, RunResult]], size: str, method: str) -> list[RunResult]:
    return [r for p, r in entries if p.size == size and p.method == method]


#: the views every method is compared on: the gold-tag meaning part, and the meaning part
#: with no tag (the library's untagged meaning: the identifier's posterior mixture of the
#: language routes)
COMPARED_VIEWS = ("meaning", UNTAGGED_VIEW)


def compared_view(result: RunResult, view: str) -> str:
    """The per-item view that scores ``result``'s recipe on ``view``: a recipe that uses no
    language has no untagged view (tag or not, its output is the same), so its gold-tag
    one."""
    if view == UNTAGGED_VIEW and not uses_language(result.method, result.params):
        return "meaning"
    return view


def _has_items(scores: list[TaskScores], view: str) -> bool:
    return bool(scores) and all(any(k[0] == view for k in s.per_item) for s in scores)


def compare_to_reference(config: ScalingConfig, entries: list[tuple[Point, RunResult]]
                         ) -> list[dict]:
    """Per size, method, view (gold tags, then no tag) and task: the two-level (seeds,
    items) bootstrap of the mean over seeds against the reference's, untagged against
    untagged, with Holm-adjusted p-values over every comparison of the study (both views).

    A run saved before the untagged view existed has no untagged items: its untagged
    comparison is left out (logged), never made against its gold-tag items."""
    out = []
    for size in dict.fromkeys(p.size for p, _ in entries):
        reference = _group(entries, size, config.reference)
        for method in config.methods:
            group = _group(entries, size, method)
            if method == config.reference or not group or not reference:
                continue
            for view in COMPARED_VIEWS:
                view_a, view_b = compared_view(group[0], view), compared_view(reference[0], view)
                for task in config.tasks:
                    a = [s for r in group for s in r.scores if s.task == task]
                    b = [s for r in reference for s in r.scores if s.task == task]
                    if not (_has_items(a, view_a) and _has_items(b, view_b)
                            and len(a) == len(group) and len(b) == len(reference)):
                        if a and b and view != "meaning":
                            logger.info("%s vs %s at %s pairs/lang, %s [%s]: not compared "
                                        "(a run has no per-item %s scores: it predates them; "
                                        "rerun without --finished-only to evaluate it again)",
                                        method, config.reference, size, task, view, view)
                        continue
                    test = compare_seeds(a, b, view=view_a, view_b=view_b,
                                         n_resamples=config.n_resamples)
                    out.append({"size": size, "task": task, "method": method, "view": view,
                                "reference": config.reference, **asdict(test)})
    adjusted = holm([c["p_value"] for c in out])
    for c, p in zip(out, adjusted, strict=True):
        c["p_adjusted"] = float(p)
        c["correction"] = "holm"
    return out


__all__ = ["COMPARED_VIEWS", "DEFAULT_SCALING_METHODS", "METRICS", "Point", "ScalingConfig",
           "compare_to_reference", "compared_view", "run_metrics", "run_scaling", "summarise"]
