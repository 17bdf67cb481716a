"""STS17: Pearson and Spearman correlation of cos(sentence1, sentence2) with the gold score.

Per track (``en-de``, ``ar-ar``, ...) both correlations, raw in [-1, 1]; averages over
the 7 cross-lingual tracks (``avg:cross-lingual``; Spearman there is the main score)
and the 3 monolingual ones (``avg:monolingual``). ``en-es_wmt`` (track 4b) can be
evaluated but is in no average. A constant view (e.g. a per-language mean) gives
constant cosines and ``nan`` correlations. References: Cer et al. (2017); Reimers &
Gurevych (2020) for the extended en-de/fr-en/it-en/nl-en files; MTEB's STS17.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..data.io import read_tsv
from ..data.paths import missing_data, resolve_data_dir
from ..data.sts17 import (
    STS17_CROSSLINGUAL,
    STS17_MONOLINGUAL,
    STS17_TRACKS,
    available_sts17_tracks,
    load_sts17,
)
from ..exceptions import ConfigError
from .base import HubDataset, MetricName, PairedSubset, Task, TaskMetadata, TaskOptions
from .metrics import correlation, paired_cosine

TRACK_SETS = {
    "default": STS17_CROSSLINGUAL + STS17_MONOLINGUAL,
    "cross-lingual": STS17_CROSSLINGUAL,
    "monolingual": STS17_MONOLINGUAL,
    "all": STS17_TRACKS,
}


@dataclass(frozen=True)
class STS17Options(TaskOptions):
    """Which tracks (see :data:`TRACK_SETS`, or a list such as ``("en-de",)``)."""

    tracks: str | tuple[str, ...] = "default"

    def __post_init__(self) -> None:
        if not isinstance(self.tracks, str):
            object.__setattr__(self, "tracks", tuple(self.tracks))


class STS17Task(Task):
    """STS17 over a set of tracks.

    Args:
        tracks: ``"default"`` (7 cross-lingual + 3 monolingual), ``"cross-lingual"``,
            ``"monolingual"``, ``"all"`` (adds ``en-es_wmt``) or an explicit list.
        max_items, seed, data_dir: see :class:`~disembed.evaluation.base.Task`.
    """

    metadata = TaskMetadata(
        name="sts17",
        description="SemEval-2017 STS: correlation of cosine similarity with gold scores",
        reference="Cer et al. 2017 (SemEval-2017 Task 1); Reimers & Gurevych 2020 (extended "
        "files); data: official zips + MTEB STS17",
        data_folder="sts17",
        subset_kind="track",
        metrics=("pearson", "spearman"),
        main_metric="spearman",
        main_subset="avg:cross-lingual",
        eval_set="sts17",
        label="STS17 (SemEval-2017 task 1)",
        type="STS",
        dataset=HubDataset("mteb/sts17-crosslingual-sts",
                           "faeb762787bd10488a50c8b5be4a3b82e411949c"),  # MTEB's revision
        mteb_name="STS17",
        main_score="cosine_spearman",
        metric_names={
            "pearson": MetricName("cosine_pearson", "cos_sim_pearson",
                                  "Pearson correlation of cosine similarity with the gold"),
            "spearman": MetricName("cosine_spearman", "cos_sim_spearman",
                                   "Spearman correlation of cosine similarity with the gold"),
        },
    )
    Options = STS17Options

    @classmethod
    def texts(cls, data_dir: Path) -> list[str]:
        out: list[str] = []
        for path in sorted((data_dir / cls.metadata.data_folder).glob("*.tsv")):
            rows, _ = read_tsv(path, ["sentence1", "sentence2"], skip_bad=True)
            out += [r[c] for r in rows for c in ("sentence1", "sentence2")]
        return out

    def __init__(self, tracks: str | Sequence[str] = "default", *,
                 max_items: int | None = None, seed: int = 0,
                 data_dir: str | None = None) -> None:
        super().__init__(max_items=max_items, seed=seed, data_dir=data_dir)
        if isinstance(tracks, str):
            if tracks not in TRACK_SETS:
                raise ConfigError(f"STS17 tracks={tracks!r} is not a known set; use one of "
                                  f"{', '.join(TRACK_SETS)} or a list of tracks such as ['en-de']")
            self.tracks = list(TRACK_SETS[tracks])
        else:
            unknown = [t for t in tracks if t not in STS17_TRACKS]
            if unknown:
                raise ConfigError(f"Unknown STS17 track(s) {unknown}; known: "
                                  f"{', '.join(STS17_TRACKS)}")
            self.tracks = list(tracks)

    def options(self) -> dict:
        return {"tracks": self.tracks}

    def load_subsets(self) -> list[PairedSubset]:
        available = available_sts17_tracks(self.data_dir)
        missing = [t for t in self.tracks if t not in available]
        if missing:
            raise missing_data(f"STS17 track file(s) for {missing} (present: "
                               f"{available or 'none'})",
                               resolve_data_dir(self.data_dir) / "sts17", "sts17")
        out = []
        for track in self.tracks:
            d = load_sts17(track, self.data_dir)
            out.append(PairedSubset(track, d.lang1, d.lang2, d.sentences1, d.sentences2, d.gold))
        return out

    def score_subset(self, subset: PairedSubset, a: np.ndarray, b: np.ndarray
                     ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        cos = paired_cosine(a, b)  # (n,)
        r = correlation(cos, subset.gold)
        return {"pearson": r.pearson, "spearman": r.spearman}, {"cosine": cos, "gold": subset.gold}

    def average_groups(self, subsets: list[str]) -> dict[str, list[str]]:
        return {
            "cross-lingual": [t for t in STS17_CROSSLINGUAL if t in subsets],
            "monolingual": [t for t in STS17_MONOLINGUAL if t in subsets],
        }
