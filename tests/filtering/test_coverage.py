"""The length-coverage term: a partial translation, as close in meaning as a full one (here:
the very same vector), scores below every true pair of its chunk; true pairs of the chunk's
usual length ratio are not touched; a chunk too small to learn its ratio is left alone."""

from __future__ import annotations

import re

import numpy as np
import pytest

from disembed.filtering import PairScorer, RuleConfig
from disembed.filtering.coverage import (
    MIN_ANCHORS,
    MIN_SIGMA,
    coverage_penalty,
    fit_length_model,
    log_length_ratios,
)

#: words and their translations, of about the same length: the chunk's usual ratio is ~1
DE = ["Haus", "rot", "Baum", "Hund", "Tag", "Wald", "Kind", "See"]
EN = ["home", "red", "tree", "hound", "day", "wood", "child", "lake"]


class IdEncoder:
    """Every text is the random unit vector of the number in its first word: a source and
    its target (full or partial) say exactly the same thing to this encoder."""

    name = "id-encoder"

    def encode(self, texts, batch_size=64):
        out = []
        for t in texts:
            key = int(re.sub(r"\D", "", t.split()[0]))
            v = np.random.default_rng(key).standard_normal(128)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, np.float32)


def pair(i: int, words: int) -> tuple[str, str]:
    rng = np.random.default_rng(1000 + i)
    pick = rng.integers(0, len(DE), words)
    return (f"Satz{i} " + " ".join(DE[j] for j in pick),
            f"Sent{i} " + " ".join(EN[j] for j in pick))


def chunk(n_true: int = 40):
    rows = [pair(i, 6 + i % 5) for i in range(n_true)]
    src, full = pair(n_true, 10)
    half = " ".join(full.split()[:6])  # the first half: a partial translation
    return [s for s, _ in rows] + [src], [t for _, t in rows] + [half], full


def test_a_partial_translation_scores_below_every_full_one():
    src, tgt, _ = chunk()
    scores = PairScorer(IdEncoder()).score(src, tgt)
    assert scores.reason[-1] == ""  # no rule catches it (ratio under 2)
    assert np.isclose(scores.cosine[-1], 1.0)  # the meaning cosine cannot tell
    assert scores.score[-1] < scores.score[:-1].min()
    assert scores.length_z[-1] < -2


def test_true_pairs_of_the_usual_ratio_keep_their_margin():
    src, tgt, _ = chunk()
    with_term = PairScorer(IdEncoder()).score(src, tgt)
    margin = PairScorer(IdEncoder(), rules=RuleConfig(coverage_weight=0.0)).score(src, tgt)
    inside = np.abs(with_term.length_z) <= RuleConfig().coverage_slack
    assert inside[:-1].mean() > 0.75
    np.testing.assert_allclose(with_term.score[inside], margin.score[inside])
    lost = margin.score - with_term.score
    assert lost[:-1].max() < 0.1 < lost[-1]  # the true pairs' spread costs them little


def test_a_small_chunk_learns_no_ratio_and_penalises_nothing():
    src, tgt, _ = chunk(MIN_ANCHORS - 5)
    with_term = PairScorer(IdEncoder()).score(src, tgt)
    margin = PairScorer(IdEncoder(), rules=RuleConfig(coverage_weight=0.0)).score(src, tgt)
    np.testing.assert_allclose(with_term.score, margin.score)
    assert not with_term.length_z.any()


def test_length_model_is_robust_and_floored():
    r = log_length_ratios(["abcd"] * 40 + ["abcd"], ["abcd"] * 40 + ["ab"])
    model = fit_length_model(r, np.ones(len(r), bool))
    assert model.mu == 0.0 and model.sigma == MIN_SIGMA  # the outlier moves neither
    assert model.z(r)[-1] == pytest.approx(np.log(0.5) / MIN_SIGMA)
    np.testing.assert_allclose(coverage_penalty(np.array([-3.0, 1.0, 2.5]), 0.1, 2.0),
                               [0.1, 0.0, 0.05])
    with pytest.raises(ValueError, match="coverage_weight"):
        RuleConfig(coverage_weight=-1.0)
