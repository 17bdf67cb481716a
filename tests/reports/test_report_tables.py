from disembed.evaluation.task_scores import ScoreRow, TaskScores
from disembed.reports.tables import detail_table, format_score, render_tables, summary_table


def _scores(task, meaning, language, main_metric="acc_mean", main_subset="avg:tatoeba-14"):
    rows = [ScoreRow("meaning", "de", main_metric, meaning, 10),
            ScoreRow("language", "de", main_metric, language, 10)]
    avgs = [ScoreRow("meaning", main_subset, main_metric, meaning, 1),
            ScoreRow("language", main_subset, main_metric, language, 1)]
    return TaskScores(task, main_metric, main_subset, rows=rows, averages=avgs)


def test_format_score():
    assert format_score(0.8123) == "81.2"
    assert format_score(-0.0004) == "-0.0"
    assert format_score(float("nan")) == "n/a"
    assert format_score(None) == "-"


def test_summary_table_cells():
    results = [
        ("raw | e5", _scores("tatoeba", 0.912, 0.001)),
        ("raw | e5", _scores("sts17", 0.75, float("nan"), "spearman", "avg:cross-lingual")),
        ("hash", _scores("tatoeba", 0.0011, 0.0011)),
    ]
    table = summary_table(results)
    lines = table.splitlines()
    assert lines[0].startswith("| method | tatoeba meaning (acc_mean, avg:tatoeba-14) |")
    assert lines[2] == "| raw \\| e5 | 91.2 | 0.1 | 75.0 | n/a |"
    assert lines[3] == "| hash | 0.1 | 0.1 | - | - |"


def test_detail_and_full_render():
    results = [("a", _scores("tatoeba", 0.5, 0.25)), ("b", _scores("tatoeba", 1.0, 0.0))]
    table = detail_table(results, "tatoeba")
    assert "| tatoeba acc_mean | a meaning | a language | b meaning | b language |" in table
    assert "| de | 50.0 | 25.0 | 100.0 | 0.0 |" in table
    assert "| avg:tatoeba-14 (n=1) | 50.0 | 25.0 | 100.0 | 0.0 |" in table
    text = render_tables(results)
    assert text.startswith("## Summary") and "## tatoeba" in text
    assert detail_table(results, "sts17") == "(no results for task 'sts17')"
