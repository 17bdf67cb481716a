"""What a trained recipe hands the trainer (issue 32): a centred recipe centres each side by
its own languages' means, and a checkpoint is resumed only by a run with the same
parameters, also those the trainer's config does not hold."""

import numpy as np

import disembed.methods.neural as neural
from disembed.methods import make_method


def test_a_centred_recipe_centres_each_side_by_its_own_languages(toy_pairs, monkeypatch):
    src, tgt, src_lang = toy_pairs
    seen = {}
    real_train = neural.train

    def spy(module, loss_fn, s, t, s_ids, t_ids, config, **kwargs):
        seen.update(src=s, tgt=t)
        return real_train(module, loss_fn, s, t, s_ids, t_ids, config, **kwargs)

    monkeypatch.setattr(neural, "train", spy)
    model = make_method("seed-centered", max_epochs=1, batch_size=64).fit(src, tgt, src_lang,
                                                                          "en")
    means = model.centering_
    np.testing.assert_allclose(seen["src"], src - means.language(src, src_lang), atol=1e-6)
    np.testing.assert_allclose(seen["tgt"], tgt - means.language(tgt, "en"), atol=1e-6)
    # the English mean, not a source language's, is what the English side loses
    assert not np.allclose(means.language(tgt[:1], "en"), means.language(tgt[:1], "de"))


def test_a_checkpoint_of_other_recipe_parameters_is_not_resumed(toy_pairs, tmp_path):
    """init_scale is not a trainer setting: a checkpoint from init_scale=0.5 must not be
    resumed by a run with the papers' random start."""
    src, tgt, src_lang = toy_pairs
    make_method("seed", max_epochs=1, batch_size=64, init_scale=0.5).fit(
        src, tgt, src_lang, "en", checkpoint_dir=tmp_path)
    resumed = make_method("seed", max_epochs=1, batch_size=64).fit(
        src, tgt, src_lang, "en", checkpoint_dir=tmp_path)
    assert (tmp_path / "checkpoint.stale").exists()
    fresh = make_method("seed", max_epochs=1, batch_size=64).fit(src, tgt, src_lang, "en")
    for key, value in fresh.head_.state_dict().items():
        np.testing.assert_array_equal(resumed.head_.state_dict()[key].numpy(), value.numpy())
