"""Issue 48.7, "a non-finite value written into metadata another tool reads": a model card's
model-index (read by the Hugging Face Hub) and MTEB's result files (read by the MTEB
leaderboard) never hold NaN or inf; a missing score is left out (card) or null (MTEB)."""

from __future__ import annotations

import json
import math

import pytest

from disembed.evaluation import TASKS
from disembed.evaluation.task_scores import ScoreRow, TaskScores


def _scores(value: float) -> list[TaskScores]:
    meta = TASKS.get("sts17").metadata
    return [TaskScores("sts17", meta.main_metric, meta.main_subset, averages=[
        ScoreRow("meaning", meta.main_subset, meta.main_metric, value, 2)],
        data_sizes={"en-de": 9, "es-en": 9})]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_score_is_left_out_of_the_cards_model_index(value):
    pytest.importorskip("huggingface_hub")
    from disembed.serving.model_card import card_metadata, eval_results

    assert eval_results(_scores(value)) == []
    text = card_metadata({"method": "seed", "languages": ["de"], "base_model": None},
                         _scores(value))
    assert "nan" not in text.lower() and "inf" not in text.lower(), text
    assert len(eval_results(_scores(0.75))) == 1  # a finite one is kept


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_mteb_result_files_write_a_non_finite_score_as_null(value):
    from disembed.util.jsonsafe import dumps_json

    text = dumps_json({"main_score": value, "scores": [value, 0.5]})
    assert json.loads(text) == {"main_score": None, "scores": [None, 0.5]}
    assert "NaN" not in text and "Infinity" not in text
