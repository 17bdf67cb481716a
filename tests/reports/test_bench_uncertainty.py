"""The bench report with its uncertainty: each method against mean-centering with a paired
bootstrap interval, item counts, a plot of differences, labels that fit, MTEB's format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from disembed.analysis.significance import compare_scores
from disembed.cli import main
from disembed.results import ExperimentResult, RunResult


@pytest.fixture(scope="module")
def hash_bench(tmp_path_factory):
    from tiny_data import add_full_data, write_tiny_data

    full_data_dir = add_full_data(write_tiny_data(tmp_path_factory.mktemp("data")))
    out = tmp_path_factory.mktemp("bench")
    cache = tmp_path_factory.mktemp("cache")
    import os

    before = os.environ.get("DISEMBED_CACHE_DIR")
    os.environ["DISEMBED_CACHE_DIR"] = str(cache)
    try:
        assert main(["bench", "--encoder", "hash:16", "--languages", "de,zh",
                     "--methods", "baseline,mean-centering,seed", "--pairs-per-language",
                     "40", "--max-epochs", "3", "--out", str(out), "--format", "mteb",
                     "--data-dir", str(full_data_dir), "-q"]) == 0
    finally:
        if before is None:
            os.environ.pop("DISEMBED_CACHE_DIR", None)
        else:
            os.environ["DISEMBED_CACHE_DIR"] = before
    return out


def test_every_method_is_compared_with_mean_centering_and_the_interval_is_recomputable(
        hash_bench):
    result = ExperimentResult.from_json(hash_bench / "bench.json")
    pairs = {(c["a"], c["task"]) for c in result.comparisons}
    methods = ["hash:16 / baseline", "hash:16 / seed"]
    assert pairs == {(m, t) for m in methods for t in ("tatoeba", "sts17", "wmt20-qe")}
    assert {c["b"] for c in result.comparisons} == {"hash:16 / mean-centering"}
    # the same test, recomputed from the saved per-item scores
    runs = {}
    for method in ("seed", "mean-centering"):
        folder = next(p for p in (hash_bench / "hash_16").iterdir() if p.name == method)
        runs[method] = {s.task: s for s in RunResult.load(folder).scores}
    saved = next(c for c in result.comparisons
                 if c["a"] == "hash:16 / seed" and c["task"] == "sts17")
    again = compare_scores(runs["seed"]["sts17"], runs["mean-centering"]["sts17"])
    for key in ("delta", "ci_low", "ci_high", "n_items"):
        assert saved["bootstrap"][key] == pytest.approx(getattr(again.bootstrap, key))
    b = saved["bootstrap"]
    assert b["ci_low"] < b["delta"] < b["ci_high"]


def test_the_report_shows_differences_intervals_and_item_counts(hash_bench):
    report = (hash_bench / "results.md").read_text(encoding="utf-8")
    result = ExperimentResult.from_json(hash_bench / "bench.json")
    assert "## Against hash:16 / mean-centering" in report
    assert "![differences against hash:16 / mean-centering](differences.png)" in report
    assert (hash_bench / "differences.png").stat().st_size > 1000
    c = next(c for c in result.comparisons if c["a"] == "hash:16 / seed"
             and c["task"] == "tatoeba")
    b = c["bootstrap"]
    row = (f"| tatoeba | meaning | hash:16 / seed | {100 * b['score_a']:.1f} | "
           f"{100 * b['score_b']:.1f} | {100 * b['delta']:+.2f} | ")
    assert row in report and f"| {b['n_items']} |" in report
    sizes = result.runs[0].scores[1].data_sizes  # sts17
    assert (f"| sts17 | {len(sizes)} | {sum(sizes.values()):,} |") in report


def test_mteb_result_files_hold_the_meaning_scores_as_fractions(hash_bench):
    """The layout and values; tests/reports/test_mteb_results.py reads them with mteb."""
    result = ExperimentResult.from_json(hash_bench / "bench.json")
    run = next(r for r in result.runs if r.label == "hash:16 / seed")
    sts = next(s for s in run.scores if s.task == "sts17")
    [folder] = [p for p in (hash_bench / "mteb").iterdir() if p.name == "disembed__hash_16_seed"]
    [revision] = list(folder.iterdir())
    data = json.loads((revision / "STS17.json").read_text())
    assert data["task_name"] == "STS17" and data["mteb_version"] is None
    entries = {e["hf_subset"]: e for e in data["scores"]["test"]}
    assert set(entries) == set(sts.subsets())  # one entry per track, no average entry
    assert entries["en-de"]["main_score"] == pytest.approx(sts.get("meaning", "en-de",
                                                                   "spearman"))
    assert entries["en-de"]["cosine_pearson"] == pytest.approx(sts.get("meaning", "en-de",
                                                                       "pearson"))
    assert entries["en-de"]["languages"] == ["eng-Latn", "deu-Latn"]
    meta = json.loads((revision / "model_meta.json").read_text())
    assert meta["name"] == "disembed/hash_16_seed"


def test_summary_value_labels_fit_inside_the_axes(tmp_path):
    """A label of 100.0 and a negative bar's label stay inside their panel."""
    from disembed.evaluation.task_scores import ScoreRow, TaskScores
    from disembed.reports import plots

    captured = {}
    real_save = plots.save_png

    def keep(fig, path):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        captured["boxes"] = [(ax.get_window_extent(renderer),
                              [t.get_window_extent(renderer) for t in ax.texts])
                             for ax in fig.axes]
        return real_save(fig, path)

    def scores(meaning, language):
        rows = [ScoreRow("meaning", "avg:x", "m", meaning, 1),
                ScoreRow("language", "avg:x", "m", language, 1)]
        return TaskScores("t", "m", "avg:x", averages=rows)

    plots.save_png = keep
    try:
        plots.plot_summary([("perfect", scores(1.0, -0.4)), ("other", scores(0.5, 0.02))],
                           tmp_path / "s.png")
    finally:
        plots.save_png = real_save
    for axes_box, texts in captured["boxes"]:
        assert texts
        for t in texts:
            assert axes_box.x0 - 1 <= t.x0 and t.x1 <= axes_box.x1 + 1, (t, axes_box)


def test_no_reference_no_comparison_section(full_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "b"
    assert main(["bench", "--encoder", "hash:16", "--languages", "de", "--methods",
                 "baseline", "--pairs-per-language", "40", "--no-floor", "--out", str(out),
                 "--data-dir", str(full_data_dir), "-q"]) == 0
    assert ExperimentResult.from_json(out / "bench.json").comparisons == []
    report = (out / "results.md").read_text(encoding="utf-8")
    assert "## Against" not in report and "## Test items" in report
    assert not np.any([p.name == "differences.png" for p in out.iterdir()])


def test_an_interval_that_excludes_zero_is_bold_for_losses_as_for_gains():
    """Issue 32: bold says "the interval excludes 0", whichever side of 0 it lies on."""
    from disembed.reports.bench_report import _comparison_section

    def comparison(method, low, high):
        return {"task": "sts17", "view": "meaning", "a": method, "b": "mean-centering",
                "bootstrap": {"score_a": 0.5, "score_b": 0.5, "delta": (low + high) / 2,
                              "ci_low": low, "ci_high": high, "n_items": 300,
                              "n_resamples": 2000}}

    result = ExperimentResult("bench", {}, comparisons=[
        comparison("better", 0.01, 0.03), comparison("worse", -0.04, -0.02),
        comparison("unclear", -0.01, 0.02)])
    rows = {line.split(" | ")[2]: line for line in _comparison_section(result, False)
            if line.startswith("| sts17 |")}
    assert "**[+1.00, +3.00]**" in rows["better"] and "**[-4.00, -2.00]**" in rows["worse"]
    assert "**" not in rows["unclear"]
