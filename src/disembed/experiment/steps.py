"""The steps every run is made of, also public on their own: open an encoder, load training
pairs, embed them, fit a method, evaluate a model.

>>> from disembed import build_training_set, cached, evaluate, fit_method, load_encoder
>>> enc = cached(load_encoder("e5-small"))                          # doctest: +SKIP
>>> train = build_training_set(["de", "zh"], 2000)                 # doctest: +SKIP
>>> model = fit_method("seed", enc, train.pairs)                   # doctest: +SKIP
>>> scores = evaluate(model, enc, ["sts17", "wmt20-qe"])            # doctest: +SKIP
"""

from __future__ import annotations

import functools
import logging
import time
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from ..data.parallel import ParallelPairs, read_parallel_tsv
from ..data.paths import resolve_data_dir
from ..data.training_set import TrainingSet, build_training_set
from ..encoders import Encoder, load_encoder
from ..encoders.base import supported_languages
from ..encoders.cached import cached
from ..encoders.truncated import TruncatedEncoder
from ..evaluation import DEFAULT_TASKS, EvalOptions, Task, TaskScores
from ..exceptions import ConfigError
from ..methods import Disentangler, make_method, method_class
from ..methods.text_path import text_meaning
from ..saved_model import ModelMetadata
from .spec import RunSpec, TrainingData, Workspace
from .tasks import build_tasks, kept_out_sets

logger = logging.getLogger(__name__)


def open_encoder(spec: RunSpec, workspace: Workspace = Workspace(), *,
                 bare: Encoder | None = None) -> Encoder:
    """The run's encoder (``bare`` when given, e.g. a saved model's, else built from
    ``spec.encoder``) behind the embedding cache, cut to ``spec.truncate`` dimensions when
    asked."""
    bare = bare or load_encoder(spec.encoder, **spec.encoder_options)
    encoder = cached(bare, workspace.cache_dir, workspace.cache_dtype)
    return TruncatedEncoder(encoder, spec.truncate) if spec.truncate else encoder


def load_pairs(data: TrainingData, tasks: Sequence[str], workspace: Workspace = Workspace()
               ) -> tuple[ParallelPairs, dict]:
    """The training pairs of ``data`` and a report of where they came from."""
    if data.pairs_file is not None:
        pairs = read_parallel_tsv(data.pairs_file, data.src_col, data.tgt_col, data.src_lang,
                                  data.tgt_lang, skip_bad=data.skip_bad)
        return pairs, {"source": data.pairs_file, "total_pairs": len(pairs),
                       "counts": pairs.counts(),
                       "skipped": sum(r.skipped for r in pairs.reports),
                       "digest": pairs.digest()}
    built = load_training_set(data, tasks, workspace)
    return built.pairs, {**built.report(), "digest": built.pairs.digest()}


def load_training_set(data: TrainingData, tasks: Sequence[str],
                      workspace: Workspace = Workspace()) -> TrainingSet:
    """The pool's training pairs (and held-out pairs) for ``data``, keeping the evaluation
    sets of ``tasks`` out (see :class:`~disembed.experiment.TrainingData`)."""
    if data.pairs_file is not None:
        raise ConfigError("a pairs file is read as it is; it has no pool to hold pairs out of")
    keep_out = data.keep_out if data.keep_out is not None else kept_out_sets(tasks)
    return _built(data, tuple(keep_out), str(resolve_data_dir(workspace.data_dir)))


@functools.lru_cache(maxsize=4)
def _built(data: TrainingData, keep_out: tuple[str, ...], data_dir: str) -> TrainingSet:
    """One build per process for each (data, kept-out sets, folder): a study's runs share
    it (reading and filtering the whole pool takes seconds). Callers never modify it."""
    built = build_training_set(data.languages, data.pairs_per_language, eval_sets=keep_out,
                               data_dir=data_dir, seed=data.seed,
                               holdout_per_language=data.holdout_per_language,
                               skip_missing=data.skip_missing)
    logger.info(built.summary())
    return built


def embed_pairs(encoder: Encoder, pairs: ParallelPairs, *, batch_size: int = 64
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(src (n, d), tgt (n, d))`` float32 embeddings of both sides of ``pairs``."""
    both = encoder.encode(pairs.src + pairs.tgt, batch_size=batch_size)
    return both[: len(pairs)], both[len(pairs) :]


#: the view that scores the meaning part with no language tag (the model identifies it)
UNTAGGED_VIEW = "untagged"


def uses_language(method: str, params: Mapping[str, Any] | None = None) -> bool:
    """Whether ``method`` with ``params`` uses a language (so it has an untagged view); a
    trained recipe decides by its settings (``seed`` no, ``seed-centered`` yes)."""
    flag = method_class(method).uses_language
    if isinstance(flag, bool):
        return flag
    return bool(make_method(method, **dict(params or {})).uses_language)


def with_untagged(model: Disentangler) -> Callable[..., dict[str, np.ndarray]]:
    """``model.views`` plus, for a model that uses a language, the meaning part computed
    without the tag (:data:`UNTAGGED_VIEW`): what a user without tags gets, beside the
    gold-tag score in every table, through the one text path
    (:func:`~disembed.methods.text_path.text_meaning`: each text routed by its script and the
    model's identifier; without the texts, by the identifier alone)."""
    def views(X: np.ndarray, language: str, texts: Sequence[str] | None = None
              ) -> dict[str, np.ndarray]:
        out = model.views(X, language)
        if model.uses_language and model.language_identifier is not None:
            out[UNTAGGED_VIEW] = (model.meaning(X) if texts is None
                                  else text_meaning(model, X, texts).vectors)
        return out

    return views


def without_tags(model: Disentangler) -> Callable[..., dict[str, np.ndarray]]:
    """``model.views`` as a user without tags gets them: through the one text path, each
    text routed by its script and the identifier (once for both parts)."""
    def views(X: np.ndarray, _language: str, texts: Sequence[str] | None = None
              ) -> dict[str, np.ndarray]:
        if texts is None:
            return model.views(X)
        return text_meaning(model, X, texts, part="views").vectors

    return views


def fit_method(method: str | Disentangler, encoder: Encoder, pairs: ParallelPairs, *,
               params: Mapping[str, Any] | None = None, batch_size: int = 64,
               checkpoint_dir: str | Path | None = None,
               on_epoch_end: Callable[[dict], None] | None = None,
               validate: Callable[[Disentangler], float] | None = None) -> Disentangler:
    """Embed ``pairs`` with ``encoder`` and fit ``method`` (a name or an unfitted instance).

    ``checkpoint_dir`` and ``on_epoch_end`` reach trained recipes (closed-form ones have
    no epochs), and so does ``validate`` (``model -> score`` on validation data, e.g.
    :func:`~disembed.experiment.validation.qe_dev_validator`), which a recipe with
    ``mirror=True`` chooses between its two fits with; ``model.fit_record()["seconds"]`` is
    the time spent in ``fit``. The model records the encoder's identity, so
    ``model.save(DIR)`` writes it and every verb that opens DIR (``score --model``,
    ``mine --model`` ...) rebuilds that encoder.
    """
    model = make_method(method, **dict(params or {})) if isinstance(method, str) else method
    src, tgt = embed_pairs(encoder, pairs, batch_size=batch_size)
    options = {"checkpoint_dir": checkpoint_dir, "on_epoch_end": on_epoch_end,
               "validate": validate}
    kwargs = {k: v for k, v in options.items() if v is not None and model.fit_accepts(k)}
    model.fit(src, tgt, pairs.src_lang, pairs.tgt_lang, **kwargs)
    model.metadata_ = ModelMetadata(model.name, model.get_params(),
                                    encoder=encoder.identity).to_dict()
    return model


def evaluate(model: Disentangler, encoder: Encoder,
             tasks: Sequence[str | Task] = DEFAULT_TASKS, *, options: EvalOptions | None = None,
             data_dir: str | Path | None = None, batch_size: int = 64,
             tags: Literal["gold", "none"] = "gold") -> list[TaskScores]:
    """Each task on the meaning and language parts of ``model``; one ``TaskScores`` each.

    ``tasks``: registry names (built from ``options``, every item by default) or task
    instances. ``tags``: ``"gold"`` gives the model each sentence's language, ``"none"``
    gives it none, only each text's script (the model identifies the language from the
    embedding among the languages that write that script, as a user without tags has it
    on every surface: :func:`with_untagged`). A language the model never saw is always handled
    inductively (the model's fallback or calibration; nothing from the test set).
    """
    if tags not in ("gold", "none"):
        raise ConfigError(f"tags must be 'gold' or 'none'; got {tags!r}")
    views = with_untagged(model) if tags == "gold" else without_tags(model)
    options = options or EvalOptions()
    names = [t for t in tasks if isinstance(t, str)]
    built = iter(build_tasks(names, options, data_dir=None if data_dir is None else str(
        data_dir), supported=supported_languages(encoder)))
    results = []
    for task in tasks:
        task = next(built) if isinstance(task, str) else task
        t0 = time.perf_counter()
        scores = task.evaluate(lambda texts: encoder.encode(texts, batch_size=batch_size),
                               views)
        logger.info("%s: %s done in %.1fs", type(model).__name__, scores.task,
                    time.perf_counter() - t0)
        results.append(scores)
    return results


__all__ = ["embed_pairs", "evaluate", "fit_method", "load_pairs", "load_training_set",
           "open_encoder", "uses_language"]
