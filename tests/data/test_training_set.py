import pytest

from disembed.data.training_set import build_training_set
from disembed.exceptions import ConfigError


@pytest.fixture
def data_dir(tmp_path):
    root = tmp_path / "data"
    (root / "parallel" / "wmt_newstest").mkdir(parents=True)
    (root / "parallel" / "tatoeba_challenge_v2021-08-07").mkdir()
    (root / "tatoeba").mkdir()
    (root / "sts17").mkdir()
    (root / "wmt20_mlqe" / "test").mkdir(parents=True)
    rows = ["testset\ten\tde"] + [f"nt\tEnglish {i}\tDeutsch {i}" for i in range(30)]
    rows.append("nt\tEnglish 0\tDeutsch 0")  # duplicate pair
    (root / "parallel/wmt_newstest/en-de.tsv").write_text("\n".join(rows) + "\n")
    flags = "en\tdeu\tlabel\tpair_in_laser_tatoeba_test\tsent_in_laser_tatoeba_test"
    (root / "parallel/tatoeba_challenge_v2021-08-07/en-deu.tsv").write_text(
        f"{flags}\nHello\tHallo\tdeu\t1\t0\nTom ran\tTom rannte\tdeu\t0\t0\n"
        "Good night\tGute Nacht\tdeu\t0\t1\n")  # the German sentence is a Tatoeba test one
    (root / "tatoeba/tatoeba.deu-eng.deu").write_text("Deutsch 1\n")
    (root / "tatoeba/tatoeba.deu-eng.eng").write_text("Something\n")
    (root / "sts17/en-de.tsv").write_text("sentence1\tsentence2\tscore\nENGLISH 2\tx\t1.0\n")
    (root / "wmt20_mlqe/test/en-de.tsv").write_text(
        "index\toriginal\ttranslation\tz_mean\n0\tEnglish 3\tDeutsch 3\t0.1\n")
    return root


def test_overlaps_and_duplicates_are_removed_and_reported(data_dir):
    ts = build_training_set(["deu"], None, data_dir=data_dir)
    rep = ts.languages[0]
    assert rep.per_source["wmt_newstest"] == 31 and rep.per_source["tatoeba_challenge"] == 1
    # the default keeps out every evaluation set a registered task declares
    assert rep.removed_overlap == {"tatoeba": 1, "sts17": 1, "wmt20-qe": 1, "bucc2018": 0}
    assert rep.removed_duplicates == 1
    texts = set(ts.pairs.src) | set(ts.pairs.tgt)
    assert not {"Deutsch 1", "English 2", "English 3", "Hallo", "Gute Nacht"} & texts
    # every pair is (x, English), whichever column order its file has
    assert ("Tom rannte", "Tom ran") in set(zip(ts.pairs.src, ts.pairs.tgt, strict=True))
    assert ("Deutsch 5", "English 5") in set(zip(ts.pairs.src, ts.pairs.tgt, strict=True))
    assert set(ts.pairs.src_lang) == {"de"} and set(ts.pairs.tgt_lang) == {"en"}
    assert rep.used == len(ts.pairs) == 28  # 32 - 3 overlaps - 1 duplicate
    assert "removed 3 pairs" in ts.summary()


def test_sample_is_seeded_and_capped(data_dir):
    a = build_training_set(["de"], 10, data_dir=data_dir, seed=1)
    b = build_training_set(["de"], 10, data_dir=data_dir, seed=1)
    c = build_training_set(["de"], 10, data_dir=data_dir, seed=2)
    assert a.pairs.src == b.pairs.src and len(a.pairs) == 10
    assert a.pairs.src != c.pairs.src


def test_missing_language_and_bad_dir_are_clear(data_dir, tmp_path):
    with pytest.raises(ConfigError, match="no training pairs found for 'fr'"):
        build_training_set(["fr"], 10, data_dir=data_dir)
    with pytest.raises(ConfigError, match="No data directory found"):
        build_training_set(["de"], 10, data_dir=tmp_path / "nowhere")


def test_held_out_pairs_are_never_trained_on_and_sizes_are_nested(data_dir):
    """The module's promise: the last H pairs of the seeded order are held out at every size,
    and each training set is a prefix of the next larger one (the scaling study's sizes)."""
    sizes = [5, 10, None]
    sets = [build_training_set(["de"], n, data_dir=data_dir, seed=3, holdout_per_language=6)
            for n in sizes]

    def pairs(p):
        return list(zip(p.src, p.tgt, strict=True))

    held = pairs(sets[0].heldout)
    assert len(held) == 6 and all(pairs(s.heldout) == held for s in sets)
    assert [len(s.pairs) for s in sets] == [5, 10, 28 - 6]
    for s in sets:
        assert not set(pairs(s.pairs)) & set(held)
        assert (s.languages[0].used, s.languages[0].held_out) == (len(s.pairs), 6)
    for small, big in zip(sets[:-1], sets[1:], strict=True):
        assert pairs(big.pairs)[: len(small.pairs)] == pairs(small.pairs)
    with pytest.raises(ConfigError, match="too few to hold out"):
        build_training_set(["de"], 5, data_dir=data_dir, holdout_per_language=27)
