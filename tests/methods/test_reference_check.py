"""``reference_check``: the default recipe checks itself against mean-centering on held-out
pairs of the user's own data and keeps the better one or a blend (issue 46,
:mod:`disembed.methods.guard`)."""

import logging

import numpy as np
import pytest
import torch

from disembed.methods import load_disentangler, make_method
from disembed.methods.guard import (
    blend_head,
    check_against_reference,
    holdout_split,
    summary_line,
)

FAST = {"init_scale": 0.9, "lr": 3e-3, "max_epochs": 3}


def _nuisance_pairs(n=400, d=16, seed=0):
    """Pairs whose rows carry a large random component along one direction ``u``, drawn
    independently for a sentence and its translation: centring keeps it (mean-centering's
    margins suffer), a head that projects ``u`` out removes it."""
    rng = np.random.default_rng(seed)
    u = np.zeros(d)
    u[0] = 1.0
    meaning = rng.standard_normal((n, d))
    meaning[:, 0] = 0
    langs = np.array(["de", "zh"] * (n // 2), dtype=object)
    offsets = {x: 3 * rng.standard_normal(d) for x in ("de", "zh", "en")}
    src = meaning + np.stack([offsets[x] for x in langs]) + 6 * rng.standard_normal((n, 1)) * u
    tgt = meaning + offsets["en"] + 6 * rng.standard_normal((n, 1)) * u
    return src.astype(np.float32), tgt.astype(np.float32), langs, u


def _held(src, tgt, langs, fraction=0.2, seed=0):
    t_lang = np.array(["en"] * len(src), dtype=object)
    _, held = holdout_split(langs, t_lang, fraction, seed)
    return src[held], tgt[held], langs[held], t_lang[held]


def _set_head(model, weight, bias):
    with torch.no_grad():
        model.head_.meaning.weight.copy_(torch.as_tensor(weight, dtype=torch.float32))
        model.head_.meaning.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))


def test_held_out_pairs_are_never_trained_on(toy_pairs):
    src, tgt, langs = toy_pairs
    model = make_method("seed-centered", **FAST, reference_check=0.2).fit(src, tgt, langs, "en")
    rows, held = holdout_split(langs, np.array(["en"] * len(src), dtype=object), 0.2, 0)
    assert len(held) == 120 and not set(rows) & set(held)
    de = rows[langs[rows] == "de"]
    expected = (src[de].sum(0) + 0) / len(de)  # the de mean of the training rows only
    got = model.centering_.means_[model.centering_.languages_.index("de")]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    history = model.history_
    assert history.train_pairs + history.val_pairs == len(rows)
    assert model.reference_check_["held_out_pairs"] == len(held)


def test_a_head_that_loses_becomes_mean_centering_exactly_with_a_warning(toy_pairs, caplog):
    src, tgt, langs = toy_pairs
    model = make_method("seed-centered", **FAST).fit(src, tgt, langs, "en")
    rng = np.random.default_rng(1)
    _set_head(model, rng.standard_normal((16, 16)), rng.standard_normal(16))  # a bad head
    with caplog.at_level(logging.WARNING, logger="disembed"):
        record = check_against_reference(model, *_held(src, tgt, langs))
    assert record["kept_alpha"] == 0.0 and not record["beat_reference"]
    reference = make_method("mean-centering").fit(src, tgt, langs, "en")
    np.testing.assert_allclose(model.meaning(src[:50], langs[:50]),
                               reference.meaning(src[:50], langs[:50]), atol=1e-5)
    assert "did not beat" in caplog.text
    assert record["summary"].startswith("kept mean-centering")


def test_a_head_that_wins_is_kept_and_called_a_win():
    src, tgt, langs, u = _nuisance_pairs()
    model = make_method("seed-centered", **FAST).fit(src, tgt, langs, "en")
    _set_head(model, np.eye(16) - np.outer(u, u), np.zeros(16))  # projects the nuisance out
    record = check_against_reference(model, *_held(src, tgt, langs))
    assert record["beat_reference"] and record["kept_alpha"] > 0
    assert record["ci_low"] > 0 and record["delta"] > 0
    assert record["leakage"] <= record["leakage_limit"]
    assert record["summary"].startswith("kept the learned head") or "blend" in record["summary"]


def test_a_blend_is_one_linear_head_between_the_fit_and_the_identity():
    head = make_method("seed-centered").build_head(4)
    weight, bias = 2 * np.eye(4) + 1.0, np.arange(4.0)
    blend_head(head, weight, bias, 0.25)
    np.testing.assert_allclose(head.meaning.weight.detach().numpy(),
                               0.25 * weight + 0.75 * np.eye(4), rtol=1e-6)
    np.testing.assert_allclose(head.meaning.bias.detach().numpy(), 0.25 * bias, rtol=1e-6)


def test_an_indistinguishable_fit_is_not_called_a_win():
    record = {"beat_reference": False, "kept_alpha": 0.0, "chosen_alpha": 0.5, "delta": 0.1,
              "ci_low": -0.2, "ci_high": 0.4, "confirm_pairs": 100, "leakage": 1.0,
              "leakage_limit": 5.0, "reference_retrieval": 90.0}
    line = summary_line(record)
    assert "did not beat" in line and "[-0.20, +0.40]" in line and "leakage 1.0%" in line
    assert "win" not in line and "beat mean-centering;" not in line


def test_the_record_is_saved_with_the_model(toy_pairs, tmp_path):
    src, tgt, langs = toy_pairs
    model = make_method("seed-centered", **FAST, reference_check=0.1).fit(src, tgt, langs, "en")
    model.save(tmp_path / "m")
    again = load_disentangler(tmp_path / "m")
    assert again.reference_check_["summary"] == model.reference_check_["summary"]
    np.testing.assert_array_equal(again.meaning(src[:5], langs[:5]),
                                  model.meaning(src[:5], langs[:5]))


@pytest.mark.parametrize("fraction", [0.0, 0.6])
def test_a_held_out_fraction_outside_the_open_interval_is_refused(fraction):
    from disembed.exceptions import ConfigError
    with pytest.raises((ConfigError, ValueError)):
        make_method("seed-centered", reference_check=fraction).check_params(
            {"reference_check": fraction})


def test_a_better_point_estimate_whose_interval_holds_zero_is_not_kept(monkeypatch):
    """The bug: keeping the blend whenever it scores higher on the choosing half."""
    import disembed.methods.guard as guard

    src, tgt, langs, u = _nuisance_pairs()
    model = make_method("seed-centered", **FAST).fit(src, tgt, langs, "en")
    _set_head(model, np.eye(16) - np.outer(u, u), np.zeros(16))
    monkeypatch.setattr(guard, "bootstrap_interval", lambda a, b, seed=0: (0.01, -0.01, 0.03))
    record = guard.check_against_reference(model, *_held(src, tgt, langs))
    assert record["chosen_alpha"] > 0 and not record["beat_reference"]
    assert record["kept_alpha"] == 0.0
    np.testing.assert_allclose(model.head_.meaning.weight.detach().numpy(), np.eye(16),
                               atol=1e-7)


def test_an_epoch_has_at_least_min_epoch_steps_steps():
    """The cause of the drift on small sets: 2,000 pairs in batches of 512 made 4-step
    epochs, and early stopping ended the fit at epoch 1, near its start."""
    model = make_method("seed-centered", min_epoch_steps=8)
    assert model._config_for(2000).batch_size == 1800 // 8
    assert model._config_for(100_000).batch_size == 512  # large sets keep the batch
    assert make_method("seed-centered")._config_for(2000).batch_size == 512  # off by default


def test_the_default_recipe_stops_no_earlier_than_its_start_on_a_small_set(toy_pairs):
    from disembed.experiment import DEFAULT_RECIPE_PARAMS

    src, tgt, langs = toy_pairs
    params = {**DEFAULT_RECIPE_PARAMS, "mirror": False, "max_epochs": 2}
    model = make_method("seed-centered", **params).fit(src, tgt, langs, "en")
    assert model.history_.steps >= 2 * 8  # 540 training pairs: 8 steps an epoch, not 2
