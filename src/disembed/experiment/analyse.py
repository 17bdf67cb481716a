"""The analyses as an experiment: run specs with measuring hooks, then write the report.

>>> from disembed import AnalysisConfig, run_analyses
>>> config = AnalysisConfig(encoder="use-m3", pairs_per_language=500)
>>> result = run_analyses(config)  # doctest: +SKIP

Every model (trained on the fly or loaded) is one :func:`~disembed.experiment.run` with
hooks: an epoch callback records the geometry during training, code-switched Tatoeba is
an extra task, and after evaluation the language-ID probe, the geometry and the 2-D
projections are measured. Significance tests compare every two runs; the dimensionality
sweep is more specs (``truncate=k``). Writes ``analysis.json`` (an
:class:`~disembed.results.ExperimentResult`), ``analysis.md``, ``report.html`` and PNGs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.codeswitch import CodeSwitchTask
from ..analysis.geometry import GeometryRecorder, geometry, projection_panels, views_by_language
from ..analysis.leakage import probe_views
from ..analysis.samples import PairSample, lid_sample, tatoeba_pairs
from ..analysis.significance import compare_all, paired_bootstrap, paired_permutation, task_items
from ..data.languages import TATOEBA_14
from ..encoders import DEFAULT_ENCODER, Encoder
from ..encoders.base import supported_languages
from ..evaluation import EvalOptions, TaskScores
from ..exceptions import ConfigError
from ..methods import Disentangler, method_class
from ..provenance import environment
from ..reports.analysis_report import write_analysis
from ..results import ExperimentResult, RunResult
from ..saved_model import SavedModel
from ..util.folders import mark_folder
from .bench import DEFAULT_METHODS, default_params
from .params import build_method, shared_overrides
from .run import RunHooks, run
from .spec import DEFAULT_TRAIN_LANGUAGES, RunSpec, TrainingData, Workspace
from .steps import open_encoder
from .tasks import check_task_options, check_tasks, kept_out_sets

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
    #: each task's own options by task name (its ``Options`` fields), e.g.
    #: ``{"tatoeba": {"languages": "de,zh"}}``; a task not named takes its defaults
    task_options: dict[str, dict] = field(default_factory=dict)
    max_eval_items: int | None = None
    sample_pairs: int = 1000  # Tatoeba pairs for geometry and the 2-D projection
    probe_per_language: int = 400  # Tatoeba sentences per language for the LID probe
    codeswitch_rate: float = 0.3
    truncation_ks: list[int] = field(default_factory=lambda: [16, 64, 128, 256])
    n_resamples: int = 2000
    max_epochs: int | None = None
    seed: int = 0
    out_dir: str = "runs/analysis"
    #: where it reads and writes (data, cache and its dtype, encoding batch size, force)
    workspace: Workspace = field(default_factory=Workspace)

    def __post_init__(self) -> None:
        unknown = [a for a in self.analyses if a not in ANALYSES]
        if unknown:
            raise ConfigError(f"unknown analyses {unknown}; choose from {', '.join(ANALYSES)}")
        overrides = shared_overrides(self.methods, {"max_epochs": self.max_epochs})
        for name in self.methods:  # registered names, oracle+<recipe>, their settings
            build_method(name, overrides.get(name, {}), seed=self.seed)
        if not self.methods and not self.models:
            raise ConfigError("nothing to analyse: give methods to train or saved --model dirs")
        if "codeswitch" in self.analyses and not 0 < self.codeswitch_rate <= 1:
            raise ConfigError(f"code-switching rate must be in (0, 1]; got "
                              f"{self.codeswitch_rate}")
        if "truncation" in self.analyses and not self.methods:
            raise ConfigError("the truncation analysis retrains methods at each dimension; "
                              "give --methods (saved models cannot be truncated)")
        self.tasks = list(check_tasks(self.tasks))
        if self.methods:
            self.training_data()  # validated now, not after the first run

    def training_data(self) -> TrainingData:
        """Tatoeba is always kept out: the sample, the probe and code-switching read it."""
        keep_out = kept_out_sets([*self.tasks, "tatoeba"])
        return TrainingData(tuple(self.languages), self.pairs_per_language, seed=self.seed,
                            keep_out=keep_out)

    def eval_options(self) -> EvalOptions:
        return check_task_options(EvalOptions(max_items=self.max_eval_items, seed=self.seed,
                                              task_options=self.task_options))

    def specs(self, encoder_spec: str) -> list[RunSpec]:
        """One spec per method to train, then one per saved model."""
        overrides = shared_overrides(self.methods, {"max_epochs": self.max_epochs})
        common = {"tasks": tuple(self.tasks), "evaluation": self.eval_options(),
                  "seed": self.seed}
        trained = [RunSpec(method=m, params={**default_params(m), **overrides.get(m, {})},
                           encoder=encoder_spec,
                           data=self.training_data() if method_class(m).needs_data else None,
                           label=m, **common) for m in self.methods]
        saved = [RunSpec(model_dir=d, encoder=encoder_spec, label=_model_label(d), **common)
                 for d in self.models]
        return trained + saved


def _model_label(directory: str) -> str:
    return f"{SavedModel.load(directory).disentangler.name} ({Path(directory).name})"


@dataclass
class _Probes:
    """The held-out data every run is measured on."""

    sample: PairSample
    lid: tuple[list[str], list[str]]


def run_analyses(config: AnalysisConfig) -> ExperimentResult:
    """Train / load, evaluate, analyse; writes the report (see the module docstring)."""
    t_start = time.perf_counter()
    workspace = config.workspace
    spec_name = _encoder_spec(config)
    encoder = open_encoder(RunSpec(encoder=spec_name), workspace)
    probes = _probes(config, encoder)
    cs_task = _codeswitch_task(config, encoder)
    hooks = _hooks(config, encoder, probes, cs_task)
    runs = [run(spec, workspace, encoder=encoder, hooks=hooks)
            for spec in config.specs(spec_name)]
    comparisons = []
    if "significance" in config.analyses:
        main = {r.label: [s for s in r.scores if s.task in config.tasks] for r in runs}
        comparisons = [c.to_dict() for c in compare_all(main, n_resamples=config.n_resamples,
                                                        seed=config.seed)]
    extras = {"encoder_spec": spec_name, "encoder": encoder.identity.to_dict(),
              "training": next((r.training.get("data") for r in runs
                                if r.training.get("data")), None),
              "sample_pairs": len(probes.sample), "sample_languages": probes.sample.src_lang,
              "probe_sentences": len(probes.lid[0]),
              "probe_languages": sorted(set(probes.lid[1])),
              "codeswitch_stats": dict(cs_task.stats_) if cs_task else {},
              "truncation": _truncation(config, spec_name, workspace, runs, encoder.dim)}
    extras["seconds"] = time.perf_counter() - t_start
    result = ExperimentResult("analysis", asdict(config), runs, comparisons, extras,
                              timings={"total_seconds": extras["seconds"]},
                              environment=environment())
    write_analysis(result, mark_folder(config.out_dir), plots="plots" in config.analyses)
    return result


def _encoder_spec(config: AnalysisConfig) -> str:
    """The encoder: named, else the saved models' (all the same one), else the default."""
    if config.encoder:
        return config.encoder
    specs = {SavedModel.load(d).metadata.encoder_spec for d in config.models}
    specs.discard(None)
    if len(specs) > 1:
        raise ConfigError(f"the saved models use different encoders {sorted(specs)}; analyse "
                          "models of one encoder at a time (or pass --encoder)")
    return next(iter(specs), DEFAULT_ENCODER)


def _probes(config: AnalysisConfig, encoder: Encoder) -> _Probes:
    supported = supported_languages(encoder)
    langs = [x for x in TATOEBA_14 if supported is None or x in supported]
    data_dir = config.workspace.data_dir
    return _Probes(
        tatoeba_pairs(langs, config.sample_pairs, data_dir=data_dir, seed=config.seed),
        lid_sample(langs, config.probe_per_language, data_dir=data_dir, seed=config.seed))


def _codeswitch_task(config: AnalysisConfig, encoder: Encoder) -> CodeSwitchTask | None:
    if "codeswitch" not in config.analyses:
        return None
    return CodeSwitchTask(rate=config.codeswitch_rate, seed=config.seed,
                          supported=supported_languages(encoder),
                          max_items=config.max_eval_items, data_dir=config.workspace.data_dir)


def _hooks(config: AnalysisConfig, encoder: Encoder, probes: _Probes,
           cs_task: CodeSwitchTask | None) -> RunHooks:
    recorders: dict[int, GeometryRecorder] = {}
    sample = probes.sample

    def epoch_callback(model: Disentangler, enc: Encoder) -> GeometryRecorder | None:
        if "geometry" not in config.analyses:
            return None
        recorders[id(model)] = GeometryRecorder(model, enc.encode(sample.src),
                                                enc.encode(sample.tgt), sample.src_lang, "en")
        return recorders[id(model)]

    def measure(model: Disentangler, enc: Encoder, scores: list[TaskScores]) -> dict:
        out: dict[str, Any] = {}
        recorder = recorders.pop(id(model), None)
        out["trajectory"] = recorder.records if recorder else []
        if {"geometry", "plots"} & set(config.analyses):
            out.update(_geometry(model, enc, sample))
        if "leakage" in config.analyses:
            texts, langs = probes.lid
            X = enc.encode(texts)
            views = {"raw": X, **views_by_language(model, X, langs)}
            out["probe"] = {k: v.to_dict() for k, v in probe_views(views, langs,
                                                                     seed=config.seed).items()}
        cs = next((s for s in scores if cs_task and s.task == cs_task.metadata.name), None)
        if cs is not None:
            out["codeswitch_test"] = _codeswitch_test(cs, config)
        return out

    return RunHooks(epoch_callback=epoch_callback, measure=measure,
                    extra_tasks=[cs_task] if cs_task else [])


def _geometry(model: Disentangler, encoder: Encoder, sample: PairSample) -> dict:
    src, tgt = encoder.encode(sample.src), encoder.encode(sample.tgt)
    a = views_by_language(model, src, sample.src_lang)
    b = views_by_language(model, tgt, "en")
    return {"geometry": {"raw": geometry(src, tgt),
                         **{v: geometry(a[v], b[v]) for v in a if v in b}},
            "projection": projection_panels(a)}


def _codeswitch_test(scores: TaskScores, config: AnalysisConfig) -> dict:
    """Original vs code-switched retrieval on the same items, meaning part, both tests."""
    subsets = scores.subsets()
    switched = [s for s in subsets if s.endswith("+cs")]
    a, strata, _ = task_items(scores, "meaning", [s[:-3] for s in switched])
    b, _, _ = task_items(scores, "meaning", switched)
    options = {"strata": strata, "n_resamples": config.n_resamples, "seed": config.seed}
    return {"bootstrap": asdict(paired_bootstrap(a, b, **options)),
            "permutation": asdict(paired_permutation(a, b, **options))}


def _truncation(config: AnalysisConfig, spec_name: str, workspace: Workspace,
                runs: list[RunResult], dim: int) -> list[dict]:
    """Every trained method refitted and evaluated on the first k dimensions, plus the
    full-dimension runs as the k = dim end of the sweep."""
    if "truncation" not in config.analyses:
        return []
    rows = []
    full = [r for r in runs if r.spec.get("model_dir") is None]
    for k in sorted({int(k) for k in config.truncation_ks if k < dim}):
        for spec in config.specs(spec_name)[: len(config.methods)]:
            result = run(spec.with_(truncate=k), workspace)
            rows += _sweep_rows(k, result)
            logger.info("truncation k=%d %s: %s", k, spec.method,
                        {r["task"]: round(r["meaning"], 3) for r in rows[-len(config.tasks):]})
    for result in full:
        rows += _sweep_rows(dim, result)
    return rows


def _sweep_rows(k: int, result: RunResult) -> list[dict]:
    return [{"k": k, "method": result.method, "task": s.task, "metric": s.main_metric,
             "meaning": s.main_score("meaning"),
             "language": s.main_score("language") if "language" in s.views()
             else float("nan")} for s in result.scores if not s.task.endswith("codeswitch")]


__all__ = ["ANALYSES", "AnalysisConfig", "run_analyses"]
