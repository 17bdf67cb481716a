"""The seeded subsample of graded tasks (STS17, WMT20 QE) at its default size: every kept item
keeps its own gold score, and the sample is the documented one (issue 32).

The tiny test data has fewer rows than the default subsample (300 per subset), so it never
subsamples. Here each subset has more rows than that, and the embeddings are built so that
the cosine of pair ``i`` is a known function of its gold score: a correct subsample scores a
correlation of exactly 1, a subsample that pairs the kept items with other items' gold
scores (or texts) scores near 0.
"""

import zlib

import numpy as np
import pytest

from disembed.evaluation import STS17Task, WMT20QETask
from disembed.experiment.spec import DEFAULT_MAX_EVAL_ITEMS

ROWS = {"en-de": 1000, "ro-en": 700}  # QE pairs: more rows than the default subsample (300)
STS_ROWS = {"en-de": 1000, "es-en": 700}


def _unit_angle(c: float) -> np.ndarray:
    return np.array([c, np.sqrt(1.0 - c * c), 0.0], dtype=np.float64)


class PairEmbed:
    """``texts -> (n, 3)``: every ``"src <name> <i>"`` is e1 and ``"tgt <name> <i>"`` has cosine
    ``cos[name][i]`` with it, so a pair's cosine is a fixed function of its own row. Records
    the row numbers of every call, by name."""

    def __init__(self):
        self.cos: dict[str, np.ndarray] = {}
        self.rows: dict[str, list[np.ndarray]] = {}

    def __call__(self, texts):
        parts = [t.split(" ") for t in texts]
        name = parts[0][1]
        self.rows.setdefault(name, []).append(np.array([int(p[2]) for p in parts]))
        return np.stack([_unit_angle(1.0) if side == "src" else
                         _unit_angle(float(self.cos[n][int(i)])) for side, n, i in parts]
                        ).astype(np.float32)


def _write_qe(folder, pair, gold):
    head = "index\toriginal\ttranslation\tscores\tmean\tz_scores\tz_mean\tmodel_scores"
    lines = [head] + [f"{i}\tsrc qe:{pair} {i}\ttgt qe:{pair} {i}\t[1]\t50.0\t[0.1]\t{g!r}\t0.0"
                      for i, g in enumerate(gold)]
    (folder / f"{pair}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_sts(folder, track, gold):
    lines = ["sentence1\tsentence2\tscore"] + [f"src sts:{track} {i}\ttgt sts:{track} {i}\t{g!r}"
                                                for i, g in enumerate(gold)]
    (folder / f"{track}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def graded(tmp_path):
    """A data folder with two QE pairs and two STS17 tracks of 1000 and 700 rows, their gold
    scores by ``"qe:<pair>"`` / ``"sts:<track>"``, and an embed whose cosine of pair ``i`` is
    linear in its gold (so both correlations of a correct subsample are exactly 1)."""
    rng = np.random.default_rng(32)
    embed, gold = PairEmbed(), {}
    qe = tmp_path / "wmt20_mlqe" / "test"
    sts = tmp_path / "sts17"
    qe.mkdir(parents=True)
    sts.mkdir()
    for pair, n in ROWS.items():
        gold[f"qe:{pair}"] = np.round(rng.standard_normal(n), 4)
        _write_qe(qe, pair, gold[f"qe:{pair}"].tolist())
    for track, n in STS_ROWS.items():
        gold[f"sts:{track}"] = rng.integers(0, 11, n) / 2  # 0, 0.5, ..., 5: ties, as in STS17
        _write_sts(sts, track, gold[f"sts:{track}"].tolist())
    for name, g in gold.items():
        embed.cos[name] = -0.9 + 1.8 * (g - g.min()) / (g.max() - g.min())  # in [-0.9, 0.9]
    return tmp_path, gold, embed


def _documented_sample(n: int, name: str, seed: int = 0, k: int = DEFAULT_MAX_EVAL_ITEMS):
    """The published protocol's items: ``k`` of ``n`` drawn by (seed, subset name), sorted."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])
    return np.sort(rng.choice(n, size=k, replace=False))


def test_qe_subsample_keeps_each_items_own_gold(graded):
    root, gold, embed = graded
    task = WMT20QETask("test", pairs=list(ROWS), max_items=DEFAULT_MAX_EVAL_ITEMS,
                       data_dir=str(root))
    scores = task.evaluate(embed)
    assert scores.data_sizes == dict.fromkeys(ROWS, DEFAULT_MAX_EVAL_ITEMS)
    for pair, n in ROWS.items():
        kept = _documented_sample(n, pair)
        src_rows, tgt_rows = embed.rows[f"qe:{pair}"]
        np.testing.assert_array_equal(src_rows, kept)  # both sides: the same, documented rows
        np.testing.assert_array_equal(tgt_rows, kept)
        # the kept items' own gold scores and cosines, in file order
        np.testing.assert_array_equal(scores.per_item[("meaning", pair, "gold")],
                                      gold[f"qe:{pair}"][kept])
        np.testing.assert_allclose(scores.per_item[("meaning", pair, "cosine")],
                                   embed.cos[f"qe:{pair}"][kept], atol=1e-6)
        # cosine is linear in the gold, item by item: both correlations are exactly 1
        assert scores.get("meaning", pair, "pearson") == pytest.approx(1.0, abs=1e-6)
        assert scores.get("meaning", pair, "spearman") == pytest.approx(1.0, abs=1e-6)


def test_sts_subsample_keeps_each_items_own_gold(graded):
    root, gold, embed = graded
    scores = STS17Task(list(STS_ROWS), max_items=DEFAULT_MAX_EVAL_ITEMS,
                       data_dir=str(root)).evaluate(embed)
    assert scores.data_sizes == dict.fromkeys(STS_ROWS, DEFAULT_MAX_EVAL_ITEMS)
    for track, n in STS_ROWS.items():
        kept = _documented_sample(n, track)
        np.testing.assert_array_equal(embed.rows[f"sts:{track}"][0], kept)
        np.testing.assert_array_equal(scores.per_item[("meaning", track, "gold")],
                                      gold[f"sts:{track}"][kept])
        assert scores.get("meaning", track, "spearman") == pytest.approx(1.0, abs=1e-6)
        assert scores.get("meaning", track, "pearson") == pytest.approx(1.0, abs=1e-6)


def test_every_subset_draws_its_own_items(graded):
    """Subsets of one size draw different rows (the sample is keyed by the subset's name);
    another task's subset of the same name and size draws the same rows; another seed,
    others."""
    root, _, embed = graded
    WMT20QETask("test", pairs=["en-de"], max_items=300, data_dir=str(root)).evaluate(embed)
    STS17Task(["en-de"], max_items=300, data_dir=str(root)).evaluate(embed)
    qe_rows, sts_rows = embed.rows["qe:en-de"][0], embed.rows["sts:en-de"][0]
    np.testing.assert_array_equal(qe_rows, sts_rows)  # same name, same n: same rows
    other = _documented_sample(1000, "es-en")
    assert len(np.intersect1d(other, qe_rows)) < 150  # same n, other name: other rows
    WMT20QETask("test", pairs=["en-de"], max_items=300, seed=1, data_dir=str(root)
                ).evaluate(embed)
    assert not np.array_equal(embed.rows["qe:en-de"][-1], qe_rows)
