"""``disembed bench --format mteb`` read back by MTEB's own classes: ``TaskResult.from_disk``,
``validate_and_filter_scores`` against ``mteb.get_task`` (task metadata only, offline),
``get_score`` equal to disembed's own score on MTEB's main score, ``ModelMeta`` and
``load_results``. The bugs this guards against are written out and must be caught."""

from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from disembed.cli import main
from disembed.evaluation import TASKS
from disembed.results import ExperimentResult

mteb = pytest.importorskip("mteb", reason="pip install 'disembed[mteb]' (in [dev], so CI runs it)")
from mteb.models.model_meta import ModelMeta  # noqa: E402

MTEB_TASKS = ("Tatoeba", "STS17")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    from tiny_data import add_full_data, write_tiny_data

    data = add_full_data(write_tiny_data(tmp_path_factory.mktemp("data")))
    out = tmp_path_factory.mktemp("bench")
    assert main(["bench", "--encoder", "hash:16", "--languages", "de,zh", "--methods",
                 "baseline,mean-centering", "--tasks", "tatoeba,sts17,wmt20-qe",
                 "--tatoeba-languages", "de,zh,nl", "--no-floor", "--out", str(out),
                 "--format", "mteb", "--data-dir", str(data),
                 "--cache-dir", str(tmp_path_factory.mktemp("cache")), "-q"]) == 0
    return out


def _own_score(result: ExperimentResult, label: str, file_task: str) -> float:
    """disembed's score for the same items: the mean over the evaluated subsets of the
    metric the task's metadata says is MTEB's main score, meaning view."""
    run = next(r for r in result.runs if r.label == label)
    scores = next(s for s in run.scores if TASKS.get(s.task).metadata.mteb_name == file_task)
    metric = TASKS.get(scores.task).metadata.main_score_metric
    return float(np.mean([r.value for r in scores.rows
                          if r.view == "meaning" and r.metric == metric]))


def check_with_mteb(path: Path, own: float) -> float:
    """Every check MTEB's classes can make of one written task file; returns get_score()."""
    result = mteb.TaskResult.from_disk(path)
    full = mteb.get_task(result.task_name)
    entries = result.scores[full.metadata.eval_splits[0]]
    subsets = [e["hf_subset"] for e in entries]
    assert set(subsets) <= set(full.hf_subsets), f"subsets MTEB does not have: {subsets}"
    langscripts = full.metadata.hf_subsets_to_langscripts
    for e in entries:
        assert e["languages"] == langscripts[e["hf_subset"]], e
        assert e["main_score"] == e[full.metadata.main_score], e
    assert result.dataset_revision == full.metadata.revision
    task = mteb.get_task(result.task_name, hf_subsets=subsets)
    score = result.validate_and_filter_scores(task).get_score()
    assert math.isfinite(score)
    assert score == pytest.approx(own, abs=1e-9)
    return score


def _files(bench: Path) -> dict[str, Path]:
    [folder] = [p for p in (bench / "mteb").iterdir() if p.name == "disembed__hash_16_baseline"]
    [revision] = list(folder.iterdir())
    return {p.stem: p for p in revision.glob("*.json")}


def test_the_task_files_pass_mteb_and_score_what_disembed_scored(bench):
    result = ExperimentResult.from_json(bench / "bench.json")
    files = _files(bench)
    assert set(files) == {"Tatoeba", "STS17", "disembed-wmt20-qe", "model_meta"}
    for name in MTEB_TASKS:
        own = _own_score(result, "hash:16 / baseline", name)
        assert check_with_mteb(files[name], own) > 0  # the hash encoder finds copies
    entries = json.loads(files["Tatoeba"].read_text())["scores"]["test"]
    assert [e["hf_subset"] for e in entries] == ["deu-eng", "cmn-eng", "nld-eng"]
    assert entries[1]["languages"] == ["cmn-Hans", "eng-Latn"]


def test_model_meta_validates_and_load_results_finds_the_model(bench, monkeypatch):
    files = _files(bench)
    meta = ModelMeta.model_validate(json.loads(files["model_meta"].read_text()))
    assert meta.name == "disembed/hash_16_baseline"
    cache = bench / "cache"
    (cache / "results").mkdir(parents=True)
    (cache / "results" / "disembed__hash_16_baseline").symlink_to(
        files["model_meta"].parent.parent, target_is_directory=True)
    found = mteb.ResultCache(cache).load_results(models=[meta.name], include_remote=False)
    [model] = found.model_results
    assert model.model_name == meta.name
    assert {r.task_name for r in model.task_results} >= set(MTEB_TASKS)
    monkeypatch.setenv("MTEB_CACHE", str(cache))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        legacy = mteb.load_results(download_latest=False, models=[meta.name])
    assert [m.model_name for m in legacy.model_results] == [meta.name]


def _subset_named_by_language(d):  # "de" where MTEB has "deu-eng"
    d["scores"]["test"][0]["hf_subset"] = "de"


def _two_letter_languages(d):
    d["scores"]["test"][0]["languages"] = ["de", "en"]


def _main_score_on_disembed_metric(d):  # acc_mean where MTEB's Tatoeba ranks by f1
    for e in d["scores"]["test"]:
        e["main_score"] = e["acc_mean"]


def _an_average_entry(d):
    d["scores"]["test"].append({"hf_subset": "avg:tatoeba-14", "languages": [],
                                "main_score": 1.0})


def _disembed_commit_as_revision(d):
    d["dataset_revision"] = "ea0749d"


@pytest.mark.parametrize("bug", [_subset_named_by_language, _two_letter_languages,
                                 _main_score_on_disembed_metric, _an_average_entry,
                                 _disembed_commit_as_revision], ids=lambda f: f.__name__[1:])
def test_each_bug_the_format_had_is_caught(bench, tmp_path, bug):
    path = _files(bench)["Tatoeba"]
    result = ExperimentResult.from_json(bench / "bench.json")
    own = _own_score(result, "hash:16 / baseline", "Tatoeba")
    data = json.loads(path.read_text())
    # give f1 and acc_mean different values, so the wrong main score is visible
    data["scores"]["test"][1]["acc_mean"] = data["scores"]["test"][1]["f1"] / 2
    broken = copy.deepcopy(data)
    bug(broken)
    (tmp_path / "Tatoeba.json").write_text(json.dumps(broken))
    with pytest.raises((AssertionError, KeyError, ValueError)):
        check_with_mteb(tmp_path / "Tatoeba.json", own)


def test_tatoeba_f1_is_mtebs_own_metric():
    """disembed's F1 against MTEB's ``_compute_metrics`` over the same nearest neighbours:
    noisy rows, so that many queries share a wrong neighbour; the other direction differs."""
    from disembed.evaluation.metrics import bitext_mining_f1, l2_normalize

    rng = np.random.default_rng(3)
    a = rng.normal(size=(60, 8))
    b = a + rng.normal(scale=1.2, size=a.shape)
    nearest = np.argmax(l2_normalize(a) @ l2_normalize(b).T, axis=1)
    neighbours = [{"corpus_id": int(j), "score": 0.0} for j in nearest]
    gold = list(zip(range(60), range(60), strict=True))
    theirs = mteb.get_task("Tatoeba")._compute_metrics(neighbours, gold)
    assert 0.1 < theirs["f1"] < 0.9 and len(set(nearest.tolist())) < 60
    assert bitext_mining_f1(a, b) == pytest.approx(theirs["f1"], abs=1e-12)
    assert bitext_mining_f1(b, a) != pytest.approx(theirs["f1"], abs=1e-3)


@pytest.mark.parametrize("name", ["tatoeba", "sts17"])
def test_every_mteb_subset_is_named_as_mteb_names_it(name):
    """All 112 Tatoeba languages and the 11 STS17 tracks: disembed's subset -> MTEB's
    ``hf_subset`` and language-script codes, exactly as MTEB's task metadata has them."""
    from disembed.data.languages import normalize_language

    task = TASKS.get(name)
    theirs = mteb.get_task(task.metadata.mteb_name).metadata.hf_subsets_to_langscripts
    for hf_subset, languages in theirs.items():
        ours = normalize_language(hf_subset.split("-")[0]) if name == "tatoeba" else hf_subset
        hub = task.hub_subset(ours)
        assert (hub.name, list(hub.languages)) == (hf_subset, languages)
