"""Validation data a fit may choose with: WMT20 QE **dev** (never a test split).

A recipe that chooses between fits (``mirror=True``, :mod:`disembed.methods.orientation`)
gets ``validate(model) -> float`` from here: the mean Pearson over the six WMT20 QE dev
pairs of the model's meaning part, gold tags. It reads ``wmt20_mlqe/dev`` and nothing
else of the evaluation data (``tests/experiment/test_validation.py`` holds it to that).

This benchmark validation is optional (issue 46): training needs nothing but the user's
pairs. Where the dev data is absent (or the caller turns it off with ``mirror=False``) the
recipe fits one arm, the second fit and the dev encoding are skipped, and
:func:`dev_validation` says so in its ``note``, which ``train`` prints and the run records.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..encoders import Encoder
from ..exceptions import ConfigError, DisembedError
from ..methods import Disentangler
from .tasks import validation_tasks

logger = logging.getLogger(__name__)

def qe_dev_score(model: Disentangler, encoder: Encoder, data_dir: str | Path | None,
                 batch_size: int = 64) -> float:
    """The main score (meaning part) of every task that declares a validation split, on that
    split, every item, averaged: WMT20 QE dev's mean Pearson over its six pairs."""
    tasks = validation_tasks(None if data_dir is None else str(data_dir))
    if not tasks:
        raise ConfigError("scoring on validation data needs a task with a validation split, "
                          "and no registered task declares one "
                          "(TaskMetadata.validation_split)")
    encode = lambda texts: encoder.encode(texts, batch_size=batch_size)  # noqa: E731
    return float(np.mean([t.evaluate(encode, model.views).main_score("meaning")
                          for t in tasks]))


def qe_dev_validator(encoder: Encoder, data_dir: str | Path | None = None,
                     batch_size: int = 64) -> Callable[[Disentangler], float]:
    """``validate(model)``: :func:`qe_dev_score` of ``model`` (higher is better)."""
    def validate(model: Disentangler) -> float:
        score = qe_dev_score(model, encoder, data_dir, batch_size)
        logger.info("%s: WMT20 QE dev %.4f", model.name, score)
        return score

    return validate


def dev_data_missing(data_dir: str | Path | None = None) -> str | None:
    """Why the validation split of some task cannot be read (its data is absent), or
    ``None`` when every declared validation split loads."""
    try:
        tasks = validation_tasks(None if data_dir is None else str(data_dir))
        for task in tasks:
            task.load_subsets()
    except DisembedError as exc:
        return str(exc).split(". ")[0]
    return None if tasks else "no registered task declares a validation split"


@dataclass(frozen=True)
class DevValidation:
    """What a fit validates on: ``options`` for ``model.fit`` (``validate=`` or nothing) and
    a one-line ``note`` naming it, for the output and the run's record."""

    options: dict[str, Callable[[Disentangler], float]]
    note: str


def dev_validation(model: Disentangler, encoder: Encoder, data_dir: str | Path | None = None,
                   batch_size: int = 64) -> DevValidation:
    """:func:`qe_dev_validator` for a recipe that chooses between fits (``mirror=True``)
    when WMT20 QE dev is present; when it is absent, the recipe's ``mirror`` is turned off
    (one fit, no benchmark read) and the note says why. Other recipes take no validation."""
    if not getattr(model, "mirror", False):
        return DevValidation({}, "benchmark validation: none (the recipe has nothing to "
                                 "choose on it: mirror=False)")
    missing = dev_data_missing(data_dir)
    if missing is not None:
        model.mirror = False  # type: ignore[attr-defined]
        note = (f"benchmark validation: off ({missing}); one fit, mirror=False (the "
                "orientation of the meaning bias is the training seed's)")
        logger.info("%s: %s", model.name, note)
        return DevValidation({}, note)
    return DevValidation({"validate": qe_dev_validator(encoder, data_dir, batch_size)},
                         "benchmark validation: WMT20 QE dev chooses between the two fits of "
                         "mirror=True (pass --no-dev-validation to skip it)")


def validation_options(model: Disentangler, encoder: Encoder,
                       data_dir: str | Path | None = None, batch_size: int = 64
                       ) -> dict[str, Callable[[Disentangler], float]]:
    """The keywords ``model.fit`` needs (:func:`dev_validation`'s ``options``)."""
    return dev_validation(model, encoder, data_dir, batch_size).options


__all__ = ["DevValidation", "dev_data_missing", "dev_validation", "qe_dev_score",
           "qe_dev_validator", "validation_options"]
