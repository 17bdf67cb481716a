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


@pytest.mark.parametrize("method", ["seed", "meat"])
def test_interrupted_training_resumes_to_the_same_weights(method, toy_pairs, tmp_path):
    """For MEAT this also covers the discriminator: its weights and Adam state resume."""
    src, tgt, src_lang = toy_pairs
    params = dict(max_epochs=6, batch_size=64, patience=100)
    straight = make_method(method, **params).fit(src, tgt, src_lang, "en")

    class Stop(Exception):
        pass

    interrupted = make_method(method, **params)
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
    resumed = make_method(method, **params).fit(src, tgt, src_lang, "en",
                                                checkpoint_dir=tmp_path)
    assert len(resumed.history_.epochs) == 6
    for key, value in straight.head_.state_dict().items():
        np.testing.assert_allclose(resumed.head_.state_dict()[key].numpy(), value.numpy(),
                                   atol=1e-6)
    if method == "meat":
        for key, value in straight.discriminator_.state_dict().items():
            np.testing.assert_allclose(resumed.discriminator_.state_dict()[key].numpy(),
                                       value.numpy(), atol=1e-6)


def test_checkpoint_of_another_run_is_moved_aside(toy_pairs, tmp_path):
    src, tgt, src_lang = toy_pairs
    make_method("seed", max_epochs=1, batch_size=64).fit(src, tgt, src_lang, "en",
                                                        checkpoint_dir=tmp_path)
    make_method("seed", max_epochs=1, batch_size=32).fit(src, tgt, src_lang, "en",
                                                        checkpoint_dir=tmp_path)
    assert (tmp_path / "checkpoint.stale").exists()


def test_a_checkpoint_of_other_pairs_of_the_same_shape_is_not_resumed(toy_pairs, tmp_path):
    """Issue 32: the checkpoint key holds the training data, not only its shape."""
    src, tgt, src_lang = toy_pairs
    make_method("seed", max_epochs=1, batch_size=64).fit(src, tgt, src_lang, "en",
                                                        checkpoint_dir=tmp_path)
    other = make_method("seed", max_epochs=1, batch_size=64).fit(src[::-1].copy(), tgt, src_lang,
                                                                "en", checkpoint_dir=tmp_path)
    assert (tmp_path / "checkpoint.stale").exists()
    assert len(other.history_.epochs) == 1  # trained on its own pairs, not resumed at epoch 1
    fresh = make_method("seed", max_epochs=1, batch_size=64).fit(src[::-1].copy(), tgt,
                                                                src_lang, "en")
    for key, value in fresh.head_.state_dict().items():
        np.testing.assert_array_equal(other.head_.state_dict()[key].numpy(), value.numpy())


def test_early_stopping_restores_best_epoch(toy_pairs):
    src, tgt, src_lang = toy_pairs
    model = make_method("seed", max_epochs=200, batch_size=64, lr=0.05, patience=2)
    weights = []  # the head's weights at the end of each epoch
    model.fit(src, tgt, src_lang, "en", on_epoch_end=lambda record: weights.append(
        {k: v.detach().clone() for k, v in model.head_.state_dict().items()}))
    hist = model.history_
    # the model keeps the best epoch's weights, not the last one's
    for key, value in model.head_.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), weights[hist.best_epoch - 1][key].numpy())
        assert not np.array_equal(value.numpy(), weights[-1][key].numpy())
    assert hist.stopped_early and hist.stop_reason == "early_stopping" and not hist.budget_bound
    assert hist.epochs_since_best == 2
    best = min(e["val_loss"] for e in hist.epochs)
    assert hist.epochs[hist.best_epoch - 1]["val_loss"] == best
    assert len(hist.epochs) == hist.best_epoch + 2


def test_meat_alternates_discriminator_and_generator_steps(toy_pairs):
    """The discriminator learns to name the language of m while the heads learn to hide it."""
    import torch

    src, tgt, src_lang = toy_pairs
    model = make_method("meat", max_epochs=1, batch_size=64)
    model.languages_ = ["de", "en", "zh"]
    before = model._new_adversary(16).module.weight.detach().clone()  # the seeded init
    steps = {"n": 0}
    real_loss = type(model).adversary_loss

    def counting(self, batch):
        steps["n"] += 1
        return real_loss(self, batch)

    type(model).adversary_loss = counting
    try:
        model.fit(src, tgt, src_lang, "en")
    finally:
        type(model).adversary_loss = real_loss
    assert steps["n"] == 9  # one discriminator step per training batch: ceil(540 / 64)
    assert not torch.equal(model.discriminator_.weight, before)


def test_on_epoch_end_sees_every_epoch(toy_pairs):
    seen = []
    make_method("dream", max_epochs=3, batch_size=64, patience=100).fit(
        *toy_pairs, "en", on_epoch_end=seen.append)
    assert [r["epoch"] for r in seen] == [1, 2, 3] and "val_terms" in seen[0]


def test_stopping_at_max_epochs_while_improving_warns(toy_pairs, caplog):
    src, tgt, src_lang = toy_pairs
    with caplog.at_level("WARNING", logger="disembed"):
        model = make_method("seed", max_epochs=2, batch_size=64).fit(src, tgt, src_lang, "en")
    assert model.history_.best_epoch == 2 and not model.history_.stopped_early
    assert model.history_.stop_reason == "max_epochs" and model.history_.budget_bound
    assert "probably under-trained" in caplog.text


def test_validation_loss_is_measured_on_the_held_out_rows_only():
    """Issue 32: early stopping chooses on rows it never trains on. The loss here is the mean
    row number of the batch, so the recorded validation loss names the rows it was
    measured on."""
    import torch

    from disembed.training.batches import PairData
    from disembed.training.trainer import train

    n = 100
    src = np.repeat(np.arange(n, dtype=np.float32)[:, None], 4, axis=1)
    langs = np.zeros(n, np.int64)
    config = TrainConfig(max_epochs=2, batch_size=16, val_fraction=0.2, seed=3)
    module = torch.nn.Linear(4, 4)
    seen = []

    def loss_fn(batch):
        if module.training:
            seen.extend(batch.s[:, 0].int().tolist())
        zero = sum(p.sum() for p in module.parameters()) * 0.0
        return batch.s[:, 0].mean() + zero, {}

    history = train(module, loss_fn, src, src.copy(), langs, langs, config)
    split = PairData.split(src, src, langs, langs, config)
    val, trained = set(split.val_idx.tolist()), set(split.train_idx.tolist())
    assert len(val) == 20 and len(trained) == 80 and not val & trained
    assert set(seen) == trained  # every training row, no validation row, was trained on
    for record in history.epochs:
        assert record["val_loss"] == pytest.approx(float(np.mean(sorted(val))))


def test_paper_validation_draws_the_same_negatives_every_epoch():
    """The paper form scores every epoch's validation on one fixed draw of negatives (so
    early stopping follows the model, not the draw); the official form draws afresh. The
    loss here depends on the negatives only: the weights never change."""
    import torch

    from disembed.training.trainer import train

    rng = np.random.default_rng(0)
    src = rng.standard_normal((120, 4)).astype(np.float32)
    langs = np.array([0, 1] * 60)
    module = torch.nn.Linear(4, 4)

    def loss_fn(batch):
        zero = sum(p.sum() for p in module.parameters()) * 0.0
        return (batch.s * batch.s[batch.s_neg]).sum(1).mean() + zero, {}

    val = {}
    for negatives in ("paper", "official"):
        config = TrainConfig(max_epochs=4, batch_size=16, patience=100, negatives=negatives,
                             weight_decay=0.0)
        val[negatives] = [e["val_loss"] for e in train(module, loss_fn, src, src, langs, langs,
                                                       config).epochs]
    assert len(set(val["paper"])) == 1
    assert len(set(val["official"])) == 4
