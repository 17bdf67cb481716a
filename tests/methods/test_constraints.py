"""The constraint library: each term declares the optional views it reads, once."""

import pytest
import torch

from disembed.exceptions import ConfigError
from disembed.methods.constraints import TERMS, BatchViews, needs_of
from disembed.methods.dream import DREAM_WEIGHTS
from disembed.methods.meat import MEAT_WEIGHTS


def test_needs_are_derived_from_the_terms():
    assert needs_of(DREAM_WEIGHTS) == {"lid", "lang"}
    assert needs_of(MEAT_WEIGHTS) == {"adv"}
    assert needs_of(["language_cluster", "orthogonality"]) == {"lang"}  # ORACLE, paper form
    assert needs_of(["language_cluster_batch", "language_push_translation"]) == set()
    assert all(term.name == name and term.fn.__name__ == name for name, term in TERMS.items())


def test_declared_needs_match_what_each_term_reads():
    """A term without its optional views fails exactly when it declares it needs some."""
    g = torch.Generator().manual_seed(0)
    x = {k: torch.randn(4, 3, generator=g) for k in
         ("s", "t", "s_M", "s_L", "t_M", "t_L", "sn", "sn_M", "sn_L", "tn", "tn_M", "tn_L")}
    for name, term in TERMS.items():
        views = BatchViews(**x, neg_s=torch.ones(4), neg_t=torch.ones(4))
        if term.needs:
            with pytest.raises(ConfigError, match="needs the batch views"):
                term.fn(views)
        else:
            assert torch.isfinite(term.fn(views)), name
