"""WMT20 QE task 1 as reference-free similarity: Pearson of cos(source, MT) with ``z_mean``.

Per language pair Pearson (the WMT20 official metric) and Spearman, raw in [-1, 1];
``avg:wmt20-6`` averages Pearson over en-de, en-zh, ro-en, et-en, ne-en, si-en (the main
score; ru-en is reported but not averaged, as in the papers); ``avg:all`` covers every
evaluated pair. ``split="test21"`` scores WMT21's test set (adds en-cs, en-ja, ps-en,
km-en). References: Specia et al. (2020); Fomicheva et al. (2020), MLQE-PE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..data.io import read_tsv
from ..data.paths import missing_data, resolve_data_dir
from ..data.wmt20_qe import (
    QE_SPLITS,
    WMT20_QE_PAIRS,
    available_qe_pairs,
    load_wmt20_qe,
    qe_data_set,
)
from ..exceptions import ConfigError
from .base import HubDataset, MetricName, PairedSubset, Task, TaskMetadata, TaskOptions
from .metrics import correlation, paired_cosine

#: the splits kept out of training: both test sets and ``dev`` (tune's validation data)
QE_SPLITS_HELD = ("test", "test21", "dev")


@dataclass(frozen=True)
class QEOptions(TaskOptions):
    """Which split and pairs (``pairs=None``: every pair in the split)."""

    split: str = field(default="test", metadata={
        "flag": "--qe-split", "choices": ("test", "test21"),
        "help": "the WMT QE test set: test (WMT20) or test21 (WMT21)"})
    pairs: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.pairs is not None and not isinstance(self.pairs, str):
            object.__setattr__(self, "pairs", tuple(self.pairs))


class WMT20QETask(Task):
    """Sentence-level QE by cosine between source and machine translation.

    Args:
        split: ``"test"`` (WMT20, default), ``"test21"``, ``"dev"`` or ``"train"``.
        pairs: ``None`` = every pair in the split, or an explicit list such as ``["en-de"]``.
        max_items, seed, data_dir: see :class:`~disembed.evaluation.base.Task`.
    """

    metadata = TaskMetadata(
        name="wmt20-qe",
        description="WMT20 QE task 1: Pearson of cos(source, MT) with the DA z_mean",
        reference="Specia et al. 2020 (WMT20 QE findings); Fomicheva et al. 2020 (MLQE-PE); "
        "data: sheffieldnlp/mlqe-pe, facebookresearch/mlqe",
        data_folder="wmt20_mlqe",
        subset_kind="pair",
        metrics=("pearson", "spearman"),
        main_metric="pearson",
        main_subset="avg:wmt20-6",
        eval_set="wmt20-qe",
        label="WMT20 QE task 1 (direct assessment)",
        type="STS",
        # the Hub's copy of the data disembed reads from sheffieldnlp/mlqe-pe (not pinned)
        dataset=HubDataset("wmt/wmt20_mlqe_task1"),
        main_score="cosine_pearson",
        metric_names={
            "pearson": MetricName("cosine_pearson", "cos_sim_pearson",
                                  "Pearson correlation of cos(source, MT) with z_mean"),
            "spearman": MetricName("cosine_spearman", "cos_sim_spearman",
                                   "Spearman correlation of cos(source, MT) with z_mean"),
        },
        validation_split="dev",
    )
    Options = QEOptions

    @classmethod
    def texts(cls, data_dir: Path) -> list[str]:
        """Every split's sentences, ``dev`` included (the validation data of ``tune``)."""
        out: list[str] = []
        for split in QE_SPLITS_HELD:
            folder = data_dir / cls.metadata.data_folder / split
            for path in sorted(folder.glob("*.tsv")):
                rows, _ = read_tsv(path, ["original", "translation"], skip_bad=True)
                out += [r[c] for r in rows for c in ("original", "translation")]
        return out

    @classmethod
    def validation(cls, data_dir: str | None = None) -> "WMT20QETask":
        """The task on its validation split (``dev``), every item: what ``tune`` scores."""
        return cls(cls.metadata.validation_split or "dev", data_dir=data_dir)

    def __init__(self, split: str = "test", pairs: Sequence[str] | None = None, *,
                 max_items: int | None = None, seed: int = 0,
                 data_dir: str | None = None) -> None:
        super().__init__(max_items=max_items, seed=seed, data_dir=data_dir)
        if split not in QE_SPLITS:
            raise ConfigError(
                f"WMT QE split={split!r} is unknown; use one of {', '.join(QE_SPLITS)}"
            )
        if isinstance(pairs, str):
            raise ConfigError(f"pairs must be a list of language pairs, got the string {pairs!r}; "
                              f"write pairs=[{pairs!r}]")
        self.split = split
        self.pairs = None if pairs is None else list(pairs)

    def options(self) -> dict:
        return {"split": self.split, "pairs": self.pairs}

    def load_subsets(self) -> list[PairedSubset]:
        available = available_qe_pairs(self.split, self.data_dir)
        pairs = available if self.pairs is None else self.pairs
        missing = [p for p in pairs if p not in available]
        if missing or not pairs:
            raise missing_data(f"WMT QE {self.split} file(s) for {missing or 'any pair'} "
                               f"(present: {available or 'none'})",
                               resolve_data_dir(self.data_dir) / "wmt20_mlqe" / self.split,
                               qe_data_set(self.split))
        out = []
        for pair in pairs:
            d = load_wmt20_qe(pair, self.split, self.data_dir)
            out.append(PairedSubset(pair, d.src_lang, d.tgt_lang, d.sources, d.translations,
                                    d.z_mean))
        return out

    def score_subset(self, subset: PairedSubset, a: np.ndarray, b: np.ndarray
                     ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        cos = paired_cosine(a, b)  # (n,)
        r = correlation(cos, subset.gold)
        return {"pearson": r.pearson, "spearman": r.spearman}, {"cosine": cos, "gold": subset.gold}

    def average_groups(self, subsets: list[str]) -> dict[str, list[str]]:
        return {"wmt20-6": [p for p in WMT20_QE_PAIRS if p in subsets], "all": list(subsets)}
