"""The main job: a list of run specs (every encoder x method, plus the chance floor) and a
report.

Every finished run is saved as ``<out>/<encoder>/<method>/result.json`` with its model;
a rerun with the same settings reuses finished runs (``Workspace(force=True)`` redoes them) and
resumes an interrupted training from its checkpoint. Embeddings come from the on-disk
cache, so a repeated run encodes nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..analysis.items import compare_to_reference
from ..data.languages import normalize_language
from ..encoders import DEFAULT_ENCODER
from ..evaluation import DEFAULT_TASKS, EvalOptions
from ..exceptions import ConfigError
from ..methods import METHODS, method_class
from ..provenance import environment
from ..reports.bench_report import DIFFERENCES_PNG, SUMMARY_PNG, render_bench
from ..reports.html import write_report
from ..reports.plots import write_difference_plot, write_summary_plot
from ..results import ExperimentResult
from ..util.folders import mark_folder
from ..util.text import slug
from .params import build_method, check_method_params
from .run import RunOutputs, run
from .spec import (
    DEFAULT_MAX_EVAL_ITEMS,
    DEFAULT_PAIRS_PER_LANGUAGE,
    DEFAULT_TRAIN_LANGUAGES,
    RunSpec,
    TrainingData,
    Workspace,
)
from .steps import open_encoder
from .tasks import check_task_options, check_tasks

logger = logging.getLogger(__name__)

#: The recipe the main job trains beside ``baseline`` and ``mean-centering``, with the
#: settings ``disembed tune`` chose for it on validation data (held-out pool pairs and the
#: WMT20 QE dev set, never a test set) at the default size, among candidates whose language
#: part retrieves at most 5% of held-out translations. docs/tuning.md has the run.
DEFAULT_RECIPE = "seed-centered"
#: ``mirror=True``: a second fit from the mirrored meaning bias, the one WMT20 QE dev prefers
#: kept, so that every training seed lands in the better of the recipe's two solutions
#: (issue 37, docs/seed_basins.md; chosen by ``tune --seeds 0,1,2``).
DEFAULT_RECIPE_TUNED: dict[str, object] = {"lr": 3e-3, "init_scale": 0.9, "mirror": True}
#: Not tuned, safeguards of any language set (issue 46, docs/default_panel.md):
#: ``reference_check``: 10% of the user's pairs held out, on which the fit is compared with
#: mean-centering and kept, blended with it, or replaced by it where it does not beat it
#: (:mod:`disembed.methods.guard`); ``min_epoch_steps``: batches made smaller where an epoch
#: would have fewer than 8 steps (fewer than ~5,000 pairs), so early stopping does not end
#: the fit at its start.
DEFAULT_RECIPE_SAFEGUARDS: dict[str, object] = {"reference_check": 0.1, "min_epoch_steps": 8}
DEFAULT_RECIPE_PARAMS: dict[str, object] = {**DEFAULT_RECIPE_TUNED, **DEFAULT_RECIPE_SAFEGUARDS}
DEFAULT_RECIPE_NOTE = (
    "settings chosen by `disembed tune` on e5-small at 500 pairs per language of 12 "
    "languages (held-out pool pairs + WMT20 QE dev; language part within the 5% leakage "
    "limit; mirror chosen over training seeds 0-2; docs/tuning.md, docs/seed_basins.md); "
    "each run checks itself against mean-centering on 10% of its own pairs and keeps "
    "mean-centering unless it beats it there (docs/default_panel.md)")
DEFAULT_METHODS = ("baseline", "mean-centering", DEFAULT_RECIPE)
#: what every other method of a bench is compared with (paired bootstrap over test items)
REFERENCE_METHOD = "mean-centering"
FLOOR_ENCODER = "hash:64"


def default_params(method: str) -> dict:
    """The settings the main job gives ``method`` unless told otherwise: the tuned ones for
    the default recipe, none (the recipe's own defaults) for the rest."""
    return dict(DEFAULT_RECIPE_PARAMS) if method == DEFAULT_RECIPE else {}


def all_methods() -> list[str]:
    """``--methods all``: the default methods first, then every other registered one."""
    return list(DEFAULT_METHODS) + [n for n in METHODS.names() if n not in DEFAULT_METHODS]


@dataclass
class BenchConfig:
    """Everything a ``disembed bench`` run depends on (saved with its results)."""

    encoders: list[str] = field(default_factory=lambda: [DEFAULT_ENCODER])
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_METHODS))
    languages: list[str] = field(default_factory=lambda: list(DEFAULT_TRAIN_LANGUAGES))
    pairs_per_language: int | None = DEFAULT_PAIRS_PER_LANGUAGE
    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    #: each task's own options by task name (its ``Options`` fields), e.g.
    #: ``{"tatoeba": {"languages": "de,zh"}}``; a task not named takes its defaults
    task_options: dict[str, dict] = field(default_factory=dict)
    max_eval_items: int | None = DEFAULT_MAX_EVAL_ITEMS
    seed: int = 0
    #: per-method settings over the defaults (:data:`DEFAULT_RECIPE_PARAMS` for the default
    #: recipe, each recipe's own for the rest)
    method_params: dict[str, dict] = field(default_factory=dict)
    skip_missing_languages: bool = False
    floor: bool = True
    out_dir: str = "runs/bench"
    #: where it reads and writes (data, cache and its dtype, encoding batch size, force)
    workspace: Workspace = field(default_factory=Workspace)

    def __post_init__(self) -> None:
        if not self.encoders:
            raise ConfigError("bench needs at least one encoder, e.g. encoders=['e5-small']")
        self.methods = list(dict.fromkeys(
            m for name in self.methods for m in (all_methods() if name == "all" else [name])))
        # every method's settings, named in self.methods or not: a typo is never dropped
        check_method_params(self.method_params, "method_params")
        for name in self.methods:  # unknown names, parameters and settings: all now
            build_method(name, self.params_for(name), seed=self.seed)
        self.tasks = list(check_tasks(self.tasks))
        self.languages = [normalize_language(x) for x in self.languages]
        self.training_data()  # validates languages and sizes now, not after the first run
        self.eval_options()

    def params_for(self, method: str) -> dict:
        """``method``'s settings: the tuned defaults of the default recipe, then
        :attr:`method_params` on top."""
        return {**default_params(method), **self.method_params.get(method, {})}

    def notes(self) -> list[str]:
        """What the report says about the settings of the runs."""
        out = []
        for method in self.methods:
            params = self.params_for(method)
            if params:
                settings = ", ".join(f"{k}={v}" for k, v in params.items())
                tuned = method == DEFAULT_RECIPE and all(
                    params[k] == v for k, v in DEFAULT_RECIPE_PARAMS.items())
                why = f" ({DEFAULT_RECIPE_NOTE})" if tuned else ""
                out.append(f"{method}: {settings}{why}")
        return out

    def training_data(self) -> TrainingData:
        return TrainingData(tuple(self.languages), self.pairs_per_language, seed=self.seed,
                            skip_missing=self.skip_missing_languages)

    def eval_options(self) -> EvalOptions:
        return check_task_options(EvalOptions(max_items=self.max_eval_items, seed=self.seed,
                                              task_options=self.task_options))

    def specs(self) -> list[tuple[RunSpec, Path]]:
        """Every run of the bench and its folder: encoders x methods, then the floor."""
        out, data, evaluation = Path(self.out_dir), self.training_data(), self.eval_options()
        specs = [(RunSpec(method=m, params=self.params_for(m), encoder=enc,
                          data=data if method_class(m).needs_data else None,
                          tasks=tuple(self.tasks), evaluation=evaluation, seed=self.seed),
                  out / slug(enc) / m) for enc in self.encoders for m in self.methods]
        if self.floor:
            specs.append((RunSpec(method="baseline", encoder=FLOOR_ENCODER,
                                  tasks=tuple(self.tasks), evaluation=evaluation, seed=self.seed,
                                  label=f"{FLOOR_ENCODER} (floor) / baseline"),
                          out / "hash-floor"))
        return specs


def run_bench(config: BenchConfig) -> ExperimentResult:
    """Run every spec of ``config``; writes ``bench.json``, ``results.md``, ``summary.png``."""
    workspace = config.workspace
    specs = config.specs()
    encoders = {spec.encoder: open_encoder(spec, workspace) for spec, _ in specs}  # fail early
    mark_folder(Path(config.out_dir))  # a rerun recognises the folder as its own
    t_start = time.perf_counter()
    runs = [run(spec, workspace, outputs=RunOutputs(run_dir=folder),
                encoder=encoders[spec.encoder]) for spec, folder in specs]
    stats = [s for s in (getattr(e, "stats", None) for e in encoders.values()) if s]
    timings = {"total_seconds": time.perf_counter() - t_start,
               "encode_seconds": sum(s.encode_seconds + s.lookup_seconds for s in stats),
               "sentences_encoded": sum(s.encoded for s in stats)}
    timings["encode_fraction"] = timings["encode_seconds"] / timings["total_seconds"]
    comparisons = [c.to_dict() for c in compare_to_reference(runs, REFERENCE_METHOD,
                                                             seed=config.seed)]
    result = ExperimentResult("bench", {**asdict(config), "notes": config.notes()}, runs,
                              comparisons, timings=timings, environment=environment())
    write_bench(result, Path(config.out_dir))
    logger.info("bench done in %.0fs (%.0fs encoding); tables in %s", timings["total_seconds"],
                timings["encode_seconds"], Path(config.out_dir) / "results.md")
    return result


def write_bench(result: ExperimentResult, out: Path) -> None:
    """``bench.json`` (the result), ``summary.png`` (with matplotlib), ``results.md`` and the
    self-contained ``report.html``."""
    figure = write_summary_plot(result.runs, out / SUMMARY_PNG) is not None
    differences = write_difference_plot(result.comparisons, out / DIFFERENCES_PNG) is not None
    write_report(result, out, json_name="bench.json", markdown_name="results.md",
                 render=lambda r: render_bench(r, figure=figure, differences=differences),
                 title="disembed bench")


__all__ = ["DEFAULT_METHODS", "DEFAULT_RECIPE", "DEFAULT_RECIPE_PARAMS",
           "DEFAULT_RECIPE_SAFEGUARDS", "DEFAULT_RECIPE_TUNED", "BenchConfig",
           "all_methods", "default_params", "run_bench", "write_bench"]
