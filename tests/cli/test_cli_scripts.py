"""``score``, ``mine`` and ``search --model`` send each untagged sentence's script (the
script prior): the vectors they score and search are the library's
``SavedModel.meaning(texts)`` for untagged Latin, Cyrillic, Han, Arabic, Greek and
letterless sentences, and ``--src-lang und-Hani`` is taken. Training languages de, ru, zh,
ar with en (:mod:`script_models`), so a verb that sent ``None`` would give other vectors."""

from __future__ import annotations

import numpy as np
import pytest
from script_models import SCRIPT_TEXTS, library_text, save_script_model, unit

from disembed.cli import main

TOL = 1e-5
OTHER = SCRIPT_TEXTS[1:] + SCRIPT_TEXTS[:1]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_script_model(tmp_path_factory.mktemp("scripts") / "model")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "src.txt").write_text("\n".join(SCRIPT_TEXTS) + "\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("\n".join(OTHER) + "\n", encoding="utf-8")
    (tmp_path / "pairs.tsv").write_text(
        "src\ttgt\n" + "".join(f"{a}\t{b}\n" for a, b in zip(SCRIPT_TEXTS, OTHER, strict=True)),
        encoding="utf-8")
    return tmp_path


def run(files, *args):
    assert main([*map(str, args), "-q", "--cache-dir", str(files / "cache")]) == 0


@pytest.mark.parametrize("langs", [(), ("--src-lang", "und"), ("--src-lang", "und-Hani")])
def test_score_with_a_model_scores_the_librarys_untagged_vectors(folder, files, langs):
    run(files, "score", files / "pairs.tsv", "--model", folder, "--out", files / "s.tsv",
        *langs)
    got = [float(line.split("\t")[0])
           for line in (files / "s.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    src_lang = "und-Hani" if "und-Hani" in langs else None
    want = (unit(library_text(folder, SCRIPT_TEXTS, src_lang))
            * unit(library_text(folder, OTHER))).sum(axis=1)
    np.testing.assert_allclose(got, want, atol=TOL)


def test_mine_with_a_model_embeds_the_librarys_untagged_vectors(folder, files):
    run(files, "mine", files / "src.txt", files / "tgt.txt", "--model", folder, "-k", "2",
        "--backend", "exact", "--out", files / "m.tsv")
    for name, texts in (("src", SCRIPT_TEXTS), ("tgt", OTHER)):
        np.testing.assert_allclose(np.load(files / "m.tsv.run" / f"{name}.npy"),
                                   unit(library_text(folder, texts)), atol=TOL)


def test_search_with_a_model_embeds_the_librarys_untagged_vectors(folder, files):
    run(files, "search", files / "src.txt", files / "tgt.txt", "--model", folder, "-k", "1",
        "--backend", "exact", "--out", files / "h.tsv")
    rows = [line.split("\t") for line in
            (files / "h.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    q = unit(library_text(folder, SCRIPT_TEXTS))
    db = unit(library_text(folder, OTHER))
    np.testing.assert_allclose(np.load(files / "h.tsv.run" / "queries.npy"), q, atol=TOL)
    np.testing.assert_allclose(np.load(files / "h.tsv.run" / "database.npy"), db, atol=TOL)
    np.testing.assert_allclose([float(r[2]) for r in rows], (q @ db.T).max(axis=1), atol=TOL)
