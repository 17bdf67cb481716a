"""Score one chunk of pairs: the rules, each side's language, the meaning score.

:class:`PairScorer` turns ``src``/``tgt`` lists into :class:`ChunkScores`: per pair the
calibrated ``score`` (:mod:`.thresholds`: the ratio margin, less the length-coverage
penalty of :mod:`.coverage`), the meaning ``cosine``, the language each side
was identified as, and the first reason it breaks (:mod:`.rules`, then the language
reasons; the meaning cutoff is applied later, by the job, since ``--keep-top`` needs every
score). Each distinct sentence of the chunk is embedded once
(:func:`~disembed.util.dedup.distinct`), and the neighbours of the margin are the chunk's
distinct sentences, so a repeated line does not crowd its own neighbourhood.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..data.languages import normalize_language
from ..encoders import Encoder
from ..methods.routing import tags_with_scripts
from ..mining.score import score_embeddings
from ..retrieval.knn import normalize_rows
from ..saved_model import SavedModel
from ..util.dedup import distinct
from ..util.text import is_blank
from .coverage import ANCHOR_MARGIN, coverage_penalty, fit_length_model, log_length_ratios
from .language_check import UNKNOWN, LanguageCheck, is_wrong, make_check
from .rules import SWAPPED, UNTRANSLATED, WRONG_SRC, WRONG_TGT, RuleConfig, rule_reason

logger = logging.getLogger(__name__)


@dataclass
class ChunkScores:
    """Per pair: ``score``, ``cosine`` ``(p,) float64``; ``src_code``, ``tgt_code`` and
    ``reason`` ``(p,) object`` (``""``: no rule broken); ``length_z`` ``(p,) float64``: the
    log length ratio in deviations from the chunk's language pair (:mod:`.coverage`)."""

    score: np.ndarray
    cosine: np.ndarray
    src_code: np.ndarray
    tgt_code: np.ndarray
    reason: np.ndarray
    length_z: np.ndarray | None = None


def language_reason(src: str, tgt: str, src_code: str, tgt_code: str,
                    src_lang: str | None, tgt_lang: str | None,
                    known: frozenset[str] | None = None) -> str | None:
    """``swapped_sides`` (each side is in the other's language: the columns are exchanged,
    and swapping them back gives a pair), else ``untranslated`` (the target is in the
    source's language), else a side identified as another language than expected
    (:func:`~.language_check.is_wrong`), else ``None``."""
    if src_lang and tgt_lang and src_lang != tgt_lang and tgt_code == src_lang:
        return SWAPPED if src_code == tgt_lang else UNTRANSLATED
    if is_wrong(src_code, src_lang, src, known):
        return WRONG_SRC
    if is_wrong(tgt_code, tgt_lang, tgt, known):
        return WRONG_TGT
    return None


def majority_language(codes: Sequence[str]) -> str | None:
    """The most common known code of ``codes`` (``None`` where none is known)."""
    known = Counter(c for c in codes if c != UNKNOWN and not str(c).startswith("und"))
    return known.most_common(1)[0][0] if known else None


class PairScorer:
    """Scores chunks of pairs with ``encoder`` and (optionally) a fitted disentangler
    ``model`` (``None``: the raw embeddings' cosine), checking languages with ``check``.

    >>> scorer = PairScorer.from_saved("models/seed-e5")           # doctest: +SKIP
    >>> filter_bitext("crawl.tsv.gz", "kept.tsv", scorer)          # doctest: +SKIP
    """

    @classmethod
    def from_saved(cls, model, check: str = "auto", languages: Sequence[str] | None = None,
                   **options) -> "PairScorer":
        """The scorer of a saved model (a folder or a :class:`~disembed.saved_model.SavedModel`)
        with its own encoder; ``check``: see :func:`~.language_check.make_check`."""
        saved = model if isinstance(model, SavedModel) else SavedModel.load(model)
        return cls(saved.encoder, saved.disentangler,
                   make_check(check, saved.disentangler, languages), **options)

    def __init__(self, encoder: Encoder, model=None, check: LanguageCheck | None = None, *,
                 rules: RuleConfig | None = None, k: int = 4, batch_size: int = 64) -> None:
        self.encoder, self.model, self.check = encoder, model, check
        self.rules, self.k, self.batch_size = rules or RuleConfig(), k, batch_size

    def vectors(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(raw embeddings, unit meaning vectors)`` of ``texts``: the one place the
        filter turns texts into meaning vectors (an untagged text routed by its script, as
        :meth:`~disembed.saved_model.SavedModel.meaning` does)."""
        X = self.encoder.encode(texts, batch_size=self.batch_size)
        if self.model is None:
            return X, normalize_rows(X)
        return X, normalize_rows(self.model.meaning(X, tags_with_scripts(texts, None)))

    def _distinct_vectors(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Unit meaning vectors ``(u, d)`` (zero for a blank text) and language codes."""
        keep = np.flatnonzero([not is_blank(t) for t in texts])
        codes = np.full(len(texts), UNKNOWN, dtype=object)
        if not len(keep):
            return np.zeros((len(texts), 1), np.float32), codes
        X, M = self.vectors([texts[i] for i in keep])
        out = np.zeros((len(texts), M.shape[1]), M.dtype)
        out[keep] = M
        if self.check is not None:
            codes[keep] = np.asarray(self.check.identify([texts[i] for i in keep], X),
                                     dtype=object)
        return out, codes

    def score(self, src: list[str], tgt: list[str], src_lang: str | None = None,
              tgt_lang: str | None = None) -> ChunkScores:
        """The scores of the pairs ``src[i]``, ``tgt[i]`` (module docstring)."""
        d = distinct([*src, *tgt])
        M, codes = self._distinct_vectors(d.texts)
        s_rows, t_rows = d.inverse[: len(src)], d.inverse[len(src):]
        live = np.linalg.norm(M, axis=1) > 0  # a blank text has no vector (and no neighbour)
        both = live[s_rows] & live[t_rows]
        score = np.zeros(len(src))
        src_pool = M[np.unique(s_rows[live[s_rows]])]
        tgt_pool = M[np.unique(t_rows[live[t_rows]])]
        if both.any():
            k = min(self.k, len(src_pool), len(tgt_pool))
            score[both] = score_embeddings(M[s_rows[both]], M[t_rows[both]], "ratio", k=k,
                                           src_pool=src_pool, tgt_pool=tgt_pool)
        cosine = np.einsum("pd,pd->p", M[s_rows].astype(np.float64),
                           M[t_rows].astype(np.float64))
        rules = np.array([rule_reason(s, t, self.rules) or "" for s, t in zip(src, tgt,
                                                                             strict=True)],
                         dtype=object)
        z = self.length_z(src, tgt, score, both & (rules == ""))
        score[both] -= coverage_penalty(z[both], self.rules.coverage_weight,
                                        self.rules.coverage_slack)
        out = ChunkScores(score, cosine, codes[s_rows], codes[t_rows], rules, z)
        return out if self.check is None else self.judge(out, src, tgt, src_lang, tgt_lang)

    @staticmethod
    def length_z(src: list[str], tgt: list[str], margin: np.ndarray, ok: np.ndarray
                 ) -> np.ndarray:
        """``(p,)``: each pair's log length ratio in deviations from the chunk's language
        pair (:mod:`.coverage`; anchors: the pairs ``ok`` with ``margin`` at least
        :data:`~.coverage.ANCHOR_MARGIN`)."""
        r = log_length_ratios(src, tgt)
        return fit_length_model(r, ok & (margin >= ANCHOR_MARGIN)).z(r)

    def judge(self, scores: ChunkScores, src: list[str], tgt: list[str],
              src_lang: str | None, tgt_lang: str | None) -> ChunkScores:
        """``scores`` with the language reasons of the expected languages
        (:func:`with_languages`, with the languages this scorer's check knows)."""
        return with_languages(scores, src, tgt, src_lang, tgt_lang,
                              getattr(self.check, "known", None))


def with_languages(scores: ChunkScores, src: list[str], tgt: list[str], src_lang: str | None,
                   tgt_lang: str | None, known: frozenset[str] | None = None) -> ChunkScores:
    """``scores`` with the language reasons (:func:`language_reason`) of the expected
    languages added to the pairs no rule drops."""
    src_lang = normalize_language(src_lang) if src_lang else None
    tgt_lang = normalize_language(tgt_lang) if tgt_lang else None
    reason = scores.reason.copy()
    for i in np.flatnonzero(reason == ""):
        reason[i] = language_reason(src[i], tgt[i], scores.src_code[i], scores.tgt_code[i],
                                    src_lang, tgt_lang, known) or ""
    return ChunkScores(scores.score, scores.cosine, scores.src_code, scores.tgt_code, reason,
                       scores.length_z)
