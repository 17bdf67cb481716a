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
