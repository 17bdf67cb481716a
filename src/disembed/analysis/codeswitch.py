"""Code-switching robustness: retrieval when part of a sentence is already in English.

Each non-English Tatoeba sentence gets some of its words replaced by an English
translation from the MUSE bilingual dictionaries (``muse_dictionaries/en-<xx>.tsv``,
columns ``en xx``): a seeded ``rate`` of the sentence's dictionary words, at least one.
Sentences with no dictionary word cannot be switched; they are counted and dropped from
both the original and the switched evaluation, so the two are paired on the same items.
Then xx<->en retrieval is scored as in Tatoeba, on the original and the switched
sentences (as in the ORACLE paper's code-switching test). A meaning part that depends
on the language of the words, not on what they say, loses accuracy when switched.

Words are ``\\w+`` runs matched lower-cased; Chinese (written without spaces) is
segmented by greedy longest match against the dictionary.
"""

from __future__ import annotations

import csv
import logging
import re
import zlib
from dataclasses import dataclass, field, replace

import numpy as np

from ..data.paths import resolve_data_dir
from ..data.tatoeba import load_tatoeba
from ..evaluation.base import PairedSubset
from ..evaluation.tatoeba import TatoebaTask
from ..exceptions import ConfigError

logger = logging.getLogger(__name__)

FOLDER = "muse_dictionaries"
UNSPACED = ("zh", "ja", "th")
_WORD = re.compile(r"\w+", re.UNICODE)


def muse_languages(data_dir=None) -> list[str]:
    """Languages with a MUSE dictionary under the data directory."""
    folder = resolve_data_dir(data_dir) / FOLDER
    return sorted(p.stem.split("-", 1)[1] for p in folder.glob("en-*.tsv"))


def load_dictionary(lang: str, data_dir=None) -> dict[str, list[str]]:
    """``xx word (lower-cased) -> English translations`` from ``en-<lang>.tsv``."""
    path = resolve_data_dir(data_dir) / FOLDER / f"en-{lang}.tsv"
    if not path.is_file():
        raise ConfigError(f"no MUSE dictionary for {lang!r}: expected {path}; available: "
                          f"{muse_languages(data_dir)}")
    out: dict[str, list[str]] = {}
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader, None)  # header "en xx"
        for row in reader:
            if len(row) == 2 and row[0] and row[1] and row[0].lower() != row[1].lower():
                out.setdefault(row[1].lower(), []).append(row[0])
    return out


def _spans(text: str, dictionary: dict[str, list[str]], unspaced: bool, max_len: int
           ) -> list[tuple[int, int]]:
    """(start, end) character spans of dictionary words in ``text``."""
    if not unspaced:
        return [m.span() for m in _WORD.finditer(text) if m.group().lower() in dictionary]
    spans, i = [], 0
    while i < len(text):
        for j in range(min(len(text), i + max_len), i, -1):  # longest match first
            if text[i:j] in dictionary and _WORD.fullmatch(text[i:j]):
                spans.append((i, j))
                i = j
                break
        else:
            i += 1
    return spans


@dataclass
class CodeSwitched:
    """Switched sentences; ``kept[i]`` indexes the input sentence ``texts[i]`` came from."""

    texts: list[str]
    kept: list[int]
    substitutions: list[int]  # per kept sentence
    skipped: list[int] = field(default_factory=list)  # inputs with no dictionary word


def code_switch(sentences: list[str], dictionary: dict[str, list[str]], *, rate: float = 0.3,
                seed: int = 0, unspaced: bool = False) -> CodeSwitched:
    """Replace ``max(1, round(rate * k))`` of each sentence's ``k`` dictionary words by a
    (seeded) English translation; sentences without one go to ``skipped``."""
    if not 0 < rate <= 1:
        raise ConfigError(f"code-switching rate must be in (0, 1]; got {rate}")
    rng = np.random.default_rng(seed)
    max_len = max((len(w) for w in dictionary), default=1) if unspaced else 0
    out = CodeSwitched([], [], [], [])
    for i, text in enumerate(sentences):
        spans = _spans(text, dictionary, unspaced, min(max_len, 8))
        if not spans:
            out.skipped.append(i)
            continue
        k = max(1, int(round(rate * len(spans))))
        chosen = sorted(rng.choice(len(spans), size=k, replace=False).tolist(), reverse=True)
        for j in chosen:  # right to left keeps earlier offsets valid
            start, end = spans[j]
            options = dictionary[text[start:end].lower()]
            word = options[int(rng.integers(len(options)))]
            text = text[:start] + word + text[end:]
        out.texts.append(text)
        out.kept.append(i)
        out.substitutions.append(k)
    return out


class CodeSwitchTask(TatoebaTask):
    """Tatoeba retrieval on original and code-switched sentences of the MUSE languages.

    Subsets ``<xx>`` (original, switchable items only) and ``<xx>+cs`` (switched);
    averages ``avg:original`` and ``avg:code-switched`` (the main score). ``stats_``
    holds per-language counts after :meth:`load_subsets`.
    """

    metadata = replace(TatoebaTask.metadata, name="tatoeba-codeswitch",
                       description="Tatoeba xx<->en retrieval with xx words switched to English",
                       data_folder="tatoeba", main_subset="avg:code-switched")

    def __init__(self, languages=None, *, rate: float = 0.3, supported=None,
                 max_items: int | None = None, seed: int = 0, data_dir=None) -> None:
        langs = list(languages) if languages is not None else muse_languages(data_dir)
        super().__init__(langs, supported=supported, max_items=max_items, seed=seed,
                         data_dir=data_dir)
        if self.supported is not None:
            self.languages = [x for x in self.languages if x in self.supported]
        self.rate = rate
        self.stats_: dict[str, dict] = {}

    def options(self) -> dict:
        return {**super().options(), "rate": self.rate}

    def subsample(self, subset: PairedSubset) -> PairedSubset:
        return subset  # load_subsets subsamples before switching, so both subsets match

    def load_subsets(self) -> list[PairedSubset]:
        originals, switched = [], []
        for subset in super().load_subsets():
            subset = super().subsample(subset)
            lang = subset.lang_a
            cs = code_switch(subset.texts_a, load_dictionary(lang, self.data_dir),
                             rate=self.rate, seed=self.seed + zlib.crc32(lang.encode()),
                             unspaced=lang in UNSPACED)
            self.stats_[lang] = {"items": len(subset), "switched": len(cs.kept),
                                 "skipped_no_dictionary_word": len(cs.skipped),
                                 "mean_substitutions": float(np.mean(cs.substitutions or [0]))}
            if len(cs.kept) < 2:
                logger.warning("code-switch %s: only %d switchable sentences; left out", lang,
                               len(cs.kept))
                continue
            if cs.skipped:
                logger.info("code-switch %s: %d of %d sentences have no dictionary word; "
                            "skipped", lang, len(cs.skipped), len(subset))
            kept = subset.take(np.asarray(cs.kept))
            originals.append(kept)
            switched.append(PairedSubset(lang + "+cs", lang, "en", cs.texts, kept.texts_b))
        if not originals:
            raise ConfigError(f"code-switch: no language of {self.languages} has Tatoeba data, "
                              "a MUSE dictionary and switchable sentences")
        return originals + switched

    def average_groups(self, subsets: list[str]) -> dict[str, list[str]]:
        return {"original": [s for s in subsets if not s.endswith("+cs")],
                "code-switched": [s for s in subsets if s.endswith("+cs")]}

    def main_subset(self, averages) -> str:
        return "avg:code-switched"


def example_switches(lang: str, n: int = 3, *, rate: float = 0.3, seed: int = 0,
                     data_dir=None) -> list[tuple[str, str]]:
    """A few (original, switched) Tatoeba sentences, for the report."""
    source = load_tatoeba(lang, data_dir).source[: 50]
    cs = code_switch(source, load_dictionary(lang, data_dir), rate=rate, seed=seed,
                     unspaced=lang in UNSPACED)
    return [(source[i], t) for i, t in zip(cs.kept, cs.texts, strict=True)][:n]


__all__ = ["CodeSwitchTask", "CodeSwitched", "code_switch", "example_switches",
           "load_dictionary", "muse_languages"]
