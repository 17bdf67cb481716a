"""The public workflow: embed parallel data, fit a method, evaluate it.

>>> from disembed import load_encoder, build_training_set, fit_method, evaluate
>>> enc = cached(load_encoder("e5-small"))                          # doctest: +SKIP
>>> train = build_training_set(["de", "zh"], 2000)                 # doctest: +SKIP
>>> model = fit_method("seed", enc, train.pairs)                   # doctest: +SKIP
>>> scores = evaluate(model, enc, ["sts17", "wmt20-qe"])            # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .data.parallel import ParallelPairs
from .encoders import Encoder
from .encoders.cached import CachedEncoder, cached  # noqa: F401 (re-exported)
from .methods import Disentangler, make_method

logger = logging.getLogger(__name__)


def embed_pairs(encoder: Encoder, pairs: ParallelPairs, *, batch_size: int = 64
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(src (n, d), tgt (n, d))`` float32 embeddings of both sides of ``pairs``."""
    both = encoder.encode(pairs.src + pairs.tgt, batch_size=batch_size)
    return both[: len(pairs)], both[len(pairs) :]


def fit_method(method: str | Disentangler, encoder: Encoder, pairs: ParallelPairs, *,
               params: Mapping[str, Any] | None = None, batch_size: int = 64,
               checkpoint_dir: str | Path | None = None) -> Disentangler:
    """Embed ``pairs`` with ``encoder`` and fit ``method`` (a name or an unfitted instance)."""
    model = make_method(method, **dict(params or {})) if isinstance(method, str) else method
    src, tgt = embed_pairs(encoder, pairs, batch_size=batch_size)
    kwargs = {"checkpoint_dir": checkpoint_dir} if checkpoint_dir and _accepts_checkpoint(
        model) else {}
    t0 = time.perf_counter()
    model.fit(src, tgt, pairs.src_lang, pairs.tgt_lang, **kwargs)
    model.fit_seconds_ = time.perf_counter() - t0
    return model


def _accepts_checkpoint(model: Disentangler) -> bool:
    import inspect

    return "checkpoint_dir" in inspect.signature(model.fit).parameters


def evaluate(model: Disentangler, encoder: Encoder, tasks: Sequence[Any] = ("tatoeba", "sts17",
             "wmt20-qe"), *, task_options: Mapping[str, Mapping[str, Any]] | None = None,
             data_dir: str | Path | None = None, batch_size: int = 64) -> list:
    """Run each task on the meaning and language views of ``model``; returns ``TaskScores``.

    ``tasks`` holds registry names or task instances; ``task_options`` maps a task
    name to keyword options for it (e.g. ``{"tatoeba": {"languages": "tatoeba-36"}}``).
    """
    from .evaluation import TASKS

    def embed(texts: list[str]) -> np.ndarray:
        return encoder.encode(texts, batch_size=batch_size)

    results = []
    for task in tasks:
        if isinstance(task, str):
            options = dict((task_options or {}).get(task, {}))
            options.setdefault("data_dir", data_dir)
            if task == "tatoeba" and "supported" not in options:
                options["supported"] = getattr(_inner(encoder), "languages", None)
            task = TASKS.get(task)(**options)
        t0 = time.perf_counter()
        scores = task.evaluate(embed, model.views)
        logger.info("%s: %s done in %.1fs", type(model).__name__, scores.task,
                    time.perf_counter() - t0)
        results.append(scores)
    return results


def _inner(encoder: Encoder) -> Encoder:
    return encoder.encoder if isinstance(encoder, CachedEncoder) else encoder
