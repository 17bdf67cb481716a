"""``score``, ``mine`` and ``search`` take a saved model alike: its meaning part, each
sentence's language identified unless the two sides are named.

Bugs feared: ``score --model`` scoring raw embeddings (the model ignored), the named
languages ignored (identified anyway), and ``search --model`` demanding tags.
"""

from __future__ import annotations

import numpy as np
import pytest

from disembed import make_method
from disembed.cli import main
from disembed.encoders import HashEncoder
from disembed.mining import score_tsv, search_files
from disembed.retrieval.knn import normalize_rows

PAIRS = [("Guten Morgen.", "Good morning."), ("Danke sehr.", "Thank you."),
         ("Wie spät ist es?", "What time is it?"), ("Ich lese.", "I read.")]


@pytest.fixture
def model_dir(tmp_path, monkeypatch):
    """A mean-centering model on hash:16 vectors with an offset per language (of the size
    of the vectors themselves, so that which mean is subtracted matters)."""
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    offset = np.random.default_rng(0).standard_normal(16) * 0.25
    meaning = HashEncoder(16).encode([f"training sentence {i}" for i in range(80)])
    src = (meaning + offset).astype(np.float32)
    tgt = (meaning - offset).astype(np.float32)
    model = make_method("mean-centering").fit(src, tgt, "de", "en")
    model.save(tmp_path / "model")
    (tmp_path / "pairs.tsv").write_text(
        "src\ttgt\n" + "".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    return tmp_path


def _scores(path):
    return np.array([float(line.split("\t")[0])
                     for line in path.read_text(encoding="utf-8").splitlines()[1:]])


def _meaning_cosines(model, languages):
    enc = HashEncoder(16)
    a = enc.encode([p[0] for p in PAIRS])
    b = enc.encode([p[1] for p in PAIRS])
    a, b = (normalize_rows(model.meaning(x, lang))
            for x, lang in zip((a, b), languages, strict=True))
    return np.einsum("pd,pd->p", a.astype(np.float64), b.astype(np.float64))


def test_score_with_a_model_scores_the_meaning_part(model_dir):
    from disembed import load_disentangler

    model = load_disentangler(model_dir / "model")
    out_raw, out_m, out_tag = (model_dir / n for n in ("raw.tsv", "m.tsv", "tag.tsv"))
    enc = HashEncoder(16)
    assert score_tsv(model_dir / "pairs.tsv", enc, out_raw) == 4
    assert score_tsv(model_dir / "pairs.tsv", enc, out_m, model=model) == 4
    assert score_tsv(model_dir / "pairs.tsv", enc, out_tag, model=model, src_lang="deu",
                     tgt_lang="en") == 4
    np.testing.assert_allclose(_scores(out_m), _meaning_cosines(model, (None, None)), atol=1e-5)
    np.testing.assert_allclose(_scores(out_tag), _meaning_cosines(model, ("de", "en")),
                               atol=1e-5)
    assert not np.allclose(_scores(out_raw), _scores(out_tag), atol=1e-3)  # the model acts


def test_named_languages_are_used_not_identified(model_dir):
    from disembed import load_disentangler

    model = load_disentangler(model_dir / "model")
    enc = HashEncoder(16)
    score_tsv(model_dir / "pairs.tsv", enc, model_dir / "a.tsv", model=model, src_lang="de",
              tgt_lang="en")
    score_tsv(model_dir / "pairs.tsv", enc, model_dir / "b.tsv", model=model, src_lang="en",
              tgt_lang="de")  # the wrong way round: other means are subtracted
    assert not np.allclose(_scores(model_dir / "a.tsv"), _scores(model_dir / "b.tsv"),
                           atol=1e-3)


def test_score_cli_takes_the_model_and_its_encoder(model_dir, capsys):
    args = ["score", str(model_dir / "pairs.tsv"), "--encoder", "hash:16", "--model",
            str(model_dir / "model")]
    assert main([*args, "--out", str(model_dir / "cli.tsv"), "--src-lang", "de",
                 "--tgt-lang", "en"]) == 0
    assert "meaning part of" in capsys.readouterr().out
    from disembed import load_disentangler

    expected = _meaning_cosines(load_disentangler(model_dir / "model"), ("de", "en"))
    np.testing.assert_allclose(_scores(model_dir / "cli.tsv"), expected, atol=1e-5)


def test_search_with_a_model_needs_no_tags_like_mine(model_dir, capsys):
    q, db = model_dir / "q.txt", model_dir / "db.txt"
    q.write_text("".join(a + "\n" for a, _ in PAIRS), encoding="utf-8")
    db.write_text("".join(b + "\n" for _, b in PAIRS), encoding="utf-8")
    base = ["search", str(q), str(db), "--encoder", "hash:16", "--model",
            str(model_dir / "model"), "-k", "2"]
    assert main([*base, "--out", str(model_dir / "untagged.tsv")]) == 0
    assert main([*base, "--out", str(model_dir / "tagged.tsv"), "--src-lang", "de",
                 "--tgt-lang", "en"]) == 0
    for name in ("untagged.tsv", "tagged.tsv"):
        assert len((model_dir / name).read_text(encoding="utf-8").splitlines()) == 1 + 4 * 2
    from disembed import load_disentangler

    done = search_files(q, db, HashEncoder(16), model_dir / "api.tsv",
                        run_dir=model_dir / "api.run", k=1,
                        model=load_disentangler(model_dir / "model"))
    assert done.queries == 4
