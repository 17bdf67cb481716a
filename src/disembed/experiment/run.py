"""``run(spec) -> RunResult``: the one place a run is carried out.

Every verb (``bench``, ``analyse``, ``train``, ``evaluate``) and the public API call it:
it opens the encoder, loads or builds the training data (evaluation overlaps removed),
checks the hyperparameters, fits the method (with the caller's hooks, e.g. an epoch
callback) or loads a saved model, evaluates the tasks and records provenance. With a run
folder it saves the model, ``result.json`` and ``items.npz``, and reuses a finished run
whose fingerprint and encoder match instead of redoing it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..encoders import Encoder
from ..evaluation import Task, TaskScores
from ..evaluation.digest import evaluation_data_digest
from ..exceptions import ConfigError, DisembedError
from ..methods import Disentangler, load_disentangler
from ..provenance import environment
from ..results import RESULT_FILE, RunResult
from ..saved_model import ModelMetadata, SavedModel
from ..util.locks import folder_lock
from .params import build_method
from .spec import RunSpec, Workspace
from .steps import (
    evaluate,
    fit_method,
    load_pairs,
    open_encoder,
    uses_language,
)
from .validation import dev_validation

logger = logging.getLogger(__name__)



@dataclass
class RunHooks:
    """What an experiment adds to a run without changing its scores.

    Attributes:
        epoch_callback: ``(model, encoder) -> callback(record)`` for trained recipes, called
            after every epoch (e.g. the geometry recorder of ``analyse``); may return ``None``.
        extra_tasks: task instances evaluated after the spec's tasks (e.g. code-switching).
        measure: ``(model, encoder, scores) -> dict`` stored as the result's measurements.
        required_views: views a finished run of a recipe that uses a language must have on
            every task to be reused (e.g. ``untagged``, which runs saved before it existed
            lack); one without them is evaluated again with its saved model, not refitted.
    """

    epoch_callback: Callable[[Disentangler, Encoder], Callable[[dict], None] | None] | None = None
    extra_tasks: Sequence[Task] = ()
    measure: Callable[[Disentangler, Encoder, list[TaskScores]], dict] | None = None
    required_views: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunOutputs:
    """Where a run writes: ``result.json`` and ``items.npz`` in ``run_dir``, the model in
    ``model_dir`` (default ``run_dir/model``), training checkpoints in ``checkpoint_dir``
    (default ``run_dir/checkpoint``). All optional: a run without outputs writes nothing."""

    run_dir: str | Path | None = None
    model_dir: str | Path | None = None
    checkpoint_dir: str | Path | None = None

    def model_path(self) -> Path | None:
        base = self.model_dir or (Path(self.run_dir) / "model" if self.run_dir else None)
        return Path(base) if base else None

    def checkpoint_path(self) -> Path | None:
        base = self.checkpoint_dir or (Path(self.run_dir) / "checkpoint" if self.run_dir
                                       else None)
        return Path(base) if base else None


def run(spec: RunSpec, workspace: Workspace = Workspace(), *,
        outputs: RunOutputs = RunOutputs(), encoder: Encoder | None = None,
        hooks: RunHooks | None = None) -> RunResult:
    """Carry out ``spec``; see the module docstring. ``encoder``: an already opened encoder
    for ``spec.encoder`` (a bench opens each encoder once for all its runs).

    The fitted or loaded model is on the returned result as ``result.model``. A run folder
    (or, for a run that writes only a model, ``disembed train``, its model folder) has one
    writer at a time (:func:`~disembed.util.locks.folder_lock`).
    """
    folder = outputs.run_dir if outputs.run_dir is not None else outputs.model_dir
    if folder is None:
        return _run(spec, workspace, outputs, encoder, hooks)
    with folder_lock(folder):
        return _run(spec, workspace, outputs, encoder, hooks)


def _run(spec: RunSpec, workspace: Workspace, outputs: RunOutputs, encoder: Encoder | None,
         hooks: RunHooks | None) -> RunResult:
    hooks = hooks or RunHooks()
    tasks = spec.tasks
    saved = (SavedModel.load(spec.model_dir, spec.encoder, spec.encoder_options)
             if spec.model_dir else None)
    unfitted = None if saved else build_method(spec.method, spec.params, seed=spec.seed)
    spec = _with_saved_model(spec, saved)
    # a saved model's encoder is the one SavedModel chooses and checks (its documented
    # rule); a truncated one is rebuilt from the spec and checked below
    bare = saved.encoder if saved is not None and spec.truncate is None and encoder is None \
        else None
    encoder = encoder or open_encoder(spec, workspace, bare=bare)
    if saved is not None:
        saved.check_encoder(encoder, spec.encoder)
    fingerprint = spec.fingerprint()
    eval_digest = evaluation_data_digest(tasks, workspace.data_dir)
    fitted_before = None
    if outputs.run_dir is not None and not workspace.force:
        previous = finished_run(spec, outputs.run_dir, encoder, workspace)
        if previous is not None and not _lacks_views(previous, hooks.required_views):
            return previous
        fitted_before = _fitted_before(spec, tasks, outputs, encoder, workspace, saved)
    stats_before = _encode_seconds(encoder)
    t0 = time.perf_counter()
    if fitted_before is not None:
        model, training = fitted_before
    elif saved is None:
        model, training = _fit(unfitted, spec, tasks, encoder, workspace, outputs, hooks)
    else:
        model, training = saved.disentangler, dict(saved.metadata.training or {})
    t_fit = time.perf_counter()
    scores = evaluate(model, encoder, [*tasks, *hooks.extra_tasks], options=spec.evaluation,
                      data_dir=workspace.data_dir, batch_size=workspace.batch_size)
    t_eval = time.perf_counter()
    result = RunResult(
        label=spec.display_label, method=model.name, params=model.get_params(),
        encoder=encoder.identity.to_dict(), seed=spec.seed, spec=spec.to_dict(),
        scores=scores, training=training,
        timings={"fit_seconds": t_fit - t0, "train_seconds": model.fit_record()["seconds"],
                 "evaluate_seconds": t_eval - t_fit,
                 "encode_seconds": _encode_seconds(encoder) - stats_before},
        environment=environment(),
        measurements=hooks.measure(model, encoder, scores) if hooks.measure else {},
        fingerprint=fingerprint, eval_data_digest=eval_digest)
    result.model = model
    _save(result, model, spec, encoder, outputs, saved is None and fitted_before is None)
    logger.info("%s: done in %.0fs", result.label, t_eval - t0)
    return result


def finished_run(spec: RunSpec, run_dir: str | Path, encoder: Encoder,
                 workspace: Workspace = Workspace()) -> RunResult | None:
    """The finished run of ``spec`` in ``run_dir`` (same fingerprint, encoder, training
    pairs and evaluation data, as :func:`run` would reuse it), or ``None``: nothing is
    fitted or evaluated."""
    tasks = spec.tasks
    previous = _finished(Path(run_dir), spec.fingerprint(), encoder,
                         lambda: load_pairs(spec.data, tasks, workspace)[1]["digest"])
    if previous is None:
        return None
    if previous.eval_data_digest != evaluation_data_digest(tasks, workspace.data_dir):
        logger.info("%s: the evaluation data changed since %s (or it predates evaluation-data "
                    "digests); evaluating again", previous.label, Path(run_dir) / RESULT_FILE)
        return None
    logger.info("%s: reusing finished run %s", previous.label, Path(run_dir) / RESULT_FILE)
    return previous


def _lacks_views(result: RunResult, views: Sequence[str]) -> bool:
    """Whether a finished run of a recipe that uses a language lacks one of ``views`` on a
    task (it was saved before that view existed): it is evaluated again."""
    if not views or not uses_language(result.method, result.params):
        return False
    missing = sorted({v for s in result.scores for v in views if v not in s.views()})
    if missing:
        logger.info("%s: its finished run has no %s scores (saved by an older disembed); "
                    "evaluating its model again", result.label, ", ".join(missing))
    return bool(missing)


def _fitted_before(spec: RunSpec, tasks: Sequence[str], outputs: RunOutputs, encoder: Encoder,
                   workspace: Workspace, saved: SavedModel | None
                   ) -> tuple[Disentangler, dict] | None:
    """The model a finished run of ``spec`` fitted (same fingerprint, encoder and training
    pairs) when only its evaluation is stale: it is evaluated again, not refitted."""
    model_path = outputs.model_path()
    if saved is not None or model_path is None or not model_path.is_dir():
        return None
    previous = _finished(Path(outputs.run_dir), spec.fingerprint(), encoder,
                         lambda: load_pairs(spec.data, tasks, workspace)[1]["digest"])
    if previous is None:
        return None
    try:
        model = load_disentangler(model_path)
    except DisembedError as exc:
        logger.info("%s: its saved model cannot be reused (%s); fitting again",
                    previous.label, exc)
        return None
    return model, previous.training


def _with_saved_model(spec: RunSpec, saved: SavedModel | None) -> RunSpec:
    """A run of a saved model takes the model's method, a label naming the folder, and the
    encoder the model was saved with, exactly (:attr:`SavedModel.encoder_spec` and its
    options: e5-small's precision included)."""
    if saved is None:
        return spec
    name = saved.disentangler.name
    return spec.with_(method=name, label=spec.label or f"{name} ({spec.model_dir})",
                      encoder=saved.encoder_spec, encoder_options=saved.encoder_spec_options)


def _finished(run_dir: Path, fingerprint: str, encoder: Encoder,
              data_digest: Callable[[], str]) -> RunResult | None:
    """The finished run in ``run_dir`` if it ran this spec on this encoder and on the same
    training pairs (a changed data folder or pool filter makes it stale), else ``None``."""
    path = run_dir / RESULT_FILE
    if not path.is_file():
        return None
    previous = RunResult.load(run_dir)
    if previous.fingerprint != fingerprint or previous.encoder != encoder.identity.to_dict():
        return None
    saved = (previous.training.get("data") or {}).get("digest")
    if saved is not None and saved != data_digest():
        logger.info("%s: the training pairs changed since %s; running again", previous.label,
                    path)
        return None
    return previous


def _fit(model: Disentangler, spec: RunSpec, tasks: Sequence[str], encoder: Encoder,
         workspace: Workspace, outputs: RunOutputs, hooks: RunHooks
         ) -> tuple[Disentangler, dict]:
    if spec.data is None:
        if model.needs_data:
            raise ConfigError(f"{spec.method} must be trained: give the run training data "
                              "(languages and pairs per language, or a pairs file)")
        empty = np.empty((0, encoder.dim), dtype=np.float32)
        model.fit(empty, empty, [], [])
        return model, {}
    pairs, report = load_pairs(spec.data, tasks, workspace)
    callback = hooks.epoch_callback(model, encoder) if hooks.epoch_callback else None
    dev = dev_validation(model, encoder, workspace.data_dir, workspace.batch_size)
    fit_method(model, encoder, pairs, batch_size=workspace.batch_size,
               checkpoint_dir=outputs.checkpoint_path(), on_epoch_end=callback, **dev.options)
    record = model.fit_record()
    out = {"data": report, "history": record["history"],
           "diagnostics": record["diagnostics"], "validation": dev.note}
    for key in ("orientation", "reference_check"):
        if getattr(model, key + "_", None) is not None:
            out[key] = getattr(model, key + "_")
    return model, out


def _encode_seconds(encoder: Encoder) -> float:
    stats = getattr(encoder, "stats", None) or getattr(getattr(encoder, "encoder", None),
                                                       "stats", None)
    return stats.encode_seconds + stats.lookup_seconds if stats else 0.0


def _save(result: RunResult, model: Disentangler, spec: RunSpec, encoder: Encoder,
          outputs: RunOutputs, fitted_here: bool) -> None:
    model_path = outputs.model_path()
    if fitted_here and model_path is not None:
        meta = ModelMetadata(model.name, model.get_params(), encoder_spec=spec.encoder,
                             encoder=encoder.identity, training=result.training.get("data"))
        model.save(model_path, metadata=meta.to_dict())
    if outputs.run_dir is not None:
        result.save(outputs.run_dir)


__all__ = ["RESULT_FILE", "RunHooks", "RunOutputs", "run"]
