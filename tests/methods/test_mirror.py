"""``mirror=True``: two fits from both orientations of the meaning bias, the one the
validation data prefers kept (issue 37, :mod:`disembed.methods.orientation`)."""

import logging

import numpy as np
import pytest

from disembed.exceptions import ConfigError
from disembed.methods import load_disentangler, make_method
from disembed.methods.orientation import MIRROR_START, mirrored_start

FAST = {"init_scale": 0.9, "lr": 3e-3, "max_epochs": 3}


def _bias(model):
    return model.head_.meaning.bias.detach().numpy().copy()


def _cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


class Along:
    """A validator that prefers a meaning bias along ``sign`` times the first arm's bias;
    it records the bias of every model it is shown."""

    def __init__(self, sign: float) -> None:
        self.sign, self.seen = sign, []

    def __call__(self, model) -> float:
        self.seen.append(_bias(model))
        return self.sign * float(self.seen[-1] @ self.seen[0])


def _fit(toy_pairs, validate, **params):
    src, tgt, langs = toy_pairs
    return make_method("seed-centered", **{**FAST, **params}).fit(src, tgt, langs, "en",
                                                                   validate=validate)


def test_the_mirrored_arm_ends_on_the_other_side_and_validation_chooses(toy_pairs):
    keep_first, keep_second = Along(+1), Along(-1)
    first = _fit(toy_pairs, keep_first, mirror=True)
    second = _fit(toy_pairs, keep_second, mirror=True)
    assert len(keep_first.seen) == len(keep_second.seen) == 2  # both arms scored, once each
    trained, mirrored = keep_first.seen
    assert _cos(trained, mirrored) < -0.9  # the flipped start decided the side
    assert first.orientation_["kept"] == "trained" and second.orientation_["kept"] == "mirrored"
    np.testing.assert_array_equal(_bias(first), trained)
    np.testing.assert_array_equal(_bias(second), mirrored)
    assert second.orientation_["scores"]["mirrored"] > second.orientation_["scores"]["trained"]
    assert first.orientation_["steps"] == 2 * first.history_.steps  # both arms' steps


def test_the_trained_arm_is_the_plain_fit_bit_for_bit(toy_pairs):
    src, tgt, langs = toy_pairs
    mirrored = _fit(toy_pairs, Along(+1), mirror=True)
    plain = make_method("seed-centered", **FAST).fit(src, tgt, langs, "en")
    np.testing.assert_array_equal(mirrored.meaning(src[:20], "de"), plain.meaning(src[:20], "de"))
    assert plain.orientation_ is None


def test_the_mirrored_start_is_the_flipped_unit_direction_times_the_constant():
    start = mirrored_start(np.array([3.0, 4.0]))
    np.testing.assert_allclose(start, [-0.6 * MIRROR_START, -0.8 * MIRROR_START], rtol=1e-6)
    with pytest.raises(ConfigError, match="nothing to mirror"):
        mirrored_start(np.zeros(3))


def test_mirror_without_validation_data_is_refused_before_training(toy_pairs, monkeypatch):
    import disembed.methods.neural as neural

    monkeypatch.setattr(neural, "train", lambda *a, **k: pytest.fail("trained anyway"))
    with pytest.raises(ConfigError, match=r"pass validate=.*qe_dev_validator.*mirror=False"):
        _fit(toy_pairs, None, mirror=True)


def test_a_hidden_meaning_layer_has_no_bias_to_mirror(toy_pairs):
    src, tgt, langs = toy_pairs
    model = make_method("dream", hidden=8, max_epochs=1, mirror=True)
    with pytest.raises(ConfigError, match="use hidden=0, or mirror=False"):
        model.fit(src, tgt, langs, "en", validate=lambda m: 0.0)


def test_non_finite_validation_scores_are_refused(toy_pairs):
    with pytest.raises(ConfigError, match="needs finite scores"):
        _fit(toy_pairs, lambda m: float("nan"), mirror=True)


def test_the_choice_is_saved_with_the_model(toy_pairs, tmp_path):
    src, _, _ = toy_pairs
    model = _fit(toy_pairs, Along(-1), mirror=True)
    again = load_disentangler(model.save(tmp_path / "m"))
    assert again.get_params()["mirror"] is True
    assert again.orientation_ == model.orientation_
    np.testing.assert_array_equal(again.meaning(src[:5], "de"), model.meaning(src[:5], "de"))


def test_each_arm_resumes_from_its_own_checkpoint(toy_pairs, tmp_path, caplog):
    first = _fit(toy_pairs, Along(-1), mirror=True)
    src, tgt, langs = toy_pairs
    folder = tmp_path / "ckpt"
    model = make_method("seed-centered", **FAST, mirror=True)
    model.fit(src, tgt, langs, "en", validate=Along(-1), checkpoint_dir=folder)
    assert (folder / "mirrored").is_dir()
    again = make_method("seed-centered", **FAST, mirror=True)
    with caplog.at_level(logging.INFO, logger="disembed.training.trainer"):
        again.fit(src, tgt, langs, "en", validate=Along(-1), checkpoint_dir=folder)
    resumed = [r.getMessage() for r in caplog.records if "resuming from" in r.getMessage()]
    assert len(resumed) == 2 and any("mirrored" in m for m in resumed)  # neither arm refitted
    np.testing.assert_array_equal(_bias(again), _bias(first))
