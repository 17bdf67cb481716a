"""Tatoeba bitext retrieval (LASER / XTREME v1): find each sentence's translation by cosine.

For language xx with n pairs, ``acc_xx2en`` is the share of xx sentences whose nearest
English sentence (cosine, among the n) is their translation, ``acc_en2xx`` the reverse,
``acc_mean`` their mean. Chance is 1/n. ``f1`` is MTEB's main score for its Tatoeba
(xx->en predictions, :func:`~disembed.evaluation.metrics.bitext_mining_f1`). A meaning
view should score high, a language view near chance. Averages: ``avg:tatoeba-14`` (XNLI
languages; the main score, on ``acc_mean``), ``avg:tatoeba-36`` (XTREME), each over the
languages evaluated, and ``avg:all`` over the evaluated languages the encoder supports.
The ``n`` of an average row says how many languages it covers. References: Artetxe &
Schwenk (2019); Hu et al. (2020), XTREME.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Sequence

import numpy as np

from ..data.io import read_lines
from ..data.languages import TATOEBA_14, TATOEBA_36, language_script, normalize_language, to_iso3
from ..data.tatoeba import available_tatoeba_languages, load_tatoeba
from ..exceptions import ConfigError
from .base import (
    HubDataset,
    HubSubset,
    MetricName,
    PairedSubset,
    ScoreRow,
    Task,
    TaskMetadata,
    TaskOptions,
)
from .metrics import bitext_mining_f1, retrieval_accuracy

logger = logging.getLogger(__name__)

LANGUAGE_SETS = {"tatoeba-14": TATOEBA_14, "tatoeba-36": TATOEBA_36}


def _one_language(code: str) -> str:
    """A single language code given where a set name was expected (``"de"``)."""
    try:
        return normalize_language(code)
    except ConfigError:
        raise ConfigError(
            f"Tatoeba languages={code!r} is neither a known set nor a language code; use "
            "'tatoeba-14', 'tatoeba-36', 'all' or language codes such as 'de,zh'") from None


@dataclass(frozen=True)
class TatoebaOptions(TaskOptions):
    """Which languages: ``"tatoeba-14"``, ``"tatoeba-36"``, ``"all"`` or codes (``"de,zh"``)."""

    languages: str | tuple[str, ...] = field(default="tatoeba-14", metadata={
        "flag": "--tatoeba-languages",
        "help": "Tatoeba's languages: tatoeba-14, tatoeba-36, all, or a comma-separated list"})

    def __post_init__(self) -> None:
        langs = self.languages
        if isinstance(langs, str) and "," in langs:  # "de,zh" from a command line
            langs = tuple(x.strip() for x in langs.split(",") if x.strip())
        object.__setattr__(self, "languages", langs if isinstance(langs, str) else tuple(langs))


class TatoebaTask(Task):
    """Tatoeba retrieval over a set of languages.

    Args:
        languages: ``"tatoeba-14"`` (default), ``"tatoeba-36"``, ``"all"`` (every language
            in the data) or an explicit list of codes.
        supported: languages the encoder was trained on, for ``avg:all``
            (``None`` = every evaluated language).
        max_items, seed, data_dir: see :class:`~disembed.evaluation.base.Task`.
    """

    metadata = TaskMetadata(
        name="tatoeba",
        label="Tatoeba (LASER v1)",
        description="Tatoeba xx<->en bitext retrieval accuracy by cosine nearest neighbour",
        reference="Artetxe & Schwenk 2019 (LASER); Hu et al. 2020 (XTREME); "
        "data: facebookresearch/LASER data/tatoeba/v1",
        data_folder="tatoeba",
        subset_kind="language",
        metrics=("acc_xx2en", "acc_en2xx", "acc_mean", "f1"),
        main_metric="acc_mean",
        main_subset="avg:tatoeba-14",
        eval_set="tatoeba",
        type="BitextMining",
        hub_task="sentence-similarity",
        dataset=HubDataset("mteb/tatoeba-bitext-mining",
                           "69e8f12da6e31d59addadda9a9c8a2e601a0e282"),  # MTEB's revision
        mteb_name="Tatoeba",
        main_score="f1",
        metric_names={
            "acc_xx2en": MetricName("acc_xx2en", "accuracy", "xx->en retrieval accuracy"),
            "acc_en2xx": MetricName("acc_en2xx", "accuracy", "en->xx retrieval accuracy"),
            "acc_mean": MetricName("acc_mean", "accuracy", "retrieval accuracy, mean of "
                                   "xx->en and en->xx"),
            "f1": MetricName("f1", "f1", "F1 of xx->en nearest neighbours (MTEB's)"),
        },
    )
    Options = TatoebaOptions

    @classmethod
    def texts(cls, data_dir: Path) -> list[str]:
        return [line for path in sorted((data_dir / cls.metadata.data_folder).glob(
            "tatoeba.*-eng.*")) for line in read_lines(path)]

    @classmethod
    def from_options(cls, options, *, data_dir=None, supported=None) -> "TatoebaTask":
        return cls(cls.options_of(options).languages, supported=supported,
                   max_items=options.max_items, seed=options.seed, data_dir=data_dir)

    @classmethod
    def hub_subset(cls, subset: str) -> HubSubset:
        """``de`` -> ``deu-eng`` with ``["deu-Latn", "eng-Latn"]``, as MTEB's Tatoeba."""
        return HubSubset(f"{to_iso3(subset)}-eng", (language_script(subset), "eng-Latn"))

    def __init__(self, languages: str | Sequence[str] = "tatoeba-14", *,
                 supported: Collection[str] | None = None, max_items: int | None = None,
                 seed: int = 0, data_dir: str | None = None) -> None:
        super().__init__(max_items=max_items, seed=seed, data_dir=data_dir)
        if isinstance(languages, str) and languages not in (*LANGUAGE_SETS, "all"):
            languages = [_one_language(languages)]
        self.languages = languages if isinstance(languages, str) else [
            normalize_language(x) for x in languages]
        self.supported = None if supported is None else sorted(
            {normalize_language(x) for x in supported})

    def options(self) -> dict:
        return {"languages": self.languages, "supported": self.supported}

    def selected_languages(self) -> list[str]:
        """The languages to evaluate, those missing from the data dropped with a warning."""
        available = available_tatoeba_languages(self.data_dir)
        if self.languages == "all":
            return available
        preset = isinstance(self.languages, str)
        wanted = list(LANGUAGE_SETS[self.languages] if preset else self.languages)
        missing = [x for x in wanted if x not in available]
        if missing and not preset:
            raise ConfigError(
                f"Tatoeba has no test set for {missing}; available: {', '.join(available)}"
            )
        if missing:
            logger.warning("Tatoeba: %s not in the data; %s averages over the other %d",
                           missing, self.languages, len(wanted) - len(missing))
        return [x for x in wanted if x in available]

    def load_subsets(self) -> list[PairedSubset]:
        out = []
        for lang in self.selected_languages():
            data = load_tatoeba(lang, self.data_dir)
            out.append(PairedSubset(lang, lang, "en", data.source, data.english))
        return out

    def score_subset(self, subset: PairedSubset, a: np.ndarray, b: np.ndarray
                     ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        r = retrieval_accuracy(a, b)
        values = {"acc_xx2en": r.acc_a2b, "acc_en2xx": r.acc_b2a, "acc_mean": r.acc_mean,
                  "f1": bitext_mining_f1(a, b)}
        return values, {"acc_xx2en": r.correct_a2b, "acc_en2xx": r.correct_b2a}

    def average_groups(self, subsets: list[str]) -> dict[str, list[str]]:
        supported = set(subsets if self.supported is None else self.supported)
        return {
            "tatoeba-14": [x for x in TATOEBA_14 if x in subsets],
            "tatoeba-36": [x for x in TATOEBA_36 if x in subsets],
            "all": [x for x in subsets if x in supported],
        }

    def main_subset(self, averages: list[ScoreRow]) -> str:
        """``avg:tatoeba-14``, or ``avg:all`` when no Tatoeba-14 language was evaluated."""
        if any(r.subset == self.metadata.main_subset for r in averages) or not averages:
            return self.metadata.main_subset
        return "avg:all"
