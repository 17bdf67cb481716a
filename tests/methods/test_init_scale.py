"""``init_scale``: trained recipes with linear heads can start from the input itself."""

import numpy as np
import pytest
import torch

from disembed.exceptions import ConfigError
from disembed.methods import load_disentangler, make_method


def test_seed_head_starts_at_a_scaled_identity():
    model = make_method("seed", init_scale=0.9)
    head = model._new_head(8)
    e = torch.randn(5, 8)
    m, lang = head(e)
    torch.testing.assert_close(m, 0.9 * e)
    torch.testing.assert_close(lang, 0.1 * e)


def test_two_heads_start_with_meaning_plus_language_equal_to_the_input():
    model = make_method("meat", init_scale=0.7)
    model.languages_ = ["de", "en"]
    head = model._new_head(6)
    e = torch.randn(4, 6)
    m, lang = head(e)
    torch.testing.assert_close(m + lang, e)
    torch.testing.assert_close(m, 0.7 * e)


def test_the_default_keeps_the_papers_random_start():
    a = make_method("seed")._new_head(8)
    assert not torch.allclose(a.meaning.weight, torch.eye(8) * a.meaning.weight[0, 0])


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 2.0])
def test_init_scale_outside_the_open_unit_interval_is_refused(bad):
    with pytest.raises(ConfigError, match=r"init_scale must be a finite number in \(0, 1\)"):
        make_method("seed", init_scale=bad)


def test_hidden_layers_cannot_start_at_the_identity():
    model = make_method("dream", init_scale=0.9, hidden=16)
    model.languages_ = ["de", "en"]
    with pytest.raises(ConfigError, match="use hidden=0"):
        model._new_head(8)


def test_fitted_model_keeps_init_scale_through_save_and_load(toy_pairs, tmp_path):
    src, tgt, langs = toy_pairs
    model = make_method("seed", init_scale=0.9, max_epochs=2).fit(src, tgt, langs, "en")
    again = load_disentangler(model.save(tmp_path / "m"))
    assert again.get_params()["init_scale"] == 0.9
    np.testing.assert_array_equal(again.meaning(src[:5], "de"), model.meaning(src[:5], "de"))
