"""Fixed, seeded samples of Tatoeba test sentences the analyses look at.

Tatoeba is removed from every training set the library builds (see
:func:`~disembed.data.training_set.build_training_set`), so these are held-out data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.tatoeba import available_tatoeba_languages, load_tatoeba
from ..exceptions import ConfigError


@dataclass(frozen=True)
class PairSample:
    """``src[i]`` (in ``src_lang[i]``) translates the English ``tgt[i]``."""

    src: list[str]
    tgt: list[str]
    src_lang: list[str]

    def __len__(self) -> int:
        return len(self.src)


def tatoeba_pairs(languages: list[str], total: int, *, data_dir=None, seed: int = 0
                  ) -> PairSample:
    """About ``total`` Tatoeba pairs spread evenly over ``languages`` (those with data)."""
    available = set(available_tatoeba_languages(data_dir))
    langs = [x for x in languages if x in available and x != "en"]
    if not langs:
        raise ConfigError(f"no Tatoeba test set for any of {languages}")
    per = max(1, total // len(langs))
    rng = np.random.default_rng(seed)
    src, tgt, lang_of = [], [], []
    for lang in langs:
        data = load_tatoeba(lang, data_dir)
        for i in np.sort(rng.permutation(len(data))[:per]):
            src.append(data.source[i])
            tgt.append(data.english[i])
            lang_of.append(lang)
    return PairSample(src, tgt, lang_of)


def lid_sample(languages: list[str], per_language: int, *, data_dir=None, seed: int = 0
               ) -> tuple[list[str], list[str]]:
    """Sentences for the language-ID probe: ``per_language`` Tatoeba sentences per language
    and as many English ones, the English taken from *other* pairs than the non-English
    sentences (so no English sentence translates a probe sentence)."""
    pairs = tatoeba_pairs(languages, 2 * per_language * len(languages), data_dir=data_dir,
                          seed=seed)
    langs = np.asarray(pairs.src_lang, dtype=object)
    texts, labels, rest = [], [], []
    for lang in dict.fromkeys(pairs.src_lang):
        rows = np.flatnonzero(langs == lang)
        half = min(per_language, len(rows) // 2)
        texts += [pairs.src[i] for i in rows[:half]]
        labels += [lang] * half
        rest += rows[half:].tolist()
    rng = np.random.default_rng(seed)
    english = list(dict.fromkeys(pairs.tgt[i] for i in rng.permutation(rest)))[:per_language]
    return texts + english, labels + ["en"] * len(english)
