"""The analyses on the real data with USE-multilingual v3 (slow: encodes a few thousand
sentences on first use; the shared embedding cache makes reruns fast)."""

import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("DISEMBED_DATA_DIR", Path(__file__).parents[3] / "shared" / "data"))

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (DATA / "muse_dictionaries").is_dir(),
                                 reason="needs the real data directory")]


def test_real_analyses_with_use_m3(tmp_path):
    from disembed import AnalysisConfig, run_analyses
    from disembed.experiment import Workspace

    report = run_analyses(AnalysisConfig(
        encoder="use-m3", methods=["baseline", "mean-centering", "seed"],
        languages=["de", "fr", "zh"], pairs_per_language=300, max_eval_items=200,
        analyses=["leakage", "codeswitch", "geometry", "significance"], sample_pairs=300,
        probe_per_language=60, n_resamples=200, max_epochs=5,
        workspace=Workspace(data_dir=str(DATA)),
        out_dir=str(tmp_path)))
    runs = {r.label: r.measurements for r in report.runs}
    raw = runs["baseline"]["probe"]["raw"]
    assert raw["accuracy"] > raw["chance"] + 0.3  # the raw embedding knows the language
    # per-language means tell the training languages apart; the other Tatoeba-14 languages
    # of the probe take the nearest training language's mean (inductive, nothing from the
    # probe's own rows), so they are not told apart: well above chance, far from 1
    language = runs["mean-centering"]["probe"]["language"]
    assert language["accuracy"] > language["chance"] + 0.2
    assert len(runs["seed"]["trajectory"]) >= 1
    stats = report.extras["codeswitch_stats"]
    assert stats and all(v["switched"] > 0.5 * v["items"] for v in stats.values())
    assert report.comparisons and (tmp_path / "report.html").is_file()
