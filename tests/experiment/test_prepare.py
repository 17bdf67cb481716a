"""``prepare``: the steps in order, an interrupted fill resumes, and a bench afterwards
encodes nothing."""

import json

import pytest

from disembed.cli import main
from disembed.evaluation import EvalOptions
from disembed.experiment import RunSpec, Workspace, open_encoder
from disembed.experiment.prepare import PrepareConfig, plan, prepare


@pytest.fixture
def env(full_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def config(**changes):
    base = dict(encoders=["hash:16"], languages=["de", "zh"], tiers=[20], holdout_per_language=5,
                tasks=["tatoeba", "sts17"],
                evaluation=EvalOptions(task_options={"tatoeba": {"languages": ("de",)}}))
    return PrepareConfig(**{**base, **changes})


def test_plan_order_and_nested_tiers(env):
    encoder = open_encoder(RunSpec(encoder="hash:16"))
    steps = plan(config(), encoder, Workspace())
    names = [name for name, _ in steps]
    assert names == ["evaluation: tatoeba", "evaluation: sts17", "held-out (5 per language)",
                     "pool: 20 per language", "pool: all per language"]
    tier, whole = set(steps[3][1]), set(steps[4][1])
    assert tier < whole and len(tier) == 2 * 2 * 20  # 20 pairs x 2 sides x 2 languages
    assert not set(steps[2][1]) & whole  # held-out pairs are never in the pool


def test_prepare_resumes_and_the_bench_then_encodes_nothing(env, capsys, monkeypatch):
    first = prepare(config(tiers=[]))
    assert all(s.encoded > 0 for s in first) and first[-1].sentences == 2 * 2 * 35
    again = prepare(config(tiers=[]))
    assert [s.encoded for s in again] == [0] * len(again)
    assert main(["bench", "--encoder", "hash:16", "--languages", "de,zh",
                 "--pairs-per-language", "all", "--methods", "mean-centering", "--no-floor",
                 "--tasks", "tatoeba,sts17", "--tatoeba-languages", "de",
                 "--max-eval-items", "all", "--out", str(env / "bench"), "-q"]) == 0
    # the bench trains on all 40 pairs (no hold-out): prepare encoded those 35 + 5 already
    assert json.loads((env / "bench" / "bench.json").read_text())["timings"][
        "sentences_encoded"] == 0


def test_prepare_verb_prints_the_steps(env, capsys):
    assert main(["prepare", "--encoder", "hash:16", "--languages", "de", "--tiers", "10",
                 "--tasks", "sts17", "-q"]) == 0
    out = capsys.readouterr().out
    assert "| hash:16 | pool: 10 per language |" in out and "evaluation: sts17" in out
    with pytest.raises(SystemExit, match="2"):
        main(["prepare", "--encoder", "hash:16", "--tiers", "0"])
