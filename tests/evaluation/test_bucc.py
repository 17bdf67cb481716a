"""BUCC loader, the F1-optimal threshold, and the evaluation on a tiny BUCC-shaped folder."""

import numpy as np
import pytest

from disembed.data.bucc import load_bucc
from disembed.encoders import HashEncoder
from disembed.evaluation import TASKS, EvalOptions
from disembed.evaluation.bucc import BuccTask, best_threshold
from disembed.methods import make_method
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


def test_best_threshold_never_cuts_between_candidates_of_equal_score():
    """A threshold keeps every candidate scoring at least it: the gold 0.8 and the non-gold
    0.8 are kept or dropped together (cutting between them would claim F1 = 1)."""
    score = np.array([0.9, 0.8, 0.8, 0.7])
    p, r, f1, thr = best_threshold(score, np.array([True, True, False, False]), 2)
    assert (p, r, f1, thr) == pytest.approx((2 / 3, 1.0, 0.8, 0.8))


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


def test_bucc_task_on_a_tiny_pool(bucc_dir, tmp_path):
    data = load_bucc("de-en", bucc_dir)
    assert len(data.src) == 40 and len(data.tgt) == 50 and len(data.gold) == 15
    enc = HashEncoder(dim=64)
    task = TASKS.get("bucc")(["de-en"], data_dir=bucc_dir)
    scores = task.evaluate(enc.encode)
    assert scores.get("meaning", "de-en", "precision") == 1.0  # identical sentences score top
    assert scores.get("meaning", "de-en", "recall") == pytest.approx(14 / 15)  # one unmatchable
    assert scores.main_score("meaning") == pytest.approx(2 * (14 / 15) / (1 + 14 / 15))
    assert scores.data_sizes == {"de-en": 40}
    subset = task.load_subsets()[0]
    score, is_gold = task.mine(subset, enc.encode(subset.texts_a), enc.encode(subset.texts_b))
    assert is_gold.sum() == 14 and np.all(np.diff(score) <= 0)
    pytest.importorskip("matplotlib")
    png = plot_score_histogram({"tiny": (score, is_gold, 0.5)}, tmp_path / "h.png")
    assert png.stat().st_size > 1000


def test_bucc_mines_with_the_k_margin_and_mode_it_was_given(bucc_dir):
    """BuccTask(k, margin, mode) mines exactly what the retrieval functions give with those
    settings (and on this pool they give other candidates than LASER's defaults)."""
    from disembed.retrieval import candidates, normalize_rows, search_both

    enc = HashEncoder(dim=64)
    for k, margin, mode in ((2, "distance", "max-score"), (4, "absolute", "forward"),
                            (7, "ratio", "backward")):
        task = BuccTask(["de-en"], k=k, margin=margin, mode=mode, data_dir=bucc_dir)
        subset = task.load_subsets()[0]
        a, b = enc.encode(subset.texts_a), enc.encode(subset.texts_b)
        score, _ = task.mine(subset, a, b)
        lists = search_both(normalize_rows(a), normalize_rows(b), k)
        want, _, _ = candidates(*lists, mode=mode, kind=margin)
        np.testing.assert_allclose(score, want, rtol=1e-6)
        default, _ = BuccTask(["de-en"], data_dir=bucc_dir).mine(subset, a, b)
        assert len(default) != len(score) or not np.allclose(default, score)


def test_bucc_task_scores_the_meaning_and_language_parts(bucc_dir):
    enc = HashEncoder(dim=32)
    X = enc.encode([f"x{i}" for i in range(20)])
    model = make_method("mean-centering").fit(X[:10], X[10:], "de", "en")
    task = BuccTask.from_options(EvalOptions(max_items=5), data_dir=bucc_dir)
    task.pairs = ["de-en"]
    scores = task.evaluate(enc.encode, model.views)
    assert set(scores.views()) == {"meaning", "language"}
    assert scores.config["max_items"] is None  # pools are never subsampled


def test_bucc_task_rejects_unknown_pairs_and_settings():
    from disembed.exceptions import ConfigError

    with pytest.raises(ConfigError, match="unknown BUCC pair"):
        BuccTask(["xx-en"])
    with pytest.raises(ConfigError, match="margin"):
        BuccTask(margin="nope")
