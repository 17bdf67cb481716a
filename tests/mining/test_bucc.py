"""BUCC loader, the F1-optimal threshold, and the evaluation on a tiny BUCC-shaped folder."""

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.mining import normalize_rows
from disembed.mining.bucc import best_threshold, evaluate_bucc, load_bucc
from disembed.reports.plots import plot_score_histogram


def test_best_threshold_against_exhaustive_search():
    rng = np.random.default_rng(0)
    score = np.sort(np.round(rng.random(200), 2))[::-1]  # ties included
    is_gold = rng.random(200) < score  # better scores are more often gold
    n_gold = int(is_gold.sum()) + 5  # some gold never among the candidates
    p, r, f1, thr = best_threshold(score, is_gold, n_gold)
    best = 0.0
    for t in np.unique(score):
        keep = score >= t
        tp = (is_gold & keep).sum()
        if tp:
            prec, rec = tp / keep.sum(), tp / n_gold
            best = max(best, 2 * prec * rec / (prec + rec))
    assert f1 == pytest.approx(best)
    keep = score >= thr
    assert p == pytest.approx((is_gold & keep).sum() / keep.sum())
    assert r == pytest.approx((is_gold & keep).sum() / n_gold)


@pytest.fixture
def bucc_dir(tmp_path):
    folder = tmp_path / "bucc2018" / "de-en"
    folder.mkdir(parents=True)
    de = [f"de-{i:09d}\tSatz {i}" for i in range(40)]
    en = [f"en-{i:09d}\tSatz {i if i % 3 == 0 else 100 + i}" for i in range(50)]
    gold = [f"de-{i:09d}\ten-{i:09d}" for i in range(0, 40, 3)] + ["de-000000001\ten-000000049"]
    for name, lines in (("de-en.sample.de", de), ("de-en.sample.en", en),
                        ("de-en.sample.gold", gold)):
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_evaluate_bucc_on_a_tiny_pool(bucc_dir, tmp_path):
    data = load_bucc("de-en", bucc_dir)
    assert len(data.src) == 40 and len(data.tgt) == 50 and len(data.gold) == 15
    enc = HashEncoder(dim=64)
    result, score, is_gold = evaluate_bucc(data, lambda t, lang: normalize_rows(enc.encode(t)))
    assert result.precision == 1.0  # the 14 identical sentences score highest
    assert result.recall == pytest.approx(14 / 15)  # the one unmatchable gold pair is missed
    assert is_gold.sum() == 14 and len(score) == result.candidates
    pytest.importorskip("matplotlib")
    png = plot_score_histogram({"tiny": (score, is_gold, result.threshold)}, tmp_path / "h.png")
    assert png.stat().st_size > 1000
