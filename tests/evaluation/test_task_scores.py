import json
import math

import pytest

from disembed.evaluation import STS17Task, TaskScores
from disembed.evaluation.task_scores import ScoreRow
from disembed.exceptions import ConfigError


def test_json_round_trip_keeps_nan_and_drops_per_item(tiny_data_dir, embed, views, tmp_path):
    scores = STS17Task(["en-de", "en-en"], data_dir=tiny_data_dir).evaluate(embed, views)
    text = scores.to_json(tmp_path / "sts.json")
    assert "NaN" not in text and "null" in text  # strict JSON: nan -> null
    back = TaskScores.from_json(tmp_path / "sts.json")
    assert back.per_item == {}
    assert back.to_dict() == json.loads(text) == scores.to_dict()
    assert back.main_score("meaning") == scores.main_score("meaning")
    assert math.isnan(back.main_score("language"))
    assert TaskScores.from_dict(scores.to_dict()).rows[0] == scores.rows[0]
    assert back.config["tracks"] == ["en-de", "en-en"] and back.data_sizes["en-de"] == 6


def test_main_score_unknown_view_is_a_clear_error():
    s = TaskScores("t", "acc", "avg:x", rows=[ScoreRow("meaning", "de", "acc", 0.5, 3)])
    with pytest.raises(ConfigError, match="no scores for view 'language'"):
        s.main_score("language")
    assert math.isnan(s.main_score("meaning"))  # no such average row


def test_an_undefined_member_makes_its_average_undefined():
    """A track whose correlation is nan (a constant view) makes the average nan: an average
    over fewer tracks is never printed under the full average's name."""
    from disembed.evaluation.task_scores import ScoreRow, average_rows

    rows = [ScoreRow("meaning", "en-de", "spearman", 0.5, 10),
            ScoreRow("meaning", "es-en", "spearman", float("nan"), 10),
            ScoreRow("meaning", "en-en", "spearman", 0.7, 10)]
    out = {r.subset: r for r in average_rows(rows, {"cross": ["en-de", "es-en"],
                                                    "mono": ["en-en", "ar-ar"]}, ["spearman"])}
    assert math.isnan(out["avg:cross"].value) and out["avg:cross"].n == 2
    assert out["avg:mono"].value == 0.7 and out["avg:mono"].n == 1  # ar-ar was not evaluated
