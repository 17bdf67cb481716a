"""The constraint library: each term declares the optional views it reads, once; the
views' cosines and unit vectors, and the terms no recipe test pins, against numpy."""

import numpy as np
import pytest
import torch

from disembed.exceptions import ConfigError
from disembed.methods.constraints import (
    EPS,
    TERMS,
    BatchViews,
    Term,
    _InverseNorm,
    add_weights,
    check_weights,
    cos,
    masked_mean,
    needs_of,
    orthogonality,
    orthogonality_abs,
    pick,
    term_table,
)
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


def _views(gen, B=6, d=5, dtype=torch.float64):
    names = ("s", "t", "s_M", "s_L", "t_M", "t_L")
    x = {k: torch.randn(B, d, generator=gen, dtype=dtype, requires_grad=True) for k in names}
    s_neg, t_neg = torch.tensor([1, 0, 3, 2, 5, 4]), torch.tensor([2, 3, 4, 5, 0, 1])
    negs = {f"{side}n{part}": pick(x[f"{side}{part}"], idx) for side, idx in
            (("s", s_neg), ("t", t_neg)) for part in ("", "_M", "_L")}
    return x, BatchViews(**x, **negs, neg_s=torch.ones(B), neg_t=torch.ones(B), s_neg=s_neg,
                         t_neg=t_neg)


@pytest.mark.parametrize("a, b", [("s_M", "t_M"), ("s_L", "sn_L"), ("t_M", "tn_M"),
                                  ("s", "s_M+sn_L"), ("t", "s_M+t_L"), ("s_M", "s_L"),
                                  ("s", "sn_M+sn_L")])
def test_view_cosine_equals_the_cosine_of_the_rows_with_its_gradient(a, b):
    """``BatchViews.cos`` (dot product x cached inverse norms, negatives' norms gathered)
    against the plain unit-vector cosine, values and gradients, in float64."""
    x, views = _views(torch.Generator().manual_seed(0))

    def rows(name):
        return sum(getattr(views, part) for part in name.split("+"))

    fast, reference = views.cos(a, b), cos(rows(a), rows(b))
    torch.testing.assert_close(fast, reference, rtol=1e-12, atol=1e-12)
    grads = torch.autograd.grad(fast.sum(), list(x.values()), allow_unused=True,
                                retain_graph=True)
    expected = torch.autograd.grad(reference.sum(), list(x.values()), allow_unused=True)
    for got, want in zip(grads, expected, strict=True):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_inverse_norm_gradient_including_a_row_held_by_eps():
    x = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x[2] = 0.0  # |x| < eps: 1/eps, no gradient
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(_InverseNorm.apply, (x,))
    assert _InverseNorm.apply(x)[2].item() == pytest.approx(1 / EPS)


def test_term_table_names_terms_after_their_functions_and_refuses_a_name_twice():
    def first(v):
        return v

    def second(v):
        return v

    table = term_table(first, (second, ["lang", "lid"]))
    assert table == {"first": Term("first", first, frozenset()),
                     "second": Term("second", second, frozenset({"lang", "lid"}))}
    with pytest.raises(ConfigError, match="constraint term 'first' is defined twice"):
        term_table(first, second, (first, ("adv",)))


def _np_rows(views, name):
    return sum(getattr(views, part).detach().numpy() for part in name.split("+"))


@pytest.mark.parametrize("name", ["s_L", "t_L", "sn_L", "tn_M", "s_M+sn_L"])
def test_view_unit_vectors_are_the_rows_over_their_length(name):
    _, views = _views(torch.Generator().manual_seed(2))
    rows = _np_rows(views, name)
    want = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    np.testing.assert_allclose(views.unit(name).detach().numpy(), want, rtol=1e-12)
    assert views.unit(name) is views.unit(name)  # once per batch


@pytest.mark.parametrize("term, fold", [(orthogonality, lambda c: max(c, 0.0)),
                                        (orthogonality_abs, abs)])
def test_orthogonality_terms_against_the_row_by_row_formula(term, fold):
    """``mean_i f(cos(s_M^i, s_L^i)) + mean_i f(cos(t_M^i, t_L^i))``, f = relu or abs."""
    _, views = _views(torch.Generator().manual_seed(3))

    def side(m, l):  # noqa: E741
        M, L = _np_rows(views, m), _np_rows(views, l)
        return np.mean([fold(M[i] @ L[i] / np.linalg.norm(M[i]) / np.linalg.norm(L[i]))
                        for i in range(len(M))])

    want = side("s_M", "s_L") + side("t_M", "t_L")
    assert side("t_M", "t_L") > 1e-3  # the t side counts (a sign error in the sum shows)
    assert term(views).item() == pytest.approx(want, rel=1e-12)


def test_a_missing_optional_view_is_named_with_what_to_do():
    _, views = _views(torch.Generator().manual_seed(4))
    views.s_adv = torch.zeros(6, 3)  # a discriminator's logits on s_M, none on t_M
    with pytest.raises(ConfigError) as err:
        TERMS["adversarial_uniform"].fn(views)
    assert str(err.value) == (
        "this constraint term needs the batch views ['t_adv'], which this recipe's head does "
        "not produce (language ids, a language classifier or a discriminator); use a recipe "
        "that has them")


@pytest.mark.parametrize("negative, base", [("sn_M", "s_M"), ("tn_L", "t_L"), ("sn", "s")])
def test_a_gathered_negative_reuses_its_base_views_inverse_norms(negative, base):
    """The inverse norms of an in-batch negative are picked from its base view's (one norm
    pass per view per batch, not one per negative), and equal the direct computation."""
    x, views = _views(torch.Generator().manual_seed(5))
    got = views.inv_norm(negative)
    assert base in views._inv_norms  # the shortcut was taken
    direct = 1 / torch.linalg.vector_norm(getattr(views, negative), dim=-1).clamp_min(EPS)
    torch.testing.assert_close(got, direct, rtol=1e-12, atol=0)
    # a sum of negatives is not a gathered view: computed from its own rows
    fresh = _views(torch.Generator().manual_seed(5))[1]
    fresh.inv_norm("sn_M+sn_L")
    assert set(fresh._inv_norms) == {"sn_M+sn_L"}


def test_masked_mean_averages_the_selected_rows_only():
    x = torch.tensor([1.0, 2.0, 4.0, 8.0])
    assert masked_mean(x, torch.tensor([0.0, 0.0, 1.0, 0.0])).item() == 4.0  # one row
    assert masked_mean(x, torch.tensor([1.0, 0.0, 0.0, 1.0])).item() == 4.5
    assert masked_mean(x, torch.zeros(4)).item() == 0.0  # no row: 0, not nan


def test_check_weights_names_unknown_terms_and_refuses_none():
    with pytest.raises(ConfigError) as err:
        check_weights({"translation_meaning_pull": 1.0, "no_such_term": 2.0})
    assert str(err.value) == (f"unknown constraint term(s) ['no_such_term']; known terms: "
                              f"{sorted(TERMS)}")
    with pytest.raises(ConfigError) as err:
        check_weights({})
    assert str(err.value) == "a recipe needs at least one constraint term with a weight"
    assert check_weights({"translation_meaning_pull": 2}) == {"translation_meaning_pull": 2.0}


def test_add_weights_sums_a_term_present_in_several_presets():
    assert add_weights({"a": 1, "b": 0.5}, {"b": 2, "c": 3}) == {"a": 1.0, "b": 2.5, "c": 3.0}
    assert all(type(w) is float for w in add_weights({"a": 1}).values())
