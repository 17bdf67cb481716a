"""Mining with a saved model sends each untagged sentence's script (the script prior), as
the library's ``SavedModel.meaning`` does: ``score_tsv``, ``mine_files``, ``search_files``
and cluster mining's ``encode_shard`` (run in process here: the same task Ray runs, which
reads its own texts) embed an untagged Latin, Cyrillic, Han, Arabic, Greek or letterless
sentence to exactly the library's unit vector. Training languages de, ru, zh, ar with en
(:mod:`script_models`), so a surface that sent ``None`` would give other vectors."""

from __future__ import annotations

import numpy as np
import pytest
from script_models import SCRIPT_TEXTS, library_text, save_script_model, unit

from disembed.mining import MineConfig, mine_files, score_tsv, search_files
from disembed.mining.distributed import InProcess, mine_distributed
from disembed.saved_model import SavedModel

TOL = 1e-5
#: the other side: every text against one in another script
OTHER = SCRIPT_TEXTS[1:] + SCRIPT_TEXTS[:1]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_script_model(tmp_path_factory.mktemp("scripts") / "model")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "src.txt").write_text("\n".join(SCRIPT_TEXTS) + "\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("\n".join(OTHER) + "\n", encoding="utf-8")
    return tmp_path


def cosines(folder, a, b, la=None, lb=None):
    return (unit(library_text(folder, a, la)) * unit(library_text(folder, b, lb))).sum(axis=1)


@pytest.mark.parametrize("langs", [(None, None), ("und", "mul"), ("de", None)])
def test_score_tsv_scores_the_librarys_vectors(folder, tmp_path, langs):
    (tmp_path / "pairs.tsv").write_text(
        "src\ttgt\n" + "".join(f"{a}\t{b}\n"
                                 for a, b in zip(SCRIPT_TEXTS, OTHER, strict=True)),
        encoding="utf-8")
    encoder, model = SavedModel.load(folder)
    score_tsv(tmp_path / "pairs.tsv", encoder, tmp_path / "out.tsv", model=model,
              src_lang=langs[0], tgt_lang=langs[1])
    got = [float(line.split("\t")[0])
           for line in (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    np.testing.assert_allclose(got, cosines(folder, SCRIPT_TEXTS, OTHER, *langs), atol=TOL)


def test_mine_files_embeds_the_librarys_vectors(folder, files):
    encoder, model = SavedModel.load(folder)
    mine_files(files / "src.txt", files / "tgt.txt", encoder, files / "out.tsv",
               run_dir=files / "run", model=model, config=MineConfig(k=2, backend="exact"))
    np.testing.assert_allclose(np.load(files / "run" / "src.npy"),
                               unit(library_text(folder, SCRIPT_TEXTS)), atol=TOL)
    np.testing.assert_allclose(np.load(files / "run" / "tgt.npy"),
                               unit(library_text(folder, OTHER)), atol=TOL)


def test_search_files_embeds_the_librarys_vectors(folder, files):
    encoder, model = SavedModel.load(folder)
    search_files(files / "src.txt", files / "tgt.txt", encoder, files / "hits.tsv",
                 run_dir=files / "run", k=1, model=model, db_lang="und-Hani")
    np.testing.assert_allclose(np.load(files / "run" / "queries.npy"),
                               unit(library_text(folder, SCRIPT_TEXTS)), atol=TOL)
    np.testing.assert_allclose(np.load(files / "run" / "database.npy"),
                               unit(library_text(folder, OTHER, "und-Hani")), atol=TOL)


def test_cluster_mining_embeds_what_local_mining_does(folder, files):
    """``encode_shard`` reads its sentences itself, so it tags them as the driver would."""
    mine_distributed(files / "src.txt", files / "tgt.txt", "hash:16", run_dir=files / "run",
                     config=MineConfig(k=2, backend="exact"), shard_rows=4,
                     model_dir=str(folder), executor=InProcess())
    for side, texts in (("src", SCRIPT_TEXTS), ("tgt", OTHER)):
        shards = sorted((files / "run").glob(f"{side}-*.npy"))
        assert len(shards) == 2
        np.testing.assert_allclose(np.concatenate([np.load(p) for p in shards]),
                                   unit(library_text(folder, texts)), atol=TOL)


def test_a_run_folder_from_before_the_script_prior_is_embedded_again(folder, files):
    """The untagged view's resume key names the script routing: a matrix embedded without
    it (the whole posterior) is not resumed."""
    encoder, model = SavedModel.load(folder)
    cfg = MineConfig(k=2, backend="exact")
    mine_files(files / "src.txt", files / "tgt.txt", encoder, files / "out.tsv",
               run_dir=files / "run", model=model, config=cfg)
    import json

    meta = json.loads((files / "run" / "src.json").read_text())
    assert meta["view"].endswith(":script")
    stale = np.zeros_like(np.load(files / "run" / "src.npy"))
    np.save(files / "run" / "src.npy", stale)
    meta["view"] = meta["view"].rsplit(":", 1)[0] + ":None"  # as an older disembed wrote it
    (files / "run" / "src.json").write_text(json.dumps(meta))
    mine_files(files / "src.txt", files / "tgt.txt", encoder, files / "out.tsv",
               run_dir=files / "run", model=model, config=cfg)
    np.testing.assert_allclose(np.load(files / "run" / "src.npy"),
                               unit(library_text(folder, SCRIPT_TEXTS)), atol=TOL)
