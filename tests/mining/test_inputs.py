"""Several files per side, plain or gzip, mine like one file; ids name file and line."""

from __future__ import annotations

import gzip

import pytest

from disembed.encoders import HashEncoder
from disembed.exceptions import DataError
from disembed.mining import MineConfig, mine_files
from disembed.mining.inputs import expand_inputs, gather_inputs

WORDS = [f"sentence number {i} about {w}" for i, w in
         enumerate(["cats", "dogs", "rain", "bread", "music", "trains", "snow", "tea"])]


def rows(path):
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]


def test_gzip_and_several_files_mine_the_same_pairs_as_one_file(tmp_path):
    one = tmp_path / "all.txt"
    one.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    with gzip.open(tmp_path / "a.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(WORDS[:3]) + "\n")
    (tmp_path / "b.txt").write_text("\n".join(WORDS[3:]) + "\n", encoding="utf-8")
    tgt = tmp_path / "t.txt"
    tgt.write_text("\n".join(reversed(WORDS)) + "\n", encoding="utf-8")
    cfg = MineConfig(k=2)
    mine_files(one, tgt, HashEncoder(dim=32), tmp_path / "one.tsv", run_dir=tmp_path / "r1",
               config=cfg)
    many = f"{tmp_path}/a.txt.gz,{tmp_path}/b.txt"
    mine_files(many, tgt, HashEncoder(dim=32), tmp_path / "many.tsv", run_dir=tmp_path / "r2",
               config=cfg)
    a, b = rows(tmp_path / "one.tsv"), rows(tmp_path / "many.tsv")
    assert [r[:3] + r[4:] for r in a] == [r[:3] + r[4:] for r in b]  # scores, texts, tgt ids
    ids = {r[1]: r[3] for r in b}
    assert ids[WORDS[0]] == "a.txt:1" and ids[WORDS[4]] == "b.txt:2"


def test_globs_expand_in_order_and_a_missing_file_is_named(tmp_path):
    for name in ("x2.tsv", "x1.tsv"):
        (tmp_path / name).write_text(f"{name}-1\thello\n", encoding="utf-8")
    assert [p.name for p in expand_inputs(str(tmp_path / "x*.tsv"))] == ["x1.tsv", "x2.tsv"]
    path, fmt = gather_inputs(str(tmp_path / "x*.tsv"), tmp_path / "run", "src")
    assert fmt == "tsv" and path.read_text() == "x1.tsv-1\thello\nx2.tsv-1\thello\n"
    with pytest.raises(DataError, match="nope.txt: no such file"):
        expand_inputs(f"{tmp_path}/x1.tsv,{tmp_path}/nope.txt")
    with pytest.raises(DataError, match="no file matches this pattern"):
        expand_inputs(str(tmp_path / "y*.txt"))
    single = tmp_path / "x1.tsv"
    assert gather_inputs(single, tmp_path / "run", "tgt") == (single, "auto")  # not copied


def test_a_broken_gzip_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes(b"not gzip at all\n")
    with pytest.raises(DataError, match="cannot be read as gzip"):
        gather_inputs(bad, tmp_path / "run", "src")
