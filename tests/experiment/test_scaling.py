"""The scaling study on tiny data: nested sizes, seeds for trained recipes only, one run for
data-free methods, comparisons against the reference, the report and its reuse."""

import json

import pytest

from disembed.cli import main
from disembed.evaluation.base import ScoreRow
from disembed.evaluation.task_scores import TaskScores
from disembed.experiment.scaling import ScalingConfig, _language_split

#: the recipe the end-to-end study trains: one that uses a language, so it has an untagged view
SC = "seed-centered"


@pytest.fixture
def env(full_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_points_seed_only_trained_recipes_and_share_data_free_runs():
    config = ScalingConfig(encoder="hash:16", methods=["baseline", "mean-centering", "seed"],
                           sizes=[20, None], seeds=[0, 1], languages=["de", "zh"],
                           holdout_per_language=5)
    points = config.points()
    assert [(p.size, p.method, p.spec.seed) for p in points] == [
        ("20", "baseline", 0), ("20", "mean-centering", 0), ("20", "seed", 0), ("20", "seed", 1),
        ("all", "baseline", 0), ("all", "mean-centering", 0), ("all", "seed", 0),
        ("all", "seed", 1)]
    baselines = [p for p in points if p.method == "baseline"]
    assert baselines[0].folder == baselines[1].folder  # one run serves every size
    assert baselines[0].spec.fingerprint() == baselines[1].spec.fingerprint()


def test_tatoeba_seen_and_unseen_languages_are_split():
    rows = [ScoreRow("meaning", lang, "acc_mean", v, 10)
            for lang, v in (("de", 0.9), ("zh", 0.7), ("ja", 0.2))]
    scores = TaskScores("tatoeba", "acc_mean", "avg:tatoeba-14", rows=rows)
    assert _language_split(scores, "meaning", {"de", "zh"}, True) == pytest.approx(0.8)
    assert _language_split(scores, "meaning", {"de", "zh"}, False) == pytest.approx(0.2)


def test_scale_verb_end_to_end_and_rerun_reuses_every_run(env, capsys):
    args = ["scale", "--encoder", "hash:16", "--methods", f"baseline,mean-centering,{SC}",
            "--sizes", "20,all", "--seeds", "0,1", "--languages", "de,zh", "--holdout", "5",
            "--tasks", "tatoeba,sts17", "--tatoeba-languages", "de,zh,nl",
            "--n-resamples", "50", "--params", str(env / "p.json"), "--out", str(env / "sc")]
    (env / "p.json").write_text(json.dumps({"seed-centered": {"max_epochs": 2, "lr": 0.003}}))
    assert main(args) == 0
    data = json.loads((env / "sc" / "scaling.json").read_text())
    points = {(p["size"], p["method"]): p for p in data["extras"]["points"]}
    sc20 = points[("20", SC)]
    assert sc20["seeds"] == 2 and points[("all", SC)]["train_pairs"] == 70
    assert sc20["train_pairs"] == 40
    assert sc20["tatoeba_unseen"] is not None  # nl is not a training language
    compared = {(c["size"], c["task"], c["method"]) for c in data["comparisons"]}
    assert ("all", "sts17", SC) in compared and ("20", "tatoeba", "baseline") in compared
    # the comparison is of the mean over seeds (not the first seed, not the seed ensemble):
    # its per-seed scores and mean are the ones the score tables summarise
    by_key = {(c["size"], c["task"], c["method"]): c for c in data["comparisons"]
              if c["view"] == "meaning"}
    seed_sts = by_key[("20", "sts17", SC)]
    assert len(seed_sts["per_seed_a"]) == 2 and seed_sts["per_seed_a"][0] != seed_sts[
        "per_seed_a"][1]
    assert seed_sts["mean_a"] == pytest.approx(sc20["sts17"])
    assert min(seed_sts["per_seed_a"]) == pytest.approx(sc20["sts17_min"])
    assert seed_sts["mean_b"] == pytest.approx(points[("20", "mean-centering")]["sts17"])
    # Holm over every comparison of the report: adjusted p >= raw p, all marked "holm"
    assert all(c["correction"] == "holm" and c["p_adjusted"] >= c["p_value"] - 1e-12
               for c in data["comparisons"])
    _untagged_rows_are_the_tables_no_tag_cells(data, points, seed_sts)
    assert len(data["runs"]) == 1 + 2 + 4  # baseline once, mean-centering per size, seed x 2 x 2
    report = (env / "sc" / "scaling.md").read_text()
    assert "## Each method against mean-centering" in report and f"| {SC} |" in report
    assert "p (Holm)" in report and "Δ ens. (extra)" in report
    assert f"| 20 | sts17 | none | {SC} |" in report and "all 16 comparisons" in report
    pytest.importorskip("matplotlib")
    assert (env / "sc" / "scaling-tatoeba.png").stat().st_size > 1000
    first = [r["timings"] for r in data["runs"]]
    assert main(args) == 0
    again = json.loads((env / "sc" / "scaling.json").read_text())
    assert [r["timings"] for r in again["runs"]] == first  # nothing refitted
    # a seed that never ran: --finished-only reports it as not run and fits nothing
    more = [a if a != "0,1" else "0,1,2" for a in args] + ["--finished-only"]
    assert main(more) == 0
    partial = json.loads((env / "sc" / "scaling.json").read_text())
    assert [r["timings"] for r in partial["runs"]] == first
    assert partial["extras"]["not_run"] == ["seed-centered at 20 pairs/lang, seed 2",
                                            "seed-centered at all pairs/lang, seed 2"]
    assert "Not run (left out of every table): seed-centered at 20" in (
        env / "sc" / "scaling.md").read_text()
    assert not (env / "sc" / "20" / "seed-centered" / "seed-2").exists()
    _resume_completes_a_run_saved_without_untagged_scores(env / "sc", args, first)


def _untagged_rows_are_the_tables_no_tag_cells(data, points, seed_sts):
    """Gold tags and no tag: 2 sizes x 2 tasks x 2 methods x 2 views, one Holm family; the
    untagged comparison is of the untagged scores on both sides (the tables' no-tag cells),
    and a tag-free recipe's untagged score is its one score."""
    assert len(data["comparisons"]) == 16
    untagged = {(c["size"], c["task"], c["method"]): c for c in data["comparisons"]
                if c["view"] == "untagged"}
    seed_none = untagged[("20", "sts17", SC)]
    assert seed_none["mean_a"] == pytest.approx(points[("20", SC)]["sts17_notag"])
    assert seed_none["mean_b"] == pytest.approx(points[("20", "mean-centering")]["sts17_notag"])
    assert seed_none["mean_a"] != pytest.approx(seed_sts["mean_a"])  # not the gold-tag items
    assert untagged[("20", "tatoeba", "baseline")]["mean_a"] == pytest.approx(
        points[("20", "baseline")]["tatoeba"])


def _resume_completes_a_run_saved_without_untagged_scores(out, args, first):
    """A run saved before the untagged view existed: --finished-only reports it without its
    untagged comparison (no crash); a plain rerun evaluates its saved model again (no refit)
    and the untagged comparison is back."""
    from disembed.results import RunResult

    folder = out / "20" / "seed-centered" / "seed-0"
    old = RunResult.load(folder)
    history = old.training["history"]
    for s in old.scores:
        s.rows = [r for r in s.rows if r.view != "untagged"]
        s.averages = [r for r in s.averages if r.view != "untagged"]
        s.per_item = {k: v for k, v in s.per_item.items() if k[0] != "untagged"}
    old.save(folder)
    assert main(args + ["--finished-only"]) == 0
    data = json.loads((out / "scaling.json").read_text())
    compared = {(c["size"], c["method"], c["view"]) for c in data["comparisons"]}
    assert ("20", SC, "meaning") in compared and ("20", SC, "untagged") not in compared
    assert ("all", SC, "untagged") in compared
    assert main(args) == 0
    again = RunResult.load(folder)
    assert all("untagged" in s.views() for s in again.scores)
    assert again.training["history"] == history and again.timings["train_seconds"] == 0
    data = json.loads((out / "scaling.json").read_text())
    assert len(data["comparisons"]) == 16
    now = [r["timings"] for r in data["runs"]]
    assert sum(a != b for a, b in zip(now, first, strict=True)) == 1  # only it re-evaluated


def test_no_tag_numbers_read_the_untagged_view_or_the_gold_one_for_tag_free_recipes():
    from types import SimpleNamespace

    from disembed.experiment.scaling import run_metrics

    def tatoeba(views):
        rows = [ScoreRow(view, lang, "acc_mean", v, 10) for view, values in views.items()
                for lang, v in zip(("de", "ja"), values, strict=True)]
        averages = [ScoreRow(view, "avg:tatoeba-14", "acc_mean", sum(values) / 2, 20)
                    for view, values in views.items()]
        return TaskScores("tatoeba", "acc_mean", "avg:tatoeba-14", rows=rows,
                          averages=averages)

    tagged = run_metrics(SimpleNamespace(method="seed-centered", params={}, scores=[tatoeba(
        {"meaning": (0.9, 0.5), "untagged": (0.8, 0.3)})]), {"de"})
    assert tagged["tatoeba"] == pytest.approx(0.7)
    assert tagged["tatoeba_notag"] == pytest.approx(0.55)
    assert tagged["tatoeba_unseen"] == pytest.approx(0.5)
    assert tagged["tatoeba_unseen_notag"] == pytest.approx(0.3)
    free = run_metrics(SimpleNamespace(method="baseline", params={}, scores=[tatoeba(
        {"meaning": (0.9, 0.5)})]), {"de"})
    assert free["tatoeba_notag"] == pytest.approx(0.7)  # no untagged view: same as gold
    assert free["tatoeba_unseen_notag"] == pytest.approx(0.5)
    assert free["sts17_notag"] != free["sts17_notag"]  # not evaluated: nan
    # a recipe that uses a language, saved before the untagged view existed: no number,
    # never its gold-tag one passed off as untagged
    old = run_metrics(SimpleNamespace(method="seed-centered", params={}, scores=[tatoeba(
        {"meaning": (0.9, 0.5)})]), {"de"})
    assert old["tatoeba_notag"] != old["tatoeba_notag"] and old["tatoeba"] == pytest.approx(0.7)


def _step_down(p_values):
    """Holm's adjusted p-values written out: sort ascending, multiply the i-th (0-based) of m
    by m - i, carry the running maximum, cap at 1; back in the input order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    out, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        out[i] = running
    return out


def test_holm_runs_once_over_every_comparison_of_the_study_and_bolds_what_survives_it(
        monkeypatch):
    """Issue 32: the correction is one family over all sizes, tasks and methods (not off, not
    one family per training size), and the report's bold cells follow the adjusted p-value."""
    from types import SimpleNamespace

    from disembed.analysis.significance import SeedTest
    from disembed.experiment import scaling
    from disembed.reports.scaling_report import ALPHA, _comparisons
    from disembed.results import ExperimentResult

    # 2 sizes x 2 tasks x 2 methods x 2 views (gold tags, none): 16 comparisons, raw p chosen
    # so that Holm over all 16, over the gold-tag 8 only, per size, and no correction each
    # bold different cells
    gold = {("500", "tatoeba", "seed"): 0.004, ("500", "tatoeba", "dream"): 0.011,
            ("500", "sts17", "seed"): 0.009, ("500", "sts17", "dream"): 0.30,
            ("all", "tatoeba", "seed"): 0.0012, ("all", "tatoeba", "dream"): 0.02,
            ("all", "sts17", "seed"): 0.04, ("all", "sts17", "dream"): 0.6}
    raw = {(*k, "meaning"): v for k, v in gold.items()}
    raw |= {(*k, "untagged"): 0.5 for k in gold} | {("all", "tatoeba", "seed", "untagged"): 0.002}

    def fake_compare(a, b, n_resamples, view, view_b):
        assert view == view_b  # both use a language: untagged against untagged
        key = (a[0].size, a[0].task, a[0].method, view)
        return SeedTest((0.5,), (0.4,), 0.5, 0.4, 0.1, 0.01, 0.2, raw[key], 100, n_resamples,
                        0.5, 0.4, 0.1)

    monkeypatch.setattr(scaling, "compare_seeds", fake_compare)
    config = SimpleNamespace(reference="mean-centering", methods=["mean-centering", "seed",
                                                                  "dream"],
                             tasks=["tatoeba", "sts17"], n_resamples=100)
    entries = []
    for size in ("500", "all"):
        for method in config.methods:
            items = {("meaning", "x", "acc"): 1, ("untagged", "x", "acc"): 1}
            scores = [SimpleNamespace(task=t, per_item=items, size=size, method=method)
                      for t in config.tasks]
            entries.append((SimpleNamespace(size=size, method=method),  # runs of a recipe
                            SimpleNamespace(method="lir", params={}, scores=scores)))  # with tags
    out = scaling.compare_to_reference(config, entries)
    key = [(c["size"], c["task"], c["method"], c["view"]) for c in out]
    assert key == [(s, t, m, v) for s in ("500", "all") for m in ("seed", "dream")
                   for v in ("meaning", "untagged") for t in config.tasks]
    p = [c["p_value"] for c in out]
    assert p == [raw[k] for k in key]
    assert [c["p_adjusted"] for c in out] == pytest.approx(_step_down(p))
    assert all(c["correction"] == "holm" for c in out)
    # what the wirings would bold differs: this data tells them apart
    bold = {k for k, c in zip(key, out, strict=True) if c["p_adjusted"] < ALPHA}
    assert bold == {("all", "tatoeba", "seed", "meaning"), ("all", "tatoeba", "seed", "untagged")}
    per_size = [q for s in ("500", "all") for q in _step_down(
        [c["p_value"] for c in out if c["size"] == s])]
    assert sum(q < ALPHA for q in per_size) > len(bold)
    gold_only = _step_down([c["p_value"] for c in out if c["view"] == "meaning"])
    assert sum(q < ALPHA for q in gold_only) == 2  # it would bold 500/tatoeba/seed too
    # the report bolds exactly those cells
    for c in out:
        c.update(reference="mean-centering", per_seed_a=[0.5], mean_a=0.5, mean_b=0.4,
                 delta=0.1, ci_low=0.01, ci_high=0.2, ensemble_delta=0.1)
    lines = _comparisons(ExperimentResult("scaling", {}, comparisons=out))
    rows = [line for line in lines if line.startswith(("| 500 |", "| all |"))]
    assert {tuple(r.split(" | ")[:4]) for r in rows if "**" in r} == {
        ("| all", "tatoeba", "gold", "seed"), ("| all", "tatoeba", "none", "seed")}
    assert "p (Holm)" in lines[-len(rows) - 3] and f"all {len(out)} comparisons" in lines[2]


def _toy_scores(items: dict[str, list[float]]) -> TaskScores:
    """A task the registry does not know (its main score averages every subset), one subset
    ``x`` of per-item accuracies per view."""
    rows = [ScoreRow(view, "x", "acc", sum(v) / len(v), len(v)) for view, v in items.items()]
    scores = TaskScores("toy", "acc", "x", rows=rows)
    scores.per_item = {(view, "x", "acc"): v for view, v in items.items()}
    return scores


def test_untagged_comparisons_read_untagged_items_on_both_sides_or_none_at_all():
    """Untagged against untagged (a tag-free recipe's gold items stand for its untagged
    ones); never untagged items against gold ones; a run saved before the untagged view
    existed gets no untagged comparison (and no crash); Holm over every comparison made."""
    from types import SimpleNamespace

    from disembed.experiment import scaling

    def entry(method, seed, items):
        return (SimpleNamespace(size="500", method=method),
                SimpleNamespace(method=method, params={}, seed=seed,
                                scores=[_toy_scores(items)]))

    gold, none = [1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]
    entries = [entry("mean-centering", 0, {"meaning": [1.0, 0.0, 0.0, 1.0],
                                           "untagged": [1.0, 1.0, 1.0, 1.0]}),
               entry("seed-centered", 0, {"meaning": gold, "untagged": none}),
               entry("seed-centered", 1, {"meaning": gold, "untagged": none}),
               entry("baseline", 0, {"meaning": [0.0, 0.0, 1.0, 1.0]}),
               entry("lir", 0, {"meaning": gold})]  # uses a language; no untagged items
    config = SimpleNamespace(reference="mean-centering", tasks=["toy"], n_resamples=200,
                             methods=["mean-centering", "seed-centered", "baseline", "lir"])
    out = {(c["method"], c["view"]): c for c in scaling.compare_to_reference(config, entries)}
    assert sorted(out) == [("baseline", "meaning"), ("baseline", "untagged"), ("lir", "meaning"),
                           (SC, "meaning"), (SC, "untagged")]
    assert out[("seed-centered", "meaning")]["mean_a"] == pytest.approx(0.75)
    assert out[("seed-centered", "meaning")]["mean_b"] == pytest.approx(0.5)
    assert out[("seed-centered", "untagged")]["mean_a"] == pytest.approx(0.25)
    assert out[("seed-centered", "untagged")]["mean_b"] == pytest.approx(1.0)
    assert out[("seed-centered", "untagged")]["delta"] == pytest.approx(-0.75)
    assert out[("baseline", "untagged")]["mean_a"] == pytest.approx(0.5)  # its gold items
    assert out[("baseline", "untagged")]["mean_b"] == pytest.approx(1.0)
    assert all(c["p_adjusted"] == pytest.approx(min(1.0, 5 * c["p_value"]))
               or c["p_adjusted"] >= c["p_value"] for c in out.values())
    smallest = min(out.values(), key=lambda c: c["p_value"])
    assert smallest["p_adjusted"] == pytest.approx(min(1.0, 5 * smallest["p_value"]))
