"""``disembed analyse`` end to end on the tiny data with the hash encoder."""

import json
import re

import pytest

from disembed.cli import main


@pytest.fixture
def env(full_data_dir, tmp_path, monkeypatch):
    folder = full_data_dir / "muse_dictionaries"
    folder.mkdir()
    (folder / "en-de.tsv").write_text("en\tde\nhello\thallo\nthanks\tdanke\nyes\tja\nno\tnein\n"
                                      "good\tgut\n", encoding="utf-8")
    (folder / "en-zh.tsv").write_text("en\tzh\nhello\t你好\nthanks\t谢谢\nyes\t是\nno\t不\n",
                                      encoding="utf-8")
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_analyse_saved_model_and_trained_method(env, capsys):
    pytest.importorskip("matplotlib")
    model_dir = env / "seed-model"
    assert main(["train", "--method", "seed", "--encoder", "hash:16", "--languages", "de,zh",
                 "--pairs-per-language", "40", "--max-epochs", "2", "--out", str(model_dir)]) == 0
    out = env / "analysis"
    assert main(["analyse", "--model", str(model_dir), "--methods", "baseline,seed",
                 "--languages", "de,zh", "--pairs-per-language", "40", "--max-epochs", "2",
                 "--tatoeba-languages", "de,zh", "--truncation-ks", "4,8",
                 "--n-resamples", "50", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith("report.html")
    report = (out / "analysis.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report)
    assert {"tradeoff.png", "geometry.png", "codeswitch.png", "truncation-tatoeba.png"} <= set(
        images)
    assert sum(name.startswith("projection-") for name in images) == 3
    for name in images:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text(encoding="utf-8")  # self-contained: images inlined
    assert page.count('src="data:image/png;base64,') == len(images) and "<table>" in page
    for section in ("## Semantic leakage", "## Significance", "## Geometry",
                    "## Code-switching robustness", "## Embedding dimensionality"):
        assert section in report
    data = json.loads((out / "analysis.json").read_text())
    labels = [r["label"] for r in data["runs"]]
    assert labels == ["baseline", "seed", "seed (seed-model)"]
    trained = data["runs"][1]["measurements"]
    assert [r["epoch"] for r in trained["trajectory"]] == [1, 2]
    assert set(trained["probe"]) == {"raw", "meaning", "language"}
    assert data["comparisons"] and all("p_value" in c["bootstrap"] for c in data["comparisons"])
    assert data["runs"][2]["measurements"]["trajectory"] == []  # a loaded model: no epochs


def test_analyse_rejects_unknown_analysis(env, capsys):
    assert main(["analyse", "--encoder", "hash:16", "--analyses", "leakage,geometri"]) == 2
    assert "unknown analyses ['geometri']" in capsys.readouterr().err


def test_significance_over_a_bench_folder(env, capsys):
    bench = env / "bench"
    assert main(["bench", "--encoder", "hash:16", "--languages", "de,zh", "--pairs-per-language",
                 "40", "--max-epochs", "2", "--methods", "baseline,mean-centering",
                 "--tasks", "tatoeba,sts17", "--tatoeba-languages", "de,zh", "--no-floor",
                 "--out", str(bench)]) == 0
    assert (bench / "hash_16" / "baseline" / "items.npz").is_file()
    capsys.readouterr()
    assert main(["analyse", "--bench", str(bench), "--n-resamples", "50",
                 "--out", str(env / "sig")]) == 0
    text = (env / "sig" / "significance.md").read_text(encoding="utf-8")
    assert "hash_16/baseline" in text and "hash_16/mean-centering" in text and "p perm" in text
    rows = json.loads((env / "sig" / "significance.json").read_text())
    assert {r["task"] for r in rows} == {"tatoeba", "sts17"}
