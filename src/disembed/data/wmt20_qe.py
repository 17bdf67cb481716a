"""WMT20 quality estimation, task 1 (sentence-level direct assessment), and WMT21's test.

Layout: ``wmt20_mlqe/<split>/<src>-<tgt>.tsv``; columns ``original`` (source sentence),
``translation`` (machine translation) and ``z_mean`` (mean z-normalised DA score, the
target). ``test`` is the WMT20 test set the papers report; ``test21`` is WMT21's (only
``index original translation z_mean``; adds zero-shot en-cs, en-ja, ps-en, km-en);
``dev`` and ``train`` have the WMT20 columns.

Reference: Specia et al. (2020), "Findings of the WMT 2020 Shared Task on Quality
Estimation"; Fomicheva et al. (2020), "MLQE-PE".
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from ..exceptions import ConfigError
from .io import read_tsv
from .languages import normalize_language
from .paths import require_file, resolve_data_dir
from .sts17 import parse_floats

logger = logging.getLogger(__name__)

FOLDER = "wmt20_mlqe"
QE_SPLITS = ("test", "test21", "dev", "train")
#: The six pairs the papers average (WMT20 task 1 without ru-en).
WMT20_QE_PAIRS = ("en-de", "en-zh", "ro-en", "et-en", "ne-en", "si-en")
WMT20_QE_EXTRA = ("ru-en",)
WMT21_QE_ZERO_SHOT = ("en-cs", "en-ja", "ps-en", "km-en")


@dataclass(frozen=True)
class QESet:
    """One QE pair: ``z_mean[i]`` (n,) float64 rates ``translations[i]`` of ``sources[i]``."""

    pair: str  # e.g. "en-de"
    split: str
    src_lang: str  # canonical
    tgt_lang: str
    sources: list[str]
    translations: list[str]
    z_mean: np.ndarray  # (n,) float64

    def __len__(self) -> int:
        return len(self.sources)


def _check_split(split: str) -> None:
    if split not in QE_SPLITS:
        raise ConfigError(f"Unknown WMT QE split {split!r}; expected one of {', '.join(QE_SPLITS)}")


def pair_languages(pair: str) -> tuple[str, str]:
    """``"en-de"`` -> ``("en", "de")`` (canonical codes)."""
    parts = pair.split("-")
    if len(parts) != 2:
        raise ConfigError(f"QE language pair {pair!r} is not of the form <src>-<tgt>, e.g. 'en-de'")
    return normalize_language(parts[0]), normalize_language(parts[1])


def qe_data_set(split: str) -> str:
    """The ``disembed data download`` set that installs ``split``."""
    return {"test": "wmt20-qe", "test21": "wmt21-qe"}.get(split, "wmt20-qe-traindev")


def available_qe_pairs(split: str = "test", data_dir: str | os.PathLike | None = None) -> list[str]:
    """Language pairs with a file in ``split``, sorted."""
    _check_split(split)
    folder = resolve_data_dir(data_dir) / FOLDER / split
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*-*.tsv"))


def load_wmt20_qe(
    pair: str, split: str = "test", data_dir: str | os.PathLike | None = None
) -> QESet:
    """Load one QE language pair, e.g. ``load_wmt20_qe("en-de")``.

    Raises:
        ConfigError: unknown split, malformed pair or missing file.
        DataError: ragged row, empty sentence or non-numeric ``z_mean`` (file and line named).
    """
    _check_split(split)
    src_lang, tgt_lang = pair_languages(pair)
    path = require_file(
        resolve_data_dir(data_dir) / FOLDER / split / f"{pair}.tsv", f"WMT QE {split} {pair}",
        qe_data_set(split)
    )
    rows, _ = read_tsv(path, ["original", "translation", "z_mean"])
    z_mean = parse_floats([r["z_mean"] for r in rows], path, "z_mean")
    logger.debug("WMT QE %s %s: %d pairs from %s", split, pair, len(rows), path)
    return QESet(
        pair=pair,
        split=split,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        sources=[r["original"] for r in rows],
        translations=[r["translation"] for r in rows],
        z_mean=z_mean,
    )
