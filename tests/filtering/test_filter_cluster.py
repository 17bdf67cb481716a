"""filter on an executor: each chunk a task rebuilt from a ScorerSpec; the outputs are the
single-process run's bytes (in process here; on a local Ray cluster in the slow test)."""

from __future__ import annotations

import pytest

from disembed.cli import main
from disembed.filtering import FilterConfig, filter_bitext
from disembed.filtering.cluster import ScorerSpec
from disembed.mining.distributed import InProcess

ROWS = [(f"Satz {i} über den Hund.", f"sentence {i} about the dog.") for i in range(95)]
ROWS += [("Hallo Welt", "Hallo Welt"), ("Ich habe 3 Katzen.", "I have 4 cats.")]


@pytest.fixture
def bitext(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in ROWS), encoding="utf-8")
    return path


def test_tasks_write_the_same_bytes_as_one_process(bitext, tmp_path):
    spec = ScorerSpec(encoder="hash:16", check="none", cache_dir=str(tmp_path / "cache"))
    config = FilterConfig(threshold=0.5, chunk_size=10)
    one = filter_bitext(bitext, tmp_path / "a.tsv", spec.build(), config,
                        scores_out=tmp_path / "a.scores")

    class Counting(InProcess):
        calls = 0

        def submit(self, fn, *args):
            Counting.calls += 1
            return super().submit(fn, *args)

    many = filter_bitext(bitext, tmp_path / "b.tsv", spec.build(), config,
                         scores_out=tmp_path / "b.scores", executor=Counting(), spec=spec,
                         window=3)
    assert Counting.calls == one.scored - 1  # the first chunk (languages) runs here
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()
    assert (tmp_path / "a.scores").read_bytes() == (tmp_path / "b.scores").read_bytes()
    assert many.kept == one.kept and many.reasons == one.reasons


def test_an_executor_needs_a_spec(bitext, tmp_path):
    spec = ScorerSpec(encoder="hash:16", check="none")
    with pytest.raises(Exception, match="needs the spec"):
        filter_bitext(bitext, tmp_path / "b.tsv", spec.build(), executor=InProcess())


@pytest.mark.slow
def test_cli_cluster_on_local_ray(bitext, tmp_path, capsys):
    pytest.importorskip("ray")
    args = ["--encoder", "hash:16", "--language-check", "none", "--chunk-size", "10",
            "--threshold", "0.5", "--no-progress", "-q"]
    assert main(["filter", str(bitext), "--out", str(tmp_path / "a.tsv"), *args]) == 0
    assert main(["filter", str(bitext), "--out", str(tmp_path / "b.tsv"), "--cluster",
                 "local:2", *args]) == 0
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()
    assert (tmp_path / "a.tsv.scores.tsv").read_bytes() == \
        (tmp_path / "b.tsv.scores.tsv").read_bytes()
