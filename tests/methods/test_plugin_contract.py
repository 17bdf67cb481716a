"""Every registered recipe passes the plugin contract (:mod:`recipe_contract`): declared,
saved, loaded, served, exported and tuned. A new recipe is covered by registering it; one
that forgets a declaration, or declares it wrongly, fails here."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from recipe_contract import (
    check_declarations,
    check_export,
    check_language_declaration_is_true,
    check_recipe,
    fitted,
)
from toy_recipe import Shift

from disembed.methods import METHODS, Disentangler, fitting, resolving


@contextlib.contextmanager
def registered(cls: type[Disentangler]):
    """``cls`` in the method registry for the duration (one registry line, undone)."""
    METHODS.add(cls.method, cls)
    try:
        yield
    finally:
        del METHODS._items[cls.method]


@pytest.mark.parametrize("name", METHODS.names())
def test_every_registered_recipe_passes_the_contract(name, full_data_dir, tmp_path):
    check_recipe(name, full_data_dir, tmp_path)


def test_a_toy_recipe_registered_in_one_line_passes_the_whole_contract(full_data_dir,
                                                                        tmp_path):
    with registered(Shift):
        check_recipe("shift", full_data_dir, tmp_path)
    assert "shift" not in METHODS


class Undeclared(Disentangler):
    """A recipe that never says whether it uses the language."""

    method = "undeclared"
    has_language = False

    def __init__(self) -> None:
        pass

    @fitting
    def fit(self, src, tgt, src_lang, tgt_lang):
        self.dim_ = int(src.shape[1])
        return self

    @resolving
    def meaning(self, X, languages=None):
        return self._check(X)


class Liar(Shift):
    """Says it ignores the language, but its meaning part depends on it."""

    method = "liar"

    @resolving
    def meaning(self, X, languages=None):
        shift = 0.0 if languages == "en" else 1.0
        return super().meaning(X, languages) + shift


class BadGrid(Shift):
    method = "bad-grid"
    hpo_default = {"lr": [1e-3]}


class WrongExport(Shift):
    method = "wrong-export"

    def meaning_map(self):
        mmap = super().meaning_map()
        mmap.routes[""][0] = mmap.routes[""][0].__class__(
            mmap.routes[""][0].weight, np.zeros_like(mmap.routes[""][0].bias))
        return mmap


def test_a_recipe_without_its_declarations_fails_the_contract():
    with registered(Undeclared), pytest.raises(AssertionError, match="must declare uses_lang"):
        check_declarations("undeclared")
    with registered(BadGrid), pytest.raises(AssertionError, match="does not take"):
        check_declarations("bad-grid")


def test_a_recipe_that_declares_wrongly_or_exports_wrongly_fails_the_contract():
    with registered(Liar), pytest.raises(AssertionError, match="uses_language=False"):
        check_language_declaration_is_true(fitted("liar"))
    with registered(WrongExport), pytest.raises(AssertionError, match="export differs"):
        check_export(fitted("wrong-export"))


def test_an_unexportable_recipe_says_how_to_serve_it():
    from disembed.exceptions import ConfigError

    with registered(Undeclared), pytest.raises(ConfigError, match="disembed serve --model"):
        fitted("undeclared").meaning_map()


def test_the_worked_encoder_example_round_trips_when_registered():
    from toy_recipe import ConstantEncoder

    from disembed.encoders import BACKENDS, ENCODERS, load_encoder, rebuild_encoder, register

    register("constant", ConstantEncoder, lambda arg, **options: ConstantEncoder(int(arg or 8)))
    try:
        encoder = load_encoder("constant:4")
        again = rebuild_encoder(encoder.identity)
        assert again.identity == encoder.identity and again.encode(["a"]).shape == (1, 4)
    finally:
        del ENCODERS._items["constant"], BACKENDS._items["constant"]


def test_a_recipe_method_without_its_decorator_is_refused_when_the_class_is_defined():
    """The routing of meaning and the identifier's fit are written on the recipe's methods
    (``@resolving``, ``@fitting``); a recipe that forgot one would silently skip them, so
    the class is refused, naming the method and the fix."""
    with pytest.raises(TypeError, match=r"Forgetful\.meaning is not decorated with "
                                        r"@resolving.*Write '@resolving' above 'def meaning'"):
        class Forgetful(Disentangler):
            method = "forgetful"

            @fitting
            def fit(self, src, tgt, src_lang, tgt_lang):
                return self

            def meaning(self, X, languages=None):
                return X

    with pytest.raises(TypeError, match=r"\.fit is not decorated with @fitting"):
        class Unfitted(Disentangler):
            method = "unfitted"

            def fit(self, src, tgt, src_lang, tgt_lang):
                return self

            @resolving
            def meaning(self, X, languages=None):
                return X

    with pytest.raises(TypeError, match=r"\.language is not decorated with @resolving"):
        class WrongDecorator(Disentangler):
            method = "wrong-decorator"

            @fitting
            def fit(self, src, tgt, src_lang, tgt_lang):
                return self

            @resolving
            def meaning(self, X, languages=None):
                return X

            @fitting
            def language(self, X, languages=None):
                return X
