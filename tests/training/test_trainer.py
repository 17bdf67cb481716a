import numpy as np
import pytest

from disembed.exceptions import ConfigError, DataError
from disembed.methods import make_method
from disembed.training import TrainConfig


def test_config_validation_says_what_is_wrong():
    with pytest.raises(ConfigError, match="batch_size must be >= 2"):
        TrainConfig(batch_size=1)
    with pytest.raises(ConfigError, match="negatives must be"):
        TrainConfig(negatives="random")


def test_too_few_pairs_is_a_clear_error():
    X = np.zeros((3, 4), np.float32)
    with pytest.raises(DataError, match="training pairs"):
        make_method("seed").fit(X, X, "de", "en")


def test_interrupted_training_resumes_to_the_same_weights(toy_pairs, tmp_path):
    src, tgt, src_lang = toy_pairs
    params = dict(max_epochs=6, batch_size=64, patience=100)
    straight = make_method("seed", **params).fit(src, tgt, src_lang, "en")

    class Stop(Exception):
        pass

    interrupted = make_method("seed", **params)
    import disembed.training.trainer as trainer_module

    real_save = trainer_module.save_checkpoint
    calls = {"n": 0}

    def save_then_maybe_die(directory, state):
        real_save(directory, state)
        calls["n"] += 1
        if calls["n"] == 3:
            raise Stop

    trainer_module.save_checkpoint = save_then_maybe_die
    try:
        with pytest.raises(Stop):
            interrupted.fit(src, tgt, src_lang, "en", checkpoint_dir=tmp_path)
    finally:
        trainer_module.save_checkpoint = real_save
    resumed = make_method("seed", **params).fit(src, tgt, src_lang, "en", checkpoint_dir=tmp_path)
    assert len(resumed.history_.epochs) == 6
    for key, value in straight.head_.state_dict().items():
        np.testing.assert_allclose(resumed.head_.state_dict()[key].numpy(), value.numpy(),
                                   atol=1e-6)


def test_checkpoint_of_another_run_is_moved_aside(toy_pairs, tmp_path):
    src, tgt, src_lang = toy_pairs
    make_method("seed", max_epochs=1, batch_size=64).fit(src, tgt, src_lang, "en",
                                                        checkpoint_dir=tmp_path)
    make_method("seed", max_epochs=1, batch_size=32).fit(src, tgt, src_lang, "en",
                                                        checkpoint_dir=tmp_path)
    assert (tmp_path / "checkpoint.stale").exists()


def test_early_stopping_restores_best_epoch(toy_pairs):
    src, tgt, src_lang = toy_pairs
    model = make_method("seed", max_epochs=200, batch_size=64, lr=0.05, patience=2)
    model.fit(src, tgt, src_lang, "en")
    hist = model.history_
    assert hist.stopped_early
    best = min(e["val_loss"] for e in hist.epochs)
    assert hist.epochs[hist.best_epoch - 1]["val_loss"] == best
    assert len(hist.epochs) == hist.best_epoch + 2
