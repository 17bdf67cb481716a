"""Validation data a fit may choose with: WMT20 QE **dev** (never a test split).

A recipe that chooses between fits (``mirror=True``, :mod:`disembed.methods.orientation`)
gets ``validate(model) -> float`` from here: the mean Pearson over the six WMT20 QE dev
pairs of the model's meaning part, gold tags. It reads ``wmt20_mlqe/dev`` and nothing
else of the evaluation data (``tests/experiment/test_validation.py`` holds it to that).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

import numpy as np

from ..encoders import Encoder
from ..exceptions import ConfigError
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


def validation_options(model: Disentangler, encoder: Encoder,
                       data_dir: str | Path | None = None, batch_size: int = 64
                       ) -> dict[str, Callable[[Disentangler], float]]:
    """The keywords ``model.fit`` needs: ``validate=``:func:`qe_dev_validator` where the
    recipe chooses between fits (``mirror=True``), else none (most recipes take none)."""
    if not getattr(model, "mirror", False):
        return {}
    return {"validate": qe_dev_validator(encoder, data_dir, batch_size)}


__all__ = ["qe_dev_score", "qe_dev_validator", "validation_options"]
