"""Every registered task passes the task contract: it loads tiny data from its declared
data folder, declares every sentence it evaluates (``Task.texts``, what the training-set
builder keeps out of training pairs) and scores. A task registered without tiny data here
fails ``test_every_registered_task_is_covered``."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_data import add_full_data, write_tiny_data

from disembed.data.training_set import HELD_OUT_TEXTS, build_training_set
from disembed.encoders import HashEncoder
from disembed.evaluation import TASKS, EvalOptions


def _bucc(tmp_path):
    folder = tmp_path / "bucc2018" / "de-en"
    folder.mkdir(parents=True)
    de = [f"de-{i:09d}\tSatz {i}" for i in range(30)]
    en = [f"en-{i:09d}\tSatz {i if i % 3 == 0 else 100 + i}" for i in range(30)]
    gold = [f"de-{i:09d}\ten-{i:09d}" for i in range(0, 30, 3)]
    for name, lines in (("de-en.sample.de", de), ("de-en.sample.en", en),
                        ("de-en.sample.gold", gold)):
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


#: task name -> writes its tiny data under a folder and returns the folder
def _full(tmp_path):
    return add_full_data(write_tiny_data(tmp_path))


TINY = {"tatoeba": _full, "sts17": _full, "wmt20-qe": _full, "bucc": _bucc}
OPTIONS = {"tatoeba": {"languages": ("de", "zh", "nl")}}


def _build(name, data_dir):
    cls = TASKS.get(name)
    if name == "bucc":  # the tiny pool has one pair
        return cls(["de-en"], data_dir=str(data_dir))
    options = EvalOptions(task_options={name: OPTIONS.get(name, {})})
    return cls.from_options(options, data_dir=str(data_dir))


def test_every_registered_task_is_covered():
    assert set(TASKS.names()) == set(TINY), (
        "a registered task has no tiny data here: add a writer to TINY")


@pytest.mark.parametrize("name", sorted(TINY))
def test_a_task_loads_tiny_data_and_declares_every_text_it_evaluates(name, tmp_path):
    data_dir = TINY[name](tmp_path)
    cls = TASKS.get(name)
    assert (data_dir / cls.metadata.data_folder).is_dir()
    task = _build(name, data_dir)
    subsets = task.load_subsets()
    held = set(cls.texts(data_dir))
    evaluated = {t for s in subsets for t in (*s.texts_a, *s.texts_b)}
    assert subsets and evaluated and evaluated <= held, (
        f"{name}: texts() misses {sorted(evaluated - held)[:3]}")
    assert HELD_OUT_TEXTS.get(cls.metadata.eval_set) == cls.texts
    scores = task.evaluate(HashEncoder(16).encode)
    assert np.isfinite(scores.main_score("meaning"))


def test_the_training_set_keeps_out_what_a_task_declares(full_data_dir, monkeypatch):
    """The overlap filter asks the task: a sentence it declares leaves the training pool."""
    pool = build_training_set(["de"], None, eval_sets=(), data_dir=full_data_dir)
    first = pool.pairs.src[0]
    cls = TASKS.get("sts17")
    monkeypatch.setattr(cls, "texts", classmethod(lambda c, d: [first.upper()]))
    monkeypatch.setitem(HELD_OUT_TEXTS._items, cls.metadata.eval_set, cls.texts)
    kept = build_training_set(["de"], None, eval_sets=("sts17",), data_dir=full_data_dir)
    assert first not in kept.pairs.src and len(kept.pairs) == len(pool.pairs) - 1
    assert kept.languages[0].removed_overlap == {"sts17": 1}


def _toy_sts_data(tmp_path):
    folder = tmp_path / "toy_sts"
    folder.mkdir(parents=True)
    rows = ["sentence1\tsentence2\tscore"] + [
        f"Satz {i} hier.\tSentence {i if i % 2 else i + 1} here.\t{i % 5}" for i in range(12)]
    (folder / "de-en.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return tmp_path


def test_the_worked_task_example_is_one_file_and_one_line(tmp_path):
    """CONTRIBUTING.md's task, executed from the document, registered with its one line:
    the contract, the options, the MTEB writer and the model card all serve it."""
    from contributing import example

    from disembed.evaluation import register_task
    from disembed.reports.mteb_results import task_file_name, task_result
    from disembed.results import RunResult
    from disembed.serving.model_card import eval_results

    ToySTS = example("task")["ToySTS"]
    data_dir = _toy_sts_data(tmp_path)
    register_task(ToySTS)
    try:
        task = TASKS.get("toy-sts").from_options(
            EvalOptions(task_options={"toy-sts": {"pairs": ["de-en"]}}), data_dir=str(data_dir))
        evaluated = {t for s in task.load_subsets() for t in (*s.texts_a, *s.texts_b)}
        assert evaluated == set(ToySTS.texts(data_dir))
        assert HELD_OUT_TEXTS.get("toy-sts") == ToySTS.texts
        scores = task.evaluate(HashEncoder(16).encode)
        assert np.isfinite(scores.main_score("meaning"))
        run = RunResult("hash:16 / baseline", "baseline", {}, {}, scores=[scores])
        mteb = task_result(run, scores)
        assert task_file_name(ToySTS) == "disembed-toy-sts"
        [entry] = mteb["scores"]["test"]
        assert entry["languages"] == ["deu-Latn", "eng-Latn"]
        assert entry["main_score"] == entry["cosine_spearman"] == scores.get(
            "meaning", "de-en", "spearman")
        [card] = eval_results([scores])
        assert card.metric_type == "cos_sim_spearman" and card.dataset_name == "Toy STS"
        with pytest.raises(Exception, match="no option"):
            ToySTS.options_of(EvalOptions(task_options={"toy-sts": {"pair": ["de-en"]}}))
    finally:
        del TASKS._items["toy-sts"], HELD_OUT_TEXTS._items["toy-sts"]
