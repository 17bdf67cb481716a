"""``tune``: candidates fitted without the held-out pairs, scored on them, the best kept,
and ``bench --params`` applying the choice."""

import json

import numpy as np
import pytest

from disembed.cli import main
from disembed.data.parallel import ParallelPairs
from disembed.evaluation.metrics import retrieval_accuracy
from disembed.exceptions import ConfigError
from disembed.experiment import TrainingData
from disembed.experiment import tune as tune_module
from disembed.experiment.tune import CRITERION, TuneConfig, choose, tune, validation_scores
from disembed.methods import make_method

#: 20 training and 20 held-out pairs per language
SMALL = TrainingData(("de", "zh"), 20, holdout_per_language=20)


@pytest.fixture
def env(full_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_validation_scores_prefer_a_model_that_removes_the_language_offset():
    rng = np.random.default_rng(0)
    meaning = rng.standard_normal((60, 8))
    langs = ["de"] * 30 + ["zh"] * 30
    offsets = {"de": 4.0, "zh": -4.0, "en": 0.0}
    src = meaning + np.array([offsets[x] for x in langs])[:, None]
    tgt = meaning + 0.3 * rng.standard_normal((60, 8))
    pairs = ParallelPairs([""] * 60, [""] * 60, langs, ["en"] * 60)
    raw = validation_scores(make_method("baseline").fit(src, tgt, langs, "en"), src, tgt, pairs,
                            qe_dev=0.2)
    centred = validation_scores(make_method("mean-centering").fit(src, tgt, langs, "en"),
                                src, tgt, pairs, qe_dev=0.2)
    assert centred["pooled_retrieval"] > raw["pooled_retrieval"] + 0.3
    assert set(centred["per_language"]) == {"de", "zh"}
    assert centred["bitext_retrieval"] > raw["bitext_retrieval"]
    assert centred["validation_score"] == pytest.approx((centred["bitext_retrieval"] + 0.2) / 2)
    # each side in its own language: xx rows as xx, the English side as English
    model = make_method("mean-centering").fit(src, tgt, langs, "en")
    rows = {lang: [i for i, x in enumerate(langs) if x == lang] for lang in ("de", "zh")}
    want = {lang: retrieval_accuracy(model.meaning(src[r], lang), model.meaning(tgt[r], "en")
                                     ).acc_mean for lang, r in rows.items()}
    assert centred["per_language"] == pytest.approx(want)


def test_version_4_measurements_are_recombined_not_refitted():
    from disembed.experiment.tune import VALIDATION_VERSION, upgrade_measurement

    v4 = {CRITERION: 0.64, "pooled_retrieval": 0.886, "bitext_retrieval": 0.958,
          "qe_dev": 0.395, "language_retrieval": 0.006, "version": 4}
    assert upgrade_measurement(v4)
    assert v4[CRITERION] == pytest.approx((0.958 + 0.395) / 2)
    assert v4["version"] == VALIDATION_VERSION
    assert not upgrade_measurement(v4)  # already current
    older = {CRITERION: 0.6, "pooled_retrieval": 0.8, "qe_dev": 0.3, "version": 3}
    assert not upgrade_measurement(older) and older["version"] == 3  # must be re-measured


def test_tune_fits_every_candidate_and_keeps_the_best(env):
    result = tune(TuneConfig(encoder="hash:16", methods=["baseline", "lir", "seed"],
                             data=SMALL, grids={"seed": {"lr": [1e-3, 3e-3], "max_epochs": [2]}},
                             out_dir=str(env / "tune")))
    labels = [r.label for r in result.runs]
    assert labels == ["baseline", "lir rank=1", "lir rank=2", "lir rank=4", "lir rank=8",
                      "seed lr=0.001 max_epochs=2", "seed lr=0.003 max_epochs=2"]
    for r in result.runs:
        if r.training:  # fitted on the 20 training pairs, the 20 held-out pairs set aside
            assert r.training["data"]["total_pairs"] == 40
            assert r.training["data"]["held_out_pairs"] == 40
    chosen = json.loads((env / "tune" / "tuned.json").read_text())
    assert chosen == choose(result.runs) and set(chosen) == {"baseline", "lir", "seed"}
    best = max((r for r in result.runs if r.spec["method"] == "lir"),
               key=lambda r: r.measurements["validation"][CRITERION])
    assert chosen["lir"] == best.spec["params"]
    assert "(chosen)" in (env / "tune" / "tune.md").read_text()
    # a rerun reuses every finished candidate
    again = tune(TuneConfig(encoder="hash:16", methods=["lir"], data=SMALL,
                            out_dir=str(env / "tune")))
    assert [r.timings for r in again.runs] == [r.timings for r in result.runs[1:5]]


def test_tune_scores_only_on_qe_dev_and_on_pairs_it_did_not_train_on(env, monkeypatch):
    """Issue 32: defaults are chosen on validation data, never on a test set. The only
    evaluation data tune scores is WMT20 QE dev (Tatoeba, STS17 and the QE test sets are
    never loaded for scoring), and the held-out pairs candidates are scored on are not among
    the pairs they were trained on."""
    import disembed.evaluation.qe as qe_module
    import disembed.evaluation.sts as sts_module
    import disembed.evaluation.tatoeba as tatoeba_module
    from disembed.evaluation import DEFAULT_TASKS
    from disembed.experiment.spec import Workspace
    from disembed.experiment.steps import load_training_set

    loaded, scored = [], []

    def spy(module, name, tag):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            loaded.append(tag(*args, **kwargs))
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)

    spy(qe_module, "load_wmt20_qe", lambda pair, split="test", data_dir=None: ("qe", split))
    spy(sts_module, "load_sts17", lambda *a, **k: ("sts17",))
    spy(tatoeba_module, "load_tatoeba", lambda *a, **k: ("tatoeba",))
    real_scores = tune_module.validation_scores
    monkeypatch.setattr(tune_module, "validation_scores", lambda model, src, tgt, pairs, qe_dev:
                        scored.append(pairs) or real_scores(model, src, tgt, pairs, qe_dev))
    tune(TuneConfig(encoder="hash:16", methods=["baseline", "mean-centering"], data=SMALL,
                    out_dir=str(env / "tune")))
    assert loaded and set(loaded) == {("qe", "dev")}
    trained = load_training_set(SMALL, DEFAULT_TASKS, Workspace()).pairs
    trained = set(zip(trained.src, trained.tgt, strict=True))
    assert len(scored) == 2 and all(len(p) == 40 for p in scored)
    for pairs in scored:
        assert not set(zip(pairs.src, pairs.tgt, strict=True)) & trained


def test_new_criteria_remeasure_saved_models_without_refitting(env, monkeypatch):
    config = dict(encoder="hash:16", methods=["lir"], data=SMALL, grids={"lir": {"rank": [1]}},
                  out_dir=str(env / "tune"))
    first = tune(TuneConfig(**config)).runs[0]
    monkeypatch.setattr(tune_module, "VALIDATION_VERSION", 99)
    again = tune(TuneConfig(**config)).runs[0]
    assert again.measurements["validation"]["version"] == 99  # measured again
    assert again.timings == first.timings  # from the saved model: not refitted
    assert again.measurements["validation"][CRITERION] == pytest.approx(
        first.measurements["validation"][CRITERION])


def test_bench_params_file_applies_the_choice(env, capsys):
    tuned = env / "tuned.json"
    tuned.write_text(json.dumps({"lir": {"rank": 2}, "seed": {"lr": 0.003}}))
    assert main(["bench", "--encoder", "hash:16", "--languages", "de,zh",
                 "--pairs-per-language", "20", "--methods", "lir,seed", "--max-epochs", "1",
                 "--params", str(tuned), "--no-floor", "--tasks", "sts17",
                 "--out", str(env / "bench"), "-q"]) == 0
    runs = {r["method"]: r for r in json.loads((env / "bench" / "bench.json").read_text())[
        "runs"]}
    assert runs["lir"]["params"]["rank"] == 2
    assert runs["seed"]["spec"]["params"] == {"lr": 0.003, "max_epochs": 1}


def test_tune_rejects_a_grid_the_method_does_not_take():
    with pytest.raises(ConfigError, match="lir takes no 'lr'"):
        TuneConfig(methods=["lir"], grids={"lir": {"lr": [1e-3]}})


def _candidate(method, params, score, leaked, steps=0):
    from disembed.results import RunResult

    validation = {CRITERION: score, "language_retrieval": leaked}
    return RunResult(label=method, method=method, params=params, encoder={},
                     spec={"method": method, "params": params},
                     training={"history": {"steps": steps}} if steps else {},
                     measurements={"validation": validation})


def test_choices_respect_the_leakage_limit_and_name_the_default():
    from disembed.experiment.tune import LEAKAGE_LIMIT, choose_default, within_limit

    runs = [_candidate("mean-centering", {}, 0.60, 0.003),
            _candidate("seed", {"lr": 0.003}, 0.65, 0.30),       # best score, leaks
            _candidate("seed", {"lr": 0.001}, 0.64, 0.20),       # leaks too
            _candidate("seed-centered", {"init_scale": 0.9}, 0.63, 0.004),
            _candidate("seed-centered", {"init_scale": None}, 0.625, 0.002),
            _candidate("baseline", {}, 0.40, None)]               # no language part
    assert within_limit(runs[0]) and not within_limit(runs[1]) and within_limit(runs[-1])
    assert LEAKAGE_LIMIT == 0.05
    chosen = choose(runs)
    assert chosen["seed"] == {"lr": 0.003}  # none within the limit: the best, flagged
    assert chosen["seed-centered"] == {"init_scale": 0.9}
    default = choose_default(runs)
    assert (default["method"], default["params"]) == ("seed-centered", {"init_scale": 0.9})
    assert choose_default([runs[1], runs[2]]) is None


def test_ties_go_to_the_cheaper_candidate():
    """Within TIE_TOLERANCE of the best, the fewest training steps win; outside it, the
    score does; a cheaper candidate that leaks is never preferred."""
    from disembed.experiment.tune import TIE_TOLERANCE, choose_default

    slow = _candidate("inter", {"lr": 1e-4}, 0.6005, 0.01, steps=9000)
    fast = _candidate("inter", {"lr": 3e-3}, 0.6005 - TIE_TOLERANCE / 2, 0.01, steps=600)
    worse = _candidate("inter", {"lr": 1e-3}, 0.6005 - 2 * TIE_TOLERANCE, 0.01, steps=10)
    leaky = _candidate("inter", {"lr": 1e-2}, 0.6005, 0.30, steps=5)
    assert choose([slow, fast, worse, leaky])["inter"] == {"lr": 3e-3}
    assert choose([slow, worse])["inter"] == {"lr": 1e-4}
    assert choose_default([slow, fast, leaky])["params"] == {"lr": 3e-3}


def test_with_several_seeds_a_candidate_is_scored_by_its_mean_over_them(env):
    grids = {"seed": {"lr": [1e-3, 3e-3], "max_epochs": [2]}}
    result = tune(TuneConfig(encoder="hash:16", methods=["lir", "seed"], data=SMALL,
                             grids=grids, seeds=[0, 1], out_dir=str(env / "tune")))
    seeded = [r for r in result.runs if r.spec["method"] == "seed"]
    assert [(r.spec["params"]["lr"], r.spec["seed"]) for r in seeded] == [
        (1e-3, 0), (1e-3, 1), (3e-3, 0), (3e-3, 1)]
    assert [r.spec["method"] for r in result.runs].count("lir") == 4  # no seed: once each
    means = {lr: np.mean([r.measurements["validation"][CRITERION] for r in seeded
                          if r.spec["params"]["lr"] == lr]) for lr in (1e-3, 3e-3)}
    best = max(means, key=means.get)
    assert result.extras["chosen"]["seed"]["lr"] == best
    assert (env / "tune" / "seed" / "lr-0.001_max_epochs-2" / "seed-1").is_dir()
    table = (env / "tune" / "tune.md").read_text()
    assert f"{100 * means[best]:.2f} (" in table  # the mean, then each seed's


def test_the_mean_over_seeds_can_overturn_the_first_seeds_choice():
    """A candidate that wins on seed 0 but loses on average is not chosen."""
    def fake(lr, seed, score, steps=10):
        run = type("R", (), {})()
        run.spec = {"method": "seed", "params": {"lr": lr}, "seed": seed}
        run.measurements = {"validation": {CRITERION: score, "language_retrieval": 0.0}}
        run.training = {"history": {"steps": steps}}
        return run

    runs = [fake(1e-3, 0, 0.70), fake(1e-3, 1, 0.60), fake(3e-3, 0, 0.69), fake(3e-3, 1, 0.69)]
    assert choose(runs[:1] + runs[2:3]) == {"seed": {"lr": 1e-3}}  # seed 0 alone
    assert choose(runs) == {"seed": {"lr": 3e-3}}  # the mean: 0.65 vs 0.69


def test_both_arms_of_a_mirrored_fit_count_as_training_steps():
    from disembed.experiment.tune import training_steps

    run = type("R", (), {})()
    run.training = {"history": {"steps": 30}, "orientation": {"steps": 55}}
    assert training_steps(run) == 55
    run.training = {"history": {"steps": 30}}
    assert training_steps(run) == 30
