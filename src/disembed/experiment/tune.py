"""``tune``: choose each method's hyperparameters on held-out training pairs, never on a test set.

For every method, each candidate of its grid (the recipe's ``hpo_default``: learning rates
for trained recipes, ranks for subspace erasure, ...; or ``TuneConfig.grids``) is fitted on
the training pool with ``holdout_per_language`` pairs of every language set aside, and
scored on the meaning part by two criteria, one per kind of evaluation task:

* retrieval (Tatoeba, BUCC mining): xx<->en retrieval of the held-out pairs, averaged over
  languages (``bitext_retrieval``: the Tatoeba protocol on pool sentences);
* graded similarity (STS17, QE): Pearson correlation on the WMT20 QE **dev** split
  (``wmt20_mlqe/dev``, 1000 rated translations per pair; evaluation uses ``test``),
  averaged over the six pairs. Label-free stand-ins ranked methods opposite to their
  cross-lingual STS, so the criterion uses graded labels.

The choice maximises their mean (``validation_score``) among the candidates whose language
part retrieves at most :data:`LEAKAGE_LIMIT` of the held-out translations; a method none of
whose candidates meets the limit keeps its best candidate, flagged. Candidates within
:data:`TIE_TOLERANCE` of the best go to the cheapest to train. The **default recipe** is the
method whose choice scores best among those that meet the limit. Pooled retrieval (every
sentence against the held-out sentences of all languages) is reported beside the criterion
but not part of it: it rewards a split for making languages indistinguishable, which no
evaluation task asks for (docs/tuning.md has every candidate's scores and how the criterion
was settled).

Every WMT20 QE split is kept out of training pools; epochs are chosen by early stopping on
the trainer's own validation split. The choice per method goes to ``tuned.json``
(``{method: params}``), which ``disembed bench --params`` reads. A rerun reuses finished
candidates (re-measured from their saved models, not refitted, when
:data:`VALIDATION_VERSION` has changed).
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..analysis.geometry import views_by_language
from ..data.parallel import ParallelPairs
from ..encoders import DEFAULT_ENCODER, Encoder
from ..evaluation import DEFAULT_TASKS
from ..evaluation.metrics import pooled_retrieval_accuracy, retrieval_accuracy
from ..exceptions import ConfigError
from ..methods import Disentangler, method_class, tuning_grid
from ..provenance import environment
from ..reports.tune_report import render_tune
from ..results import RESULT_FILE, ExperimentResult, RunResult
from ..saved_model import SavedModel
from ..util.constraints import Interval
from ..util.fields import check_fields
from ..util.files import atomic_write_text
from ..util.folders import mark_folder
from ..util.jsonsafe import dumps_json
from ..util.text import slug
from .params import DEFAULT_TUNE_METHODS, SEED_PARAM, check_method_grids, takes_seed
from .run import RunHooks, RunOutputs, run
from .spec import (
    MIN_PAIRS_PER_LANGUAGE,
    RunSpec,
    TrainingData,
    Workspace,
)
from .steps import load_training_set, open_encoder
from .validation import qe_dev_score

logger = logging.getLogger(__name__)

#: Bumped when the criteria change: finished candidates are then re-measured from their saved
#: models, not refitted.
VALIDATION_VERSION = 5
CRITERION = "validation_score"
#: The most a language part may retrieve held-out translations (a fraction) for a candidate
#: to be chosen: a default's language part must not carry the meaning.
LEAKAGE_LIMIT = 0.05
#: Candidates within this much of the best validation score are tied (0.1 points of the
#: criterion: less than the seed-to-seed spread of a trained recipe); among tied ones the
#: cheapest to train wins, so a learning rate that needs 10x the steps for +0.05 is not
#: what a study at 10x the data then pays for.
TIE_TOLERANCE = 0.001


@dataclass
class TuneConfig:
    """What ``tune`` fits: ``methods`` on ``data`` (its pool, the size the choice is for and
    the pairs held out to score candidates on; its seed is every candidate's seed);
    ``grids`` overrides each method's own grid (its recipe's ``hpo_default``,
    :func:`~disembed.methods.tuning_grid`)."""

    #: held-out pairs per language to score candidates on: as many as a training language
    #: needs at least
    _field_constraints: ClassVar[dict] = {
        "data.holdout_per_language": [Interval(int, MIN_PAIRS_PER_LANGUAGE, None)]}

    encoder: str = DEFAULT_ENCODER
    methods: list[str] = field(default_factory=lambda: list(DEFAULT_TUNE_METHODS))
    data: TrainingData = field(default_factory=lambda: TrainingData(holdout_per_language=300))
    grids: dict[str, dict[str, list]] = field(default_factory=dict)
    #: training seeds every candidate of a seeded recipe is fitted with; its score is the mean
    #: over them (empty: the data's seed alone). A recipe whose result depends on the seed
    #: (docs/seed_basins.md) is then chosen for what it does on every seed, not on one.
    seeds: list[int] = field(default_factory=list)
    out_dir: str = "runs/tune"
    #: where it reads and writes (data, cache and its dtype, encoding batch size, force)
    workspace: Workspace = field(default_factory=Workspace)

    def __post_init__(self) -> None:
        check_method_grids(self.grids, "grid")  # every method given, tuned here or not
        for name in self.methods:
            method_class(name)  # an unknown name: "did you mean"
        check_fields(self)
        if self.data.pairs_file is not None:
            raise ConfigError("tune holds pairs out of the pool; a pairs file has none to hold "
                              "out (give languages instead)")

    def training_seeds(self, method: str) -> list[int]:
        """The seeds ``method``'s candidates are fitted with (one for a recipe without a
        seed)."""
        seeds = list(self.seeds) or [self.data.seed]
        return seeds if takes_seed(method) else seeds[:1]

    def grid(self, method: str) -> dict[str, list]:
        return self.grids[method] if method in self.grids else tuning_grid(method)

    def candidates(self, method: str) -> list[dict[str, Any]]:
        grid = self.grid(method)
        return [dict(zip(grid, values, strict=True))
                for values in itertools.product(*grid.values())]


def validation_scores(model: Disentangler, src: np.ndarray, tgt: np.ndarray,
                      pairs: ParallelPairs, qe_dev: float) -> dict[str, Any]:
    """The tuning criteria (module docstring) on the meaning part: pooled retrieval of the
    held-out pairs ``src (n, d)`` / ``tgt (n, d)`` and the WMT20 QE dev score ``qe_dev``;
    xx<->en retrieval per language for reference."""
    a = views_by_language(model, src, pairs.src_lang)
    b = views_by_language(model, tgt, pairs.tgt_lang)
    retrieval = _per_language_retrieval(a["meaning"], b["meaning"], pairs.src_lang)
    leaked = (_per_language_retrieval(a["language"], b["language"], pairs.src_lang)
              if "language" in a else {})
    pooled = pooled_retrieval_accuracy(a["meaning"], b["meaning"])
    bitext = float(np.mean(list(retrieval.values())))
    return {CRITERION: (bitext + qe_dev) / 2, "pooled_retrieval": pooled, "qe_dev": qe_dev,
            "bitext_retrieval": bitext,
            "language_retrieval": float(np.mean(list(leaked.values()))) if leaked else None,
            "per_language": retrieval, "version": VALIDATION_VERSION}


def _per_language_retrieval(a: np.ndarray, b: np.ndarray, languages: list[str]
                            ) -> dict[str, float]:
    """xx<->en retrieval accuracy of rows ``a`` against ``b`` (n, d), per language."""
    langs = np.asarray(languages, dtype=object)
    return {lang: retrieval_accuracy(a[langs == lang], b[langs == lang]).acc_mean
            for lang in dict.fromkeys(languages)}


def tune(config: TuneConfig) -> ExperimentResult:
    """Fit every candidate and keep the best per method; writes ``tune.json``, ``tune.md``
    and ``tuned.json`` into ``out_dir``."""
    t0 = time.perf_counter()
    workspace = config.workspace
    encoder = open_encoder(RunSpec(encoder=config.encoder), workspace)
    heldout = load_training_set(config.data, DEFAULT_TASKS, workspace).heldout
    src, tgt = encoder.encode(heldout.src), encoder.encode(heldout.tgt)
    hooks = RunHooks(measure=lambda model, enc, scores: {"validation": validation_scores(
        model, src, tgt, heldout, qe_dev_score(model, enc, workspace.data_dir))})
    out = mark_folder(config.out_dir)  # a rerun recognises the folder as its own
    runs = [_candidate(config, method, params, seed, encoder, workspace, hooks, out)
            for method in config.methods for params in config.candidates(method)
            for seed in config.training_seeds(method)]
    chosen = choose(runs)
    result = ExperimentResult("tune", asdict(config), runs,
                              extras={"chosen": chosen, "criterion": CRITERION,
                                      "default": choose_default(runs),
                                      "leakage_limit": LEAKAGE_LIMIT,
                                      "tie_tolerance": TIE_TOLERANCE,
                                      "validation_pairs": len(heldout)},
                              timings={"total_seconds": time.perf_counter() - t0},
                              environment=environment())
    result.to_json(out / "tune.json")
    atomic_write_text(out / "tune.md", render_tune(result))
    atomic_write_text(out / "tuned.json", dumps_json(chosen) + "\n")
    logger.info("tuned settings in %s", out / "tuned.json")
    return result


def _candidate(config: TuneConfig, method: str, params: dict, seed: int, encoder: Encoder,
               workspace: Workspace, hooks: RunHooks, out: Path) -> RunResult:
    data = config.data if method_class(method).needs_data else None
    label = f"{method} " + " ".join(f"{k}={v}" for k, v in params.items())
    spec = RunSpec(method=method, params=params, encoder=config.encoder, data=data, tasks=(),
                   seed=seed, label=label.strip())
    folder = out / slug(method) / (slug("_".join(f"{k}-{v}" for k, v in params.items()))
                                   or "default")
    if config.seeds:  # one folder per training seed
        folder = folder / f"seed-{seed}"
    result = run(spec, workspace, outputs=RunOutputs(run_dir=folder), encoder=encoder,
                 hooks=hooks)
    if upgrade_measurement(result.measurements.get("validation", {})):
        result.to_json(folder / RESULT_FILE)
    elif result.measurements.get("validation", {}).get("version") != VALIDATION_VERSION:
        model = SavedModel.load(folder / "model").disentangler  # finished under older criteria
        result.measurements = hooks.measure(model, encoder, result.scores)
        result.to_json(folder / RESULT_FILE)
    return result


def upgrade_measurement(validation: dict[str, Any]) -> bool:
    """Bring a version-4 measurement to the current criterion in place, when it holds every
    part of it (version 4 measured the same parts and chose on pooled retrieval instead of
    xx<->en retrieval); ``False`` when it cannot (then the candidate is re-measured)."""
    if validation.get("version") != 4 or "language_retrieval" not in validation:
        return False
    validation[CRITERION] = (validation["bitext_retrieval"] + validation["qe_dev"]) / 2
    validation["version"] = VALIDATION_VERSION
    return True


def within_limit(run: RunResult | list[RunResult]) -> bool:
    """Whether the run's language part leaks at most :data:`LEAKAGE_LIMIT` (a method
    without a language part leaks nothing); for a candidate's runs over several seeds,
    whether every one does."""
    if isinstance(run, list):
        return all(within_limit(r) for r in run)
    leaked = run.measurements["validation"].get("language_retrieval")
    return leaked is None or leaked <= LEAKAGE_LIMIT


def _score(group: list[RunResult]) -> float:
    """A candidate's criterion: the mean over its seeds' runs."""
    return float(np.mean([r.measurements["validation"][CRITERION] for r in group]))


def training_steps(run: RunResult) -> int:
    """Optimiser steps the run took (0 for a closed-form fit), every fit of it counted
    (both arms of a ``mirror=True`` recipe)."""
    training = run.training or {}
    orientation = training.get("orientation") or {}
    if orientation.get("steps") is not None:
        return int(orientation["steps"])
    return int((training.get("history") or {}).get("steps") or 0)


def candidates_of(runs: list[RunResult]) -> list[list[RunResult]]:
    """The runs grouped by candidate (method and settings), one run per training seed, in
    their order."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in runs:
        key = (r.spec["method"], dumps_json(dict(sorted(r.spec["params"].items()))))
        groups.setdefault(key, []).append(r)
    return list(groups.values())


def _best(runs: list[RunResult]) -> list[RunResult]:
    """The best candidate's runs: among the candidates within the leakage limit (all, if
    none is), the ones within :data:`TIE_TOLERANCE` of the best mean score, and of those the
    one with the fewest training steps over its seeds (then the higher score)."""
    groups = candidates_of(runs)
    pool = [g for g in groups if within_limit(g)] or groups
    top = max(_score(g) for g in pool)
    tied = [g for g in pool if _score(g) >= top - TIE_TOLERANCE]
    return min(tied, key=lambda g: (sum(training_steps(r) for r in g) / len(g), -_score(g)))


def choose(runs: list[RunResult]) -> dict[str, dict]:
    """Per method, the parameters of its best candidate (see :func:`_best`)."""
    methods = dict.fromkeys(r.spec["method"] for r in runs)
    return {m: dict(_best([r for r in runs if r.spec["method"] == m])[0].spec["params"])
            for m in methods}


def choose_default(runs: list[RunResult]) -> dict[str, Any] | None:
    """The method (and settings) of the best candidate (see :func:`_best`) among all
    candidates within the leakage limit, or ``None`` when none is."""
    if not any(within_limit(g) for g in candidates_of(runs)):
        return None
    best = _best(runs)  # chooses among those within the limit
    return {"method": best[0].spec["method"], "params": dict(best[0].spec["params"]),
            CRITERION: _score(best), "seeds": [r.spec.get(SEED_PARAM) for r in best]}


__all__ = ["CRITERION", "LEAKAGE_LIMIT", "TIE_TOLERANCE", "TuneConfig", "candidates_of", "choose",
           "choose_default", "training_steps", "tune", "upgrade_measurement",
           "validation_scores", "within_limit"]
