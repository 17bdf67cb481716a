"""SemEval-2017 STS task 1 (multilingual and cross-lingual semantic textual similarity).

Layout: ``sts17/<l1>-<l2>.tsv`` with columns ``sentence1 sentence2 score``; sentence1
is in l1, sentence2 in l2, ``score`` is the gold similarity in [0, 5]. Tracks:

* cross-lingual (7): en-ar, en-de, en-tr, es-en, fr-en, it-en, nl-en (the last three
  and en-de are the "extended" files built from en-en by translating one side);
* monolingual (3): ar-ar, en-en, es-es;
* ``en-es_wmt`` (track 4b, WMT news): loadable, never in the averages.

Reference: Cer et al. (2017), "SemEval-2017 Task 1"; Reimers & Gurevych (2020) for
the extended files (MTEB's STS17).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from ..exceptions import ConfigError, DataError
from .io import read_tsv
from .languages import normalize_language
from .paths import require_file, resolve_data_dir

logger = logging.getLogger(__name__)

FOLDER = "sts17"
STS17_CROSSLINGUAL = ("en-ar", "en-de", "en-tr", "es-en", "fr-en", "it-en", "nl-en")
STS17_MONOLINGUAL = ("ar-ar", "en-en", "es-es")
STS17_EXTRA = ("en-es_wmt",)
STS17_TRACKS = STS17_CROSSLINGUAL + STS17_MONOLINGUAL + STS17_EXTRA


@dataclass(frozen=True)
class STSSet:
    """One STS track: ``gold[i]`` (n,) float64 rates the pair (sentences1[i], sentences2[i])."""

    track: str  # e.g. "en-de" or "en-es_wmt"
    lang1: str  # canonical language of sentences1
    lang2: str
    sentences1: list[str]
    sentences2: list[str]
    gold: np.ndarray  # (n,) float64

    def __len__(self) -> int:
        return len(self.sentences1)


def track_languages(track: str) -> tuple[str, str]:
    """``"en-de"`` -> ``("en", "de")``; ``"en-es_wmt"`` -> ``("en", "es")``."""
    pair = track.split("_")[0]
    parts = pair.split("-")
    if len(parts) != 2:
        raise ConfigError(
            f"STS17 track {track!r} is not of the form <l1>-<l2>[_suffix]; "
            f"known tracks: {', '.join(STS17_TRACKS)}"
        )
    return normalize_language(parts[0]), normalize_language(parts[1])


def parse_floats(values: list[str], path: object, column: str, first_line: int = 2) -> np.ndarray:
    """Parse a column of numbers; a bad cell is an error naming the file and line."""
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except ValueError:
            raise DataError(
                f"{path}:{i + first_line}: column {column!r} holds {v!r}, expected a number; "
                "fix the row"
            ) from None
        if not np.isfinite(out[i]):
            raise DataError(f"{path}:{i + first_line}: column {column!r} is {v!r}, not finite")
    return out


def available_sts17_tracks(data_dir: str | os.PathLike | None = None) -> list[str]:
    """The known tracks whose file exists, in the order of :data:`STS17_TRACKS`."""
    folder = resolve_data_dir(data_dir) / FOLDER
    return [t for t in STS17_TRACKS if (folder / f"{t}.tsv").is_file()]


def load_sts17(track: str, data_dir: str | os.PathLike | None = None) -> STSSet:
    """Load one STS17 track, e.g. ``load_sts17("en-de")``.

    Raises:
        ConfigError: unknown track or missing file.
        DataError: ragged row, empty sentence or non-numeric score (file and line named).
    """
    if track not in STS17_TRACKS:
        raise ConfigError(f"Unknown STS17 track {track!r}; known tracks: {', '.join(STS17_TRACKS)}")
    lang1, lang2 = track_languages(track)
    path = require_file(resolve_data_dir(data_dir) / FOLDER / f"{track}.tsv", f"STS17 {track}",
                        "sts17")
    rows, _ = read_tsv(path, ["sentence1", "sentence2", "score"])
    gold = parse_floats([r["score"] for r in rows], path, "score")
    logger.debug("STS17 %s: %d pairs from %s", track, len(rows), path)
    return STSSet(
        track=track,
        lang1=lang1,
        lang2=lang2,
        sentences1=[r["sentence1"] for r in rows],
        sentences2=[r["sentence2"] for r in rows],
        gold=gold,
    )
