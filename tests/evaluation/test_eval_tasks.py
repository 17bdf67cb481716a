import warnings

import numpy as np
import pytest
from scipy import stats

from disembed.encoders import HashEncoder
from disembed.evaluation import TASKS, STS17Task, TatoebaTask, WMT20QETask
from disembed.evaluation.metrics import retrieval_accuracy
from disembed.exceptions import ConfigError, ShapeError, UnknownNameError


def test_registry_names():
    assert TASKS.names() == ["bucc", "sts17", "tatoeba", "wmt20-qe"]
    assert {TASKS.get(n).metadata.eval_set for n in TASKS} == {"bucc2018", "sts17", "tatoeba",
                                                              "wmt20-qe"}
    with pytest.raises(UnknownNameError, match="Did you mean 'tatoeba'"):
        TASKS.get("tatoba")


def test_tatoeba_end_to_end(tiny_data_dir, embed, views):
    task = TASKS.get("tatoeba")(languages=["de", "zh", "nl"], data_dir=tiny_data_dir,
                                supported=["de", "zh"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = task.evaluate(embed, views)
    # one embed call per (subset, side)
    assert len(embed.calls) == 6 and embed.calls[0] == ["Hallo.", "Danke.", "Ja.", "Nein.", "Gut."]
    assert scores.data_sizes == {"de": 5, "zh": 4, "nl": 3}
    assert scores.get("meaning", "de", "acc_xx2en") == 1.0  # identical text on both sides
    assert scores.get("meaning", "de", "acc_en2xx") == 1.0
    enc = HashEncoder(dim=16)
    src, eng = ["你好。", "谢谢。", "是。", "不。"], ["你好。", "谢谢。", "Yes.", "No."]
    want = retrieval_accuracy(enc.encode(src), enc.encode(eng))
    assert scores.get("meaning", "zh", "acc_xx2en") == pytest.approx(want.acc_a2b)
    assert scores.get("meaning", "zh", "acc_xx2en") < 1.0
    # constant language part: exactly chance
    assert scores.get("language", "de", "acc_mean") == pytest.approx(1 / 5)
    # averages: tatoeba-14 covers de and zh; tatoeba-36 adds nl; all = supported only
    avg14 = [r for r in scores.averages if r.subset == "avg:tatoeba-14" and r.view == "meaning"]
    assert {r.n for r in avg14} == {2}
    assert scores.main_subset == "avg:tatoeba-14" and scores.main_metric == "acc_mean"
    main = (scores.get("meaning", "de", "acc_mean") + scores.get("meaning", "zh", "acc_mean")) / 2
    assert scores.main_score("meaning") == pytest.approx(main)
    assert [r.n for r in scores.averages if r.subset == "avg:tatoeba-36"][0] == 3
    assert [r.n for r in scores.averages if r.subset == "avg:all"][0] == 2
    assert scores.per_item[("meaning", "zh", "acc_xx2en")].shape == (4,)
    assert scores.config["languages"] == ["de", "zh", "nl"]


def test_tatoeba_presets_skip_missing_languages_and_reject_unknown(tiny_data_dir, embed):
    scores = TatoebaTask("tatoeba-36", data_dir=tiny_data_dir).evaluate(embed)
    assert scores.subsets() == ["de", "nl", "zh"] and scores.views() == ["meaning"]
    assert TatoebaTask("all", data_dir=tiny_data_dir).selected_languages() == ["de", "nl", "zh"]
    with pytest.raises(ConfigError, match="no test set for \\['fr'\\]"):
        TatoebaTask(["fr"], data_dir=tiny_data_dir).evaluate(embed)
    with pytest.raises(ConfigError, match="tatoeba-14"):
        TatoebaTask("xtreme")


def test_sts_end_to_end_matches_scipy(tiny_data_dir, embed, views, sts_rows):
    scores = STS17Task(["en-de", "en-en"], data_dir=tiny_data_dir).evaluate(embed, views)
    enc = HashEncoder(dim=16)
    a = enc.encode([r[0] for r in sts_rows]).astype(np.float64)
    b = enc.encode([r[1] for r in sts_rows]).astype(np.float64)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    gold = [r[2] for r in sts_rows]
    assert scores.get("meaning", "en-de", "pearson") == pytest.approx(stats.pearsonr(cos, gold)[0])
    want_rho = stats.spearmanr(cos, gold)[0]
    assert scores.get("meaning", "en-de", "spearman") == pytest.approx(want_rho)
    np.testing.assert_allclose(scores.per_item[("meaning", "en-de", "cosine")], cos, rtol=1e-6)
    assert np.isnan(scores.get("language", "en-de", "pearson"))  # constant language view
    assert scores.main_score("meaning") == scores.get("meaning", "en-de", "spearman")
    assert scores.get("meaning", "avg:monolingual", "spearman") == scores.get(
        "meaning", "en-en", "spearman")
    assert np.isnan(scores.main_score("language"))


def test_qe_end_to_end_and_splits(tiny_data_dir, embed, views, qe_rows):
    scores = WMT20QETask(data_dir=tiny_data_dir).evaluate(embed, views)
    assert scores.subsets() == ["en-de", "ru-en"]
    enc = HashEncoder(dim=16)
    a, b = enc.encode([r[0] for r in qe_rows]), enc.encode([r[1] for r in qe_rows])
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    want = stats.pearsonr(cos, [r[2] for r in qe_rows])[0]
    assert scores.get("meaning", "en-de", "pearson") == pytest.approx(want)
    wmt6 = [r for r in scores.averages if r.subset == "avg:wmt20-6" and r.view == "meaning"]
    assert wmt6[0].n == 1  # ru-en is not in the WMT20 six
    assert scores.main_score("meaning") == pytest.approx(want)
    t21 = WMT20QETask(split="test21", data_dir=tiny_data_dir).evaluate(embed)
    assert t21.data_sizes == {"en-cs": 4} and t21.config["split"] == "test21"
    with pytest.raises(ConfigError, match=r"en-zh.*\(present: \[.en-de.*wmt20-qe"):
        WMT20QETask(pairs=["en-zh"], data_dir=tiny_data_dir).evaluate(embed)


def test_subsample_is_seeded_and_recorded(tiny_data_dir, embed):
    def run(seed):
        embed.calls.clear()
        s = TatoebaTask(["de"], max_items=3, seed=seed, data_dir=tiny_data_dir).evaluate(embed)
        return s, list(embed.calls[0])
    s0, texts0 = run(0)
    _, again = run(0)
    assert texts0 == again and len(texts0) == 3 and s0.data_sizes == {"de": 3}
    assert s0.config["max_items"] == 3 and s0.config["seed"] == 0
    assert {tuple(run(seed)[1]) for seed in range(6)} != {tuple(texts0)}
    with pytest.raises(ConfigError, match="max_items"):
        TatoebaTask(max_items=0)


def test_bad_embed_or_views_give_clear_errors(tiny_data_dir, embed):
    task = STS17Task(["en-de"], data_dir=tiny_data_dir)
    with pytest.raises(ShapeError, match="expected \\(6, d\\)"):
        task.evaluate(lambda texts: np.ones((2, 3)))
    with pytest.raises(ShapeError, match="view 'meaning'"):
        task.evaluate(embed, lambda e, lang: {"meaning": e[:, : (3 if lang == "en" else 4)]})


def test_tatoeba_names_each_direction_by_its_queries(tiny_data_dir):
    """``acc_xx2en``: the xx sentences query the English ones; ``acc_en2xx``: the reverse.
    Here the English side of pair 0 is a hub as near to every German sentence as to its own:
    xx->en stays perfect, en->xx gets 1/5 for that query (a five-way tie)."""
    from tiny_data import TATOEBA

    texts = TATOEBA["deu"][0]

    def embed(batch):
        return np.eye(len(texts))[[texts.index(t) for t in batch]]

    def views(e, lang):
        out = np.array(e, dtype=np.float64)
        if lang == "en":
            out[out[:, 0] == 1] = 1.0
        return {"meaning": out}

    scores = TatoebaTask(["de"], data_dir=tiny_data_dir).evaluate(embed, views)
    assert scores.get("meaning", "de", "acc_xx2en") == 1.0
    assert scores.get("meaning", "de", "acc_en2xx") == pytest.approx((4 + 1 / 5) / 5)
    assert scores.per_item[("meaning", "de", "acc_en2xx")][0] == pytest.approx(1 / 5)


def test_a_views_with_a_texts_parameter_gets_each_sides_own_texts(tiny_data_dir, embed):
    """The untagged view routes by each text's script, so the task hands a view that asks
    for them the texts of the very rows it embedded, side by side and in order."""
    seen = []

    def views(X, lang, texts):
        seen.append((lang, list(texts)))
        assert len(texts) == len(X)
        return {"meaning": X}

    task = TASKS.get("tatoeba")(languages=["de", "zh"], data_dir=tiny_data_dir,
                                supported=["de", "zh"])
    task.evaluate(embed, views)
    assert [texts for _, texts in seen] == embed.calls
    assert [lang for lang, _ in seen] == ["de", "en", "zh", "en"]
