"""Run the analyses on trained-on-the-fly or saved models and write ``analysis.md`` + JSON.

>>> from disembed import AnalysisConfig, run_analyses
>>> report = run_analyses(AnalysisConfig(encoder="use-m3", pairs_per_language=500))  # doctest: +SKIP

Every model is evaluated once (Tatoeba, STS17, ... on its meaning and language parts,
plus code-switched Tatoeba); the analyses reuse those scores and their per-item data.
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..bench import DEFAULT_METHODS, DEFAULT_TRAIN_LANGUAGES
from ..exceptions import ConfigError
from .geometry import GeometryRecorder, geometry, views_by_language

logger = logging.getLogger(__name__)

ANALYSES = ("leakage", "codeswitch", "geometry", "significance", "truncation", "plots")


@dataclass
class AnalysisConfig:
    """What ``run_analyses`` trains, loads, measures and where it writes."""

    encoder: str | None = None  # None: the saved models' encoder, else the default
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    models: list[str] = field(default_factory=list)  # saved model directories
    analyses: list[str] = field(default_factory=lambda: list(ANALYSES))
    languages: list[str] = field(default_factory=lambda: list(DEFAULT_TRAIN_LANGUAGES))
    pairs_per_language: int | None = 1000
    tasks: list[str] = field(default_factory=lambda: ["tatoeba", "sts17"])
    tatoeba_languages: str = "tatoeba-14"
    max_eval_items: int | None = None
    sample_pairs: int = 1000  # Tatoeba pairs for geometry and the 2-D projection
    probe_per_language: int = 400  # Tatoeba sentences per language for the LID probe
    codeswitch_rate: float = 0.3
    truncation_ks: list[int] = field(default_factory=lambda: [16, 64, 128, 256])
    n_resamples: int = 2000
    max_epochs: int | None = None
    seed: int = 0
    out_dir: str = "runs/analysis"
    data_dir: str | None = None
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        unknown = [a for a in self.analyses if a not in ANALYSES]
        if unknown:
            raise ConfigError(f"unknown analyses {unknown}; choose from {', '.join(ANALYSES)}")
        from ..methods import method_class

        for name in self.methods:
            method_class(name)  # registered names and oracle+<recipe>
        if not self.methods and not self.models:
            raise ConfigError("nothing to analyse: give methods to train or saved --model dirs")

    def task_options(self) -> dict[str, dict]:
        common = {"max_items": self.max_eval_items, "seed": self.seed}
        langs: Any = self.tatoeba_languages
        if "," in langs:
            langs = [x.strip() for x in langs.split(",") if x.strip()]
        return {"tatoeba": {**common, "languages": langs}, "sts17": dict(common),
                "wmt20-qe": dict(common)}


@dataclass
class ModelRun:
    """One analysed model: its scores and measurements."""

    label: str
    method: str
    model: Any
    scores: list = field(default_factory=list)  # TaskScores, with per_item
    trajectory: list[dict] = field(default_factory=list)  # per-epoch geometry
    geometry: dict = field(default_factory=dict)  # view -> {alignment, uniformity}
    probe: dict = field(default_factory=dict)  # view -> ProbeResult
    codeswitch: Any = None  # TaskScores of CodeSwitchTask
    codeswitch_stats: dict = field(default_factory=dict)
    sample_views: dict = field(default_factory=dict, repr=False)  # view -> (n, d) of sample.src


def _load_models(config: AnalysisConfig) -> tuple[list[tuple[str, Any]], str | None]:
    from ..methods import load_disentangler

    loaded, specs = [], set()
    for directory in config.models:
        model = load_disentangler(directory)
        specs.add(model.metadata_.get("encoder_spec"))
        loaded.append((f"{model.method} ({Path(directory).name})", model))
    specs.discard(None)
    if len(specs) > 1 and config.encoder is None:
        raise ConfigError(f"the saved models use different encoders {sorted(specs)}; analyse "
                          "models of one encoder at a time (or pass --encoder)")
    return loaded, next(iter(specs), None)


def _params(method: str, config: AnalysisConfig) -> dict:
    """Seed and epoch cap for the methods that take them."""
    from ..methods import method_class

    accepted = method_class(method).param_names()
    params = {"seed": config.seed} if "seed" in accepted else {}
    if config.max_epochs is not None and "max_epochs" in accepted:
        params["max_epochs"] = config.max_epochs
    return params


def _fit(method: str, config, encoder, train, sample) -> tuple[Any, list[dict]]:
    from ..methods import make_method
    from ..pipeline import embed_pairs

    model = make_method(method, **_params(method, config))
    src, tgt = embed_pairs(encoder, train.pairs)
    kwargs, recorder = {}, None
    if "geometry" in config.analyses and "on_epoch_end" in inspect.signature(model.fit).parameters:
        recorder = GeometryRecorder(model, encoder.encode(sample.src), encoder.encode(sample.tgt),
                                    sample.src_lang, "en")
        kwargs["on_epoch_end"] = recorder
    t0 = time.perf_counter()
    model.fit(src, tgt, train.pairs.src_lang, train.pairs.tgt_lang, **kwargs)
    model.fit_seconds_ = time.perf_counter() - t0
    return model, (recorder.records if recorder else [])


def _measure(run: ModelRun, config, encoder, sample, lid) -> None:
    from ..pipeline import evaluate
    from .codeswitch import CodeSwitchTask
    from .leakage import probe_views

    tasks: list[Any] = list(config.tasks)
    cs_task = None
    if "codeswitch" in config.analyses:
        cs_task = CodeSwitchTask(rate=config.codeswitch_rate, seed=config.seed,
                                 supported=_supported(encoder), max_items=config.max_eval_items,
                                 data_dir=config.data_dir)
        tasks.append(cs_task)
    scores = evaluate(run.model, encoder, tasks, task_options=config.task_options(),
                      data_dir=config.data_dir)
    if cs_task is not None:
        run.codeswitch, run.codeswitch_stats = scores.pop(), cs_task.stats_
    run.scores = scores
    if "geometry" in config.analyses or "plots" in config.analyses:
        a = views_by_language(run.model, encoder.encode(sample.src), sample.src_lang)
        b = views_by_language(run.model, encoder.encode(sample.tgt), "en")
        run.geometry = {"raw": geometry(encoder.encode(sample.src), encoder.encode(sample.tgt)),
                        **{v: geometry(a[v], b[v]) for v in a if v in b}}
        run.sample_views = a
    if "leakage" in config.analyses:
        texts, langs = lid
        X = encoder.encode(texts)
        views = {"raw": X, **views_by_language(run.model, X, langs)}
        run.probe = probe_views(views, langs, seed=config.seed)


def _full_dimension_rows(runs: list[ModelRun], config: AnalysisConfig, dim: int) -> list[dict]:
    """The main runs as the k = dim end of the truncation sweep."""
    rows = []
    for run in runs:
        if run.label in config.methods:
            rows += [{"k": dim, "method": run.method, "task": s.task, "metric": s.main_metric,
                      "meaning": s.main_score("meaning"),
                      "language": s.main_score("language") if "language" in s.views()
                      else float("nan")} for s in run.scores]
    return rows


def _supported(encoder) -> list[str] | None:
    inner = getattr(encoder, "encoder", encoder)
    return getattr(inner, "languages", None)


def _encoder_and_models(config: AnalysisConfig):
    """The (cached) encoder, and the saved models checked against it."""
    from ..encoders import DEFAULT_ENCODER, load_encoder
    from ..pipeline import cached

    loaded, saved_spec = _load_models(config)
    spec = config.encoder or saved_spec or DEFAULT_ENCODER
    encoder = cached(load_encoder(spec), config.cache_dir)
    for label, model in loaded:
        saved = model.metadata_.get("encoder")
        if saved and saved != encoder.identity.to_dict():
            raise ConfigError(f"{label} was trained on encoder {saved}, not on {spec}")
    return spec, encoder, loaded


def _train_all(config: AnalysisConfig, encoder, sample) -> tuple[list[ModelRun], Any]:
    """Build the training set (evaluation overlaps removed) and fit every method."""
    from ..data.training_set import build_training_set

    if not config.methods:
        return [], None
    blocked = sorted({*config.tasks, "tatoeba"} & {"tatoeba", "sts17", "wmt20-qe"})
    train = build_training_set(config.languages, config.pairs_per_language, eval_sets=blocked,
                               data_dir=config.data_dir, seed=config.seed)
    logger.info(train.summary())
    runs = []
    for method in config.methods:
        model, trajectory = _fit(method, config, encoder, train, sample)
        runs.append(ModelRun(method, method, model, trajectory=trajectory))
    return runs, train


def run_analyses(config: AnalysisConfig):
    """Train / load, evaluate, analyse; writes ``analysis.md``, ``analysis.json`` and PNGs."""
    from ..data.languages import TATOEBA_14
    from .report import AnalysisReport
    from .samples import lid_sample, tatoeba_pairs

    t_start = time.perf_counter()
    spec, encoder, loaded = _encoder_and_models(config)
    supported = _supported(encoder)
    sample_langs = [x for x in TATOEBA_14 if supported is None or x in supported]
    sample = tatoeba_pairs(sample_langs, config.sample_pairs, data_dir=config.data_dir,
                           seed=config.seed)
    lid = lid_sample(sample_langs, config.probe_per_language, data_dir=config.data_dir,
                     seed=config.seed)
    runs, train = _train_all(config, encoder, sample)
    runs += [ModelRun(label, model.method, model) for label, model in loaded]
    for run in runs:
        _measure(run, config, encoder, sample, lid)
    report = AnalysisReport(config=asdict(config), encoder=encoder.identity.to_dict(),
                            encoder_spec=spec, runs=runs, sample=sample, lid=lid,
                            training=train.report() if train else None)
    report.compute_significance(config.n_resamples, config.seed)
    if "truncation" in config.analyses and train is not None:
        from .truncation import truncation_sweep

        ks = [k for k in config.truncation_ks if k <= encoder.dim]
        report.truncation = truncation_sweep(
            config.methods, encoder, train.pairs, ks, tasks=config.tasks,
            task_options=config.task_options(), data_dir=config.data_dir,
            method_params={m: _params(m, config) for m in config.methods})
        report.truncation += _full_dimension_rows(runs, config, encoder.dim)
    report.seconds = time.perf_counter() - t_start
    report.write(Path(config.out_dir), plots="plots" in config.analyses)
    return report


__all__ = ["ANALYSES", "AnalysisConfig", "ModelRun", "run_analyses"]
