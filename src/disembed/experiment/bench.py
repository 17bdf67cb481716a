"""The main job: a list of run specs (every encoder x method, plus the chance floor) and a
report.

Every finished run is saved as ``<out>/<encoder>/<method>/result.json`` with its model;
a rerun with the same settings reuses finished runs (``force=True`` redoes them) and
resumes an interrupted training from its checkpoint. Embeddings come from the on-disk
cache, so a repeated run encodes nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..data.languages import normalize_language
from ..encoders import DEFAULT_ENCODER
from ..evaluation import DEFAULT_TASKS, EvalOptions
from ..exceptions import ConfigError
from ..methods import METHODS, method_class
from ..provenance import environment
from ..reports.bench_report import SUMMARY_PNG, render_bench
from ..reports.html import markdown_page
from ..reports.plots import write_summary_plot
from ..results import ExperimentResult
from ..util.files import atomic_write_text
from ..util.text import slug
from .params import build_method
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
from .tasks import check_tasks

logger = logging.getLogger(__name__)

DEFAULT_METHODS = ("baseline", "mean-centering", "seed")
FLOOR_ENCODER = "hash:64"


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
    tatoeba_languages: str = "tatoeba-14"
    max_eval_items: int | None = DEFAULT_MAX_EVAL_ITEMS
    seed: int = 0
    method_params: dict[str, dict] = field(default_factory=dict)
    skip_missing_languages: bool = False
    floor: bool = True
    out_dir: str = "runs/bench"
    data_dir: str | None = None
    cache_dir: str | None = None
    force: bool = False

    def __post_init__(self) -> None:
        if not self.encoders:
            raise ConfigError("bench needs at least one encoder, e.g. encoders=['e5-small']")
        self.methods = list(dict.fromkeys(
            m for name in self.methods for m in (all_methods() if name == "all" else [name])))
        for name in self.methods:  # unknown names, parameters and settings: all now
            build_method(name, self.method_params.get(name, {}), seed=self.seed)
        self.tasks = list(check_tasks(self.tasks))
        self.languages = [normalize_language(x) for x in self.languages]
        self.training_data()  # validates languages and sizes now, not after the first run
        self.eval_options()

    def training_data(self) -> TrainingData:
        return TrainingData(tuple(self.languages), self.pairs_per_language, seed=self.seed,
                            skip_missing=self.skip_missing_languages)

    def eval_options(self) -> EvalOptions:
        return EvalOptions(max_items=self.max_eval_items, seed=self.seed,
                           tatoeba_languages=self.tatoeba_languages)

    def specs(self) -> list[tuple[RunSpec, Path]]:
        """Every run of the bench and its folder: encoders x methods, then the floor."""
        out, data, evaluation = Path(self.out_dir), self.training_data(), self.eval_options()
        specs = [(RunSpec(method=m, params=dict(self.method_params.get(m, {})), encoder=enc,
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
    workspace = Workspace(data_dir=config.data_dir, cache_dir=config.cache_dir,
                          force=config.force)
    specs = config.specs()
    encoders = {spec.encoder: open_encoder(spec, workspace) for spec, _ in specs}  # fail early
    t_start = time.perf_counter()
    runs = [run(spec, workspace, outputs=RunOutputs(run_dir=folder),
                encoder=encoders[spec.encoder]) for spec, folder in specs]
    stats = [s for s in (getattr(e, "stats", None) for e in encoders.values()) if s]
    timings = {"total_seconds": time.perf_counter() - t_start,
               "encode_seconds": sum(s.encode_seconds + s.lookup_seconds for s in stats),
               "sentences_encoded": sum(s.encoded for s in stats)}
    timings["encode_fraction"] = timings["encode_seconds"] / timings["total_seconds"]
    result = ExperimentResult("bench", asdict(config), runs, timings=timings,
                              environment=environment())
    write_bench(result, Path(config.out_dir))
    logger.info("bench done in %.0fs (%.0fs encoding); tables in %s", timings["total_seconds"],
                timings["encode_seconds"], Path(config.out_dir) / "results.md")
    return result


def write_bench(result: ExperimentResult, out: Path) -> None:
    """``bench.json`` (the result), ``summary.png`` (with matplotlib), ``results.md`` and the
    self-contained ``report.html``."""
    result.to_json(out / "bench.json")
    figure = write_summary_plot(result.runs, out / SUMMARY_PNG) is not None
    text = render_bench(result, figure=figure)
    atomic_write_text(out / "results.md", text)
    atomic_write_text(out / "report.html", markdown_page(text, title="disembed bench",
                                                         base_dir=out))


__all__ = ["DEFAULT_METHODS", "BenchConfig", "all_methods", "run_bench", "write_bench"]
