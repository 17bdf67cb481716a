"""A finished run is reused only for the same spec, encoder and training pairs."""

from disembed.experiment import RunOutputs, RunSpec, TrainingData, Workspace, run, steps


def test_a_changed_training_pool_makes_a_finished_run_stale(full_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    spec = RunSpec(method="mean-centering", encoder="hash:16",
                   data=TrainingData(("de", "zh"), 20), tasks=("sts17",))
    where = dict(outputs=RunOutputs(run_dir=tmp_path / "run"))
    workspace = Workspace(data_dir=str(full_data_dir))
    first = run(spec, workspace, **where)
    assert run(spec, workspace, **where).timings == first.timings  # reused
    news = full_data_dir / "parallel" / "wmt_newstest" / "en-de.tsv"
    news.write_text(news.read_text(encoding="utf-8") + "nt\tA new line.\tEine neue Zeile.\n",
                    encoding="utf-8")
    steps._built.cache_clear()  # a new process would read the folder again
    again = run(spec, workspace, **where)
    assert again.timings != first.timings  # the pool changed: refitted, not reused
    assert again.training["data"]["digest"] != first.training["data"]["digest"]


def test_changed_evaluation_data_is_evaluated_again_with_the_fitted_model(
        full_data_dir, tmp_path, monkeypatch):
    """Issue 22: bench reused a finished run after its STS17 file changed underneath it."""
    import importlib

    import numpy as np
    import pytest

    run_module = importlib.import_module("disembed.experiment.run")

    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    spec = RunSpec(method="mean-centering", encoder="hash:16",
                   data=TrainingData(("de", "zh"), 20), tasks=("sts17",))
    where = dict(outputs=RunOutputs(run_dir=tmp_path / "run"))
    workspace = Workspace(data_dir=str(full_data_dir))
    first = run(spec, workspace, **where)
    assert first.eval_data_digest
    assert run(spec, workspace, **where).timings == first.timings  # same data: reused
    for sts in sorted((full_data_dir / "sts17").rglob("*.tsv")):
        lines = sts.read_text(encoding="utf-8").splitlines(keepends=True)
        sts.write_text("".join([lines[0]] + [_flip_score(x) for x in lines[1:]]),
                       encoding="utf-8")
    fits = []
    monkeypatch.setattr(run_module, "_fit", lambda *a, **k: fits.append(a))
    again = run(spec, workspace, **where)
    assert not fits, "refitted although only the evaluation data changed"
    assert again.eval_data_digest != first.eval_data_digest
    assert again.timings != first.timings  # evaluated again, not reused
    before = first.score("sts17")
    assert np.isfinite(before) and again.score("sts17") == pytest.approx(-before)


def _flip_score(line: str) -> str:
    """The same row with its gold score mirrored (5 - score)."""
    parts = line.rstrip("\n").split("\t")
    for i in range(len(parts) - 1, -1, -1):
        try:
            parts[i] = f"{5 - float(parts[i]):g}"
            break
        except ValueError:
            continue
    return "\t".join(parts) + "\n"


def test_a_finished_run_is_reused_only_with_the_same_evaluation_options_and_encoder(
        full_data_dir, tmp_path, monkeypatch):
    """Issue 32: the reuse key holds every input of the scores. A run evaluated on a 2-item
    subsample is not reused for one asking for every item (or another seed or QE split),
    and one encoded by other encoder weights is not reused, although the spec string
    ("hash:16") is the same."""
    from disembed.encoders import HashEncoder
    from disembed.encoders.cached import cached
    from disembed.evaluation import EvalOptions

    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    spec = RunSpec(method="baseline", encoder="hash:16", tasks=("sts17", "wmt20-qe"),
                   evaluation=EvalOptions(max_items=2))
    where = dict(outputs=RunOutputs(run_dir=tmp_path / "run"))
    workspace = Workspace(data_dir=str(full_data_dir))
    first = run(spec, workspace, **where)
    assert run(spec, workspace, **where).timings == first.timings  # same inputs: reused
    for options in (EvalOptions(max_items=None), EvalOptions(max_items=2, seed=1),
                    EvalOptions(max_items=2, task_options={"wmt20-qe": {"split": "test21"}})):
        again = run(spec.with_(evaluation=options), workspace, **where)
        assert again.timings != first.timings, options
        assert again.spec["evaluation"] == options.to_dict()
    every = run(spec.with_(evaluation=EvalOptions(max_items=None)), workspace, **where)
    assert max(every.scores[0].data_sizes.values()) > 2
    run(spec, workspace, **where)  # the folder holds this spec's run again
    other_weights = cached(HashEncoder(16, salt="other"))
    assert other_weights.name == "hash:16"
    moved = run(spec, workspace, encoder=other_weights, **where)
    assert moved.encoder == other_weights.identity.to_dict() != first.encoder
