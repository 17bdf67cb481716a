"""How a run ends (stop reasons, budgets) and how it reports progress."""

import logging

import pytest

import disembed.training.trainer as trainer_module
from disembed.exceptions import ConfigError
from disembed.methods import make_method
from disembed.training import STOP_REASONS, TrainConfig


def fit(toy_pairs, method="seed", **params):
    src, tgt, src_lang = toy_pairs
    return make_method(method, batch_size=64, **params).fit(src, tgt, src_lang, "en")


def test_no_epoch_cap_by_default():
    assert TrainConfig().max_epochs is None
    assert make_method("seed").max_epochs is None
    assert make_method("meat").train_config.max_epochs is None


@pytest.mark.parametrize("field, value", [("max_epochs", 0), ("max_steps", 0),
                                          ("time_budget_seconds", 0.0)])
def test_budgets_must_be_positive(field, value):
    with pytest.raises(ConfigError, match=field):
        TrainConfig(**{field: value})


def test_max_steps_ends_the_run_mid_epoch(toy_pairs):
    hist = fit(toy_pairs, max_steps=12, patience=100).history_  # 9 batches per epoch
    assert hist.stop_reason == "max_steps" and hist.steps == 12
    assert [e["steps"] for e in hist.epochs] == [9, 3]
    assert hist.epochs[1]["train_pairs"] == 3 * 64


def test_time_budget_ends_the_run(toy_pairs, monkeypatch):
    class Clock:  # every reading of the clock advances it one second
        now = 0.0

        def perf_counter(self):
            self.now += 1.0
            return self.now

    monkeypatch.setattr(trainer_module, "time", Clock())
    hist = fit(toy_pairs, time_budget_seconds=15, patience=100).history_
    assert hist.stop_reason == "time_budget"
    assert 15 <= hist.spent_seconds <= 15 + 12  # stops at the first check past the budget
    assert 1 <= len(hist.epochs) < 5


def test_safety_ceiling_is_a_reported_stop_reason(toy_pairs, monkeypatch, caplog):
    monkeypatch.setattr(trainer_module, "SAFETY_MAX_EPOCHS", 3)
    with caplog.at_level("WARNING", logger="disembed"):
        hist = fit(toy_pairs, patience=100).history_
    assert hist.stop_reason == "safety_ceiling" and len(hist.epochs) == 3
    assert "safety ceiling of 3 epochs" in caplog.text


def test_a_budget_after_the_best_epoch_is_not_budget_bound(toy_pairs):
    early = fit(toy_pairs, lr=0.05, patience=2, max_epochs=200).history_
    assert early.stop_reason == "early_stopping"
    cut = fit(toy_pairs, lr=0.05, patience=100, max_epochs=len(early.epochs)).history_
    assert cut.stop_reason == "max_epochs" and cut.best_epoch == early.best_epoch
    assert cut.best_epoch < len(cut.epochs) and not cut.budget_bound
    assert cut.epochs_since_best == len(cut.epochs) - cut.best_epoch


def test_stop_reason_and_budget_bound_are_saved_with_the_model(toy_pairs, tmp_path):
    import json

    model = fit(toy_pairs, max_epochs=2)
    model.save(tmp_path / "m")
    training = json.loads((tmp_path / "m" / "config.json").read_text())["learned"]["training"]
    assert training["stop_reason"] == "max_epochs" and training["budget_bound"] is True
    assert training["stop_reason"] in STOP_REASONS


class CountingBar:
    """Stands in for tqdm: counts bars and remembers what they were told."""

    made: list["CountingBar"] = []

    def __init__(self, *args, total=None, initial=0, **kwargs):
        self.total, self.n, self.postfixes = total, initial, []
        CountingBar.made.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.n += n

    def set_postfix(self, **values):
        self.postfixes.append(values)


@pytest.fixture
def bars(monkeypatch):
    import disembed.progress

    CountingBar.made = []
    monkeypatch.setattr(disembed.progress, "tqdm", CountingBar)
    return CountingBar.made


def test_one_progress_bar_over_epochs_with_losses_and_best_epoch(toy_pairs, bars):
    fit(toy_pairs, max_epochs=3, patience=100)
    assert len(bars) == 1
    bar = bars[0]
    assert bar.total == 3 and bar.n == 3 and len(bar.postfixes) == 3
    assert {"train", "val", "best"} <= set(bar.postfixes[-1])


def test_open_ended_bar_without_max_epochs(toy_pairs, bars):
    fit(toy_pairs, max_steps=10, patience=100)
    assert len(bars) == 1 and bars[0].total is None and bars[0].n == 2


def test_epoch_lines_are_debug_and_the_summary_is_info(toy_pairs, caplog):
    with caplog.at_level(logging.INFO, logger="disembed"):
        fit(toy_pairs, max_epochs=2, patience=100)
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert not any(m.startswith("epoch ") for m in infos)
    assert any(m.startswith("trained 2 epochs") and "max_epochs=2" in m for m in infos)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="disembed"):
        fit(toy_pairs, max_epochs=2, patience=100)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert sum(m.startswith("epoch ") for m in debug) == 2
