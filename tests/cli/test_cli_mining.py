"""The mine, score and search verbs end to end with the hash encoder."""

import pytest

from disembed.cli import main

SRC = [f"s{i}\tSatz {i}" for i in range(20)]
TGT = [f"t{i}\tSatz {i}" for i in range(10, 30)]


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "s.tsv").write_text("\n".join(SRC) + "\n", encoding="utf-8")
    (tmp_path / "t.tsv").write_text("\n".join(TGT) + "\n", encoding="utf-8")
    return tmp_path


def table(path):
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def test_mine_then_score_then_search(files, capsys):
    out = files / "m.tsv"
    assert main(["mine", str(files / "s.tsv"), str(files / "t.tsv"), "--out", str(out),
                 "--encoder", "hash:64", "--threshold", "1.5", "--mode", "intersection"]) == 0
    assert "10 pairs" in capsys.readouterr().out
    rows = table(out)
    assert {(r[3], r[4]) for r in rows[1:]} == {(f"s{i}", f"t{i}") for i in range(10, 20)}
    assert (files / "m.tsv.run" / "src.npy").is_file()

    assert main(["score", str(out), "--out", str(files / "sc.tsv"), "--encoder", "hash:64"]) == 0
    scored = table(files / "sc.tsv")
    assert scored[0] == ["score", "src", "tgt", "src_id", "tgt_id"]
    assert all(abs(float(r[0]) - 1.0) < 1e-5 for r in scored[1:])  # identical sentences

    assert main(["search", str(files / "s.tsv"), str(files / "t.tsv"), "--out",
                 str(files / "q.tsv"), "--encoder", "hash:64", "-k", "3"]) == 0
    hits = table(files / "q.tsv")
    assert len(hits) == 1 + 20 * 3
    top = {r[0]: r[3] for r in hits[1:] if r[1] == "1"}
    assert all(top[f"s{i}"] == f"t{i}" for i in range(10, 20))


def test_mine_reports_bad_input(files, capsys):
    (files / "bad.txt").write_text("eins\n\nzwei\n", encoding="utf-8")
    assert main(["mine", str(files / "bad.txt"), str(files / "t.tsv"), "--out",
                 str(files / "m.tsv"), "--encoder", "hash:8"]) == 2
    assert "bad.txt:2: empty sentence" in capsys.readouterr().err
    # s.tsv has no header row: told there is one, score names the column it lacks and how
    # to fix it (without --header it reads the first two columns, as filter does)
    assert main(["score", str(files / "s.tsv"), "--out", str(files / "x.tsv"),
                 "--encoder", "hash:8", "--header", "yes"]) == 2
    err = capsys.readouterr().err
    assert "no column named 'src'" in err and "--src-col 1 --tgt-col 2" in err
    assert not (files / "x.tsv").exists()


def test_mine_with_a_saved_model_meaning_view(files, capsys):
    import numpy as np

    from disembed import make_method

    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((60, 64)), rng.standard_normal((60, 64))
    model = make_method("mean-centering").fit(src.astype(np.float32), tgt.astype(np.float32),
                                              "de", "en")
    model.save(files / "model")
    args = ["mine", str(files / "s.tsv"), str(files / "t.tsv"), "--out", str(files / "m.tsv"),
            "--encoder", "hash:64", "--model", str(files / "model"), "--mode", "intersection"]
    assert main([*args, "--out", str(files / "untagged.tsv")]) == 0  # languages identified
    assert main([*args, "--out", str(files / "corpus.tsv"), "--center", "corpus"]) == 0
    assert main([*args, "--src-lang", "de", "--tgt-lang", "en", "--threshold", "1.3"]) == 0
    ids = {(r[3], r[4]) for r in table(files / "m.tsv")[1:]}
    assert {(f"s{i}", f"t{i}") for i in range(10, 20)} <= ids
    meta = (files / "m.tsv.run" / "src.json").read_text()
    assert '"view": "meaning:' in meta
