"""The scaling plot draws a point whose seeds all scored the same (issue 46's panel hit it:
the mean of three equal floats landed an ulp above their max, and matplotlib refused the
negative error bar)."""

import pytest

from disembed.reports.scaling_report import plot_task

pytest.importorskip("matplotlib")


def test_equal_seeds_whose_mean_is_an_ulp_outside_the_range_still_plot(tmp_path):
    value = 0.1 + 0.2  # 0.30000000000000004
    row = {"method": "seed-centered", "train_pairs": 5000, "wmt20-qe": value,
           "wmt20-qe_min": 0.3, "wmt20-qe_max": 0.3, "leakage_tatoeba": 0.003,
           "leakage_tatoeba_min": 0.003, "leakage_tatoeba_max": 0.003}
    assert row["wmt20-qe"] > row["wmt20-qe_max"]
    path = plot_task([row], "wmt20-qe", "WMT20 QE", tmp_path / "qe.png")
    assert path.is_file() and path.stat().st_size > 0
