"""Build a training set of X-English pairs from ``<data>/parallel``, free of evaluation data.

Sources (see the data README): WMT news test sets, the Tatoeba Challenge (rows
flagged as overlapping LASER Tatoeba are dropped), FLORES v1 (ne, si), Multi30k
train (de, fr, cs) and TICO-19 (ne, ar). The tokenised MLQE post-edits and the
BUCC gold are never used. Then every pair whose either side occurs in an
evaluation set it will be scored on is removed (after whitespace and case
folding), duplicates are dropped, and a seeded sample of at most
``pairs_per_language`` pairs per language is kept. The returned report says how
many pairs each step removed.

Held-out pairs: with ``holdout_per_language = H`` the last ``H`` pairs of each
language's seeded order are set aside as validation data (for choosing hyperparameters,
never for training); the training pairs are then the first ``pairs_per_language`` of the
rest. Training sets of different sizes with the same seed are nested (each is a prefix of
the next), and all share the same held-out pairs.
"""

from __future__ import annotations

import logging
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..exceptions import ConfigError
from ..registry import Registry
from ..util.text import text_list
from .io import read_tsv
from .languages import normalize_language, to_iso3
from .parallel import ParallelPairs
from .paths import missing_data, resolve_data_dir

logger = logging.getLogger(__name__)

#: evaluation set name -> the function listing its sentences under a data folder; each
#: task registers its own (``TaskMetadata.eval_set`` -> ``Task.texts``, see
#: :func:`disembed.evaluation.register_task`), so this module never lists the sets
HELD_OUT_TEXTS: Registry[Callable[[Path], Iterable[str]]] = Registry("evaluation set")


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _wmt(root: Path, lang: str) -> list[tuple[str, str]]:
    path = root / "wmt_newstest" / f"en-{lang}.tsv"
    return _pairs(path, lang, "en") if path.is_file() else []


def _tatoeba_challenge(root: Path, lang: str) -> list[tuple[str, str]]:
    iso3 = to_iso3(lang) if lang != "zh" else "zho"
    iso3 = {"ar": "ara", "fa": "pes", "sw": "swa"}.get(lang, iso3)
    path = root / "tatoeba_challenge_v2021-08-07" / f"en-{iso3}.tsv"
    if not path.is_file():
        return []
    flags = ["pair_in_laser_tatoeba_test", "sent_in_laser_tatoeba_test"]
    rows, _ = read_tsv(path, ["en", iso3, *flags], required_nonempty=["en", iso3], skip_bad=True)
    return [(r[iso3], r["en"]) for r in rows if r[flags[0]] != "1" and r[flags[1]] != "1"]


def _flores(root: Path, lang: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for split in ("dev", "devtest", "test"):
        path = root / "flores_v1" / f"{lang}-en.{split}.tsv"
        if path.is_file():
            out += _pairs(path, lang, "en")
    return out


def _multi30k(root: Path, lang: str) -> list[tuple[str, str]]:
    path = root / "multi30k" / "train.tsv"
    return _pairs(path, lang, "en") if lang in ("de", "fr", "cs") and path.is_file() else []


def _tico19(root: Path, lang: str) -> list[tuple[str, str]]:
    path = root / "tico19_test" / f"en-{lang}.tsv"
    return _pairs(path, lang, "en") if path.is_file() else []


def _pairs(path: Path, src_col: str, tgt_col: str) -> list[tuple[str, str]]:
    rows, _ = read_tsv(path, [src_col, tgt_col], skip_bad=True)
    return [(r[src_col], r[tgt_col]) for r in rows]


SOURCES = {
    "wmt_newstest": _wmt,
    "tatoeba_challenge": _tatoeba_challenge,
    "flores_v1": _flores,
    "multi30k": _multi30k,
    "tico19": _tico19,
}


def evaluation_texts(eval_set: str, data_dir: Path) -> set[str]:
    """Every sentence (normalised) of one evaluation set, for overlap removal (the set's
    task says which: :data:`HELD_OUT_TEXTS`)."""
    return {_norm(t) for t in HELD_OUT_TEXTS.get(eval_set)(data_dir)}


@dataclass
class LanguageReport:
    language: str
    per_source: dict[str, int] = field(default_factory=dict)
    removed_overlap: dict[str, int] = field(default_factory=dict)
    removed_duplicates: int = 0
    available: int = 0
    used: int = 0
    held_out: int = 0


@dataclass
class TrainingSet:
    pairs: ParallelPairs
    languages: list[LanguageReport]
    eval_sets: list[str]
    seed: int
    heldout: ParallelPairs = field(default_factory=lambda: ParallelPairs([], [], [], []))
    missing: list[str] = field(default_factory=list)

    def report(self) -> dict:
        return {"eval_sets": self.eval_sets, "seed": self.seed, "total_pairs": len(self.pairs),
                "held_out_pairs": len(self.heldout), "missing_languages": self.missing,
                "languages": [asdict(r) for r in self.languages]}

    def summary(self) -> str:
        removed = sum(sum(r.removed_overlap.values()) for r in self.languages)
        return (f"{len(self.pairs)} pairs in {len(self.languages)} languages (x-en); removed "
                f"{removed} pairs overlapping {', '.join(self.eval_sets) or 'nothing'}")


def build_training_set(
    languages: Sequence[str],
    pairs_per_language: int | None = 2000,
    *,
    eval_sets: Sequence[str] | None = None,
    data_dir: str | Path | None = None,
    seed: int = 0,
    sources: Sequence[str] | None = None,
    holdout_per_language: int = 0,
    skip_missing: bool = False,
) -> TrainingSet:
    """Pairs ``(x, en)`` for each language in ``languages``; see the module docstring.

    ``eval_sets``: the evaluation sets whose sentences are removed from the pairs (names
    in :data:`HELD_OUT_TEXTS`; ``None``: every registered one, as each task declares it).
    ``skip_missing``: leave out (with a warning, listed in ``missing``) languages without
    any pair in the pool instead of raising; at least one language must remain.
    """
    eval_sets = HELD_OUT_TEXTS.names() if eval_sets is None else list(eval_sets)
    if holdout_per_language < 0:
        raise ConfigError(f"holdout_per_language must be >= 0; got {holdout_per_language}")
    root = resolve_data_dir(data_dir)
    parallel = root / "parallel"
    if not parallel.is_dir():
        raise missing_data("the parallel training data (the folder parallel/)", root,
                           "parallel-multi30k parallel-flores-v1")
    sources = list(sources or SOURCES)
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise ConfigError(f"unknown training source(s) {unknown}; known: {list(SOURCES)}")
    wanted = _wanted(languages)
    blocked = {name: evaluation_texts(name, root) for name in eval_sets}
    parts, held, reports, missing = [], [], [], []
    for lang in wanted:
        if lang == "en":
            raise ConfigError("languages are paired with English; leave 'en' out of the list")
        try:
            rep, kept = _language_pool(lang, parallel, sources, blocked, seed)
        except NoTrainingData:
            if not skip_missing:
                raise
            logger.warning("no training pairs for %s-en in %s: left out ('disembed data list' "
                           "says how to get its sets)", lang, parallel)
            missing.append(lang)
            continue
        kept, aside = _split(lang, rep, kept, holdout_per_language, pairs_per_language)
        parts.append(_as_pairs(kept, lang))
        held.append(_as_pairs(aside, lang))
        reports.append(rep)
    if not parts:
        raise ConfigError(f"no training pairs for any of {wanted} in {parallel}; get the "
                          "parallel sets first ('disembed data download', 'disembed data list')")
    return TrainingSet(ParallelPairs.concat(parts), reports, list(eval_sets), seed,
                       ParallelPairs.concat(held), missing)


def _wanted(languages: Sequence[str]) -> list[str]:
    """The canonical codes of ``languages``, all checked up front, in the caller's order; a
    string, a set or a generator is refused, and so is one language named twice (``de`` and
    ``deu``: its pairs would be taken twice)."""
    given = text_list(languages, "build_training_set: languages", "language codes")
    wanted = [normalize_language(code) for code in given]
    for i, code in enumerate(wanted):
        if code in wanted[:i]:
            first = given[wanted.index(code)]
            raise ConfigError(f"languages name {code!r} twice ({first!r} and {given[i]!r}); "
                              "give each language once")
    return wanted


def _split(lang: str, rep: LanguageReport, kept: list[tuple[str, str]], holdout: int,
           pairs_per_language: int | None) -> tuple[list, list]:
    """``kept`` cut into the training pairs (at most ``pairs_per_language``) and the last
    ``holdout`` pairs held out; ``rep`` records both counts."""
    cut = len(kept) - holdout
    if cut < 2:
        raise ConfigError(f"{lang}-en has {len(kept)} usable pairs, too few to hold out "
                          f"{holdout} and train on the rest; lower the held-out size or "
                          "drop the language")
    kept, aside = kept[:cut], kept[cut:]
    kept = kept[:pairs_per_language] if pairs_per_language else kept
    rep.used, rep.held_out = len(kept), len(aside)
    logger.info("training data %s-en: %d pairs used of %d available (overlap removed: %s)",
                lang, rep.used, rep.available, rep.removed_overlap)
    return kept, aside


def _language_pool(lang: str, parallel: Path, sources: Sequence[str],
                   blocked: dict[str, set[str]], seed: int
                   ) -> tuple[LanguageReport, list[tuple[str, str]]]:
    """Every usable ``(x, en)`` pair of ``lang``: overlaps and duplicates removed, in the
    seeded order every training set of this seed draws from."""
    rep = LanguageReport(lang)
    pool: list[tuple[str, str]] = []
    for name in sources:
        got = SOURCES[name](parallel, lang)
        rep.per_source[name] = len(got)
        pool += got
    for name, texts in blocked.items():
        before = len(pool)
        pool = [p for p in pool if _norm(p[0]) not in texts and _norm(p[1]) not in texts]
        rep.removed_overlap[name] = before - len(pool)
    seen: set[tuple[str, str]] = set()
    kept = []
    for x, en in pool:
        key = (_norm(x), _norm(en))
        if key not in seen:
            seen.add(key)
            kept.append((x, en))
    rep.removed_duplicates = len(pool) - len(kept)
    rep.available = len(kept)
    random.Random(f"{seed}-{lang}").shuffle(kept)
    if not kept:
        raise NoTrainingData(f"no training pairs found for {lang!r} in {parallel}; sources "
                             f"tried: {list(sources)}. Drop the language or add data "
                             "('disembed data list' says how to get each set).")
    return rep, kept


class NoTrainingData(ConfigError):
    """A language has no usable pairs in the pool (its sets are not in the data folder)."""


def _as_pairs(rows: list[tuple[str, str]], lang: str) -> ParallelPairs:
    n = len(rows)
    return ParallelPairs([x for x, _ in rows], [e for _, e in rows], [lang] * n, ["en"] * n)
