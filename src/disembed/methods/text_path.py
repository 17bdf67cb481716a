"""The one text path: from texts (and their raw embeddings) and optional language codes to
their meaning, and the language each text is reported as, in one identifier pass.

Every surface goes through :func:`text_meaning`: the library
(:meth:`~disembed.saved_model.SavedModel.meaning`), the experiment's untagged view, mining
(locally and on Ray), the service, and (through the same routing rule,
:mod:`disembed.util.routing_rule`) the export. For each text:

1. its tag: the caller's code (one for all, one per text; normalised), and for a text
   without one (``None``, ``und``, ``mul``) its script, ``und-<Script>``
   (:func:`tags_with_scripts`): the script of the text as the encoder sees it;
2. its route (:meth:`~.base.Disentangler.routing`): a tagged row by its tag, an untagged
   one by the identifier's posterior over the training languages that write its script,
   computed once (one pass of the identifier over the rows that need it);
3. its meaning (or language part): the recipe's function under that routing
   (:meth:`~.base.Disentangler.routed`);
4. the language it is reported as, from the same pass
   (:func:`~disembed.util.routing_rule.reported_languages`): its tag, or the identifier's most
   likely language with its probability, ``und`` / ``und-<Script>`` where unsure or where
   no training language writes its script (``und-Zyyy``: a text without a letter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np

from ..util.routing_rule import NO_SCRIPT, script_subtag
from .routing import tags_with_scripts


@dataclass(frozen=True)
class TextMeaning:
    """What the text path answers for ``n`` texts.

    ``vectors``: ``(n, d_m) float32`` (the meaning part, or the language part where asked;
    ``None`` for a recipe without one); ``languages``: the code each text is reported as
    (its tag; for a text the model routes by its identifier, the most likely language, or
    ``und`` / ``und-<Script>``); ``probabilities``: the identifier's probability of that
    language (``None`` where the caller named the language); ``predicted``: whether the
    text named no language (no code, ``und``, ``und-<Script>``)."""

    vectors: Any
    languages: list[str | None]
    probabilities: list[float | None]
    predicted: list[bool]


def text_meaning(model: Any, X: np.ndarray, texts: Sequence[str], languages: Any = None, *,
                 part: Literal["meaning", "language", "views"] = "meaning") -> TextMeaning:
    """The meaning (or ``part``; ``views``: both parts as a dict) of ``texts`` whose raw
    embeddings are ``X (n, d)`` under a fitted disentangler ``model``, and the language each
    is reported as; see the module docstring. ``languages``: one code for all, one per
    text, or ``None``."""
    tags = tags_with_scripts(texts, languages)
    routing = model.routing(X, tags)
    vectors = model.routed(part, X, routing)
    letterless = [NO_SCRIPT if tag is None else script_subtag(tag)
                  for tag, mixed in zip(tags, routing.mixed.tolist(), strict=True) if mixed]
    codes, probs = reported_languages(routing, model.language_identifier, letterless)
    predicted = [bool(model.uses_language) and (tag is None or script_subtag(tag) is not None)
                 for tag in tags]
    return TextMeaning(vectors, codes, probs, predicted)


def reported_languages(routing: Any, identifier: Any, scripts: Sequence[str | None] | None = None
                       ) -> tuple[list[str | None], list[float | None]]:
    """``(codes, probabilities)``: the code each row of ``routing`` (a
    :class:`~.routing.Routing`) is reported as, from that routing's identifier pass: a
    hard-routed row's code (probability ``None``); a mixed row's most likely language among
    those its script allows, with its probability, or ``und`` / ``und-<Script>`` where unsure
    or no training language writes the script
    (:meth:`~.language_id.LanguageIdentifier.report`). ``scripts``: the mixed rows' scripts
    as reported, where the caller knows more than the tags (a text without a letter,
    :data:`~disembed.util.routing_rule.NO_SCRIPT`); default: the tags'."""
    codes = [None if c is None else str(c) for c in routing.codes.tolist()]
    probs: list[float | None] = [None] * len(codes)
    if routing.mixed.any() and identifier is not None and routing.scores is not None:
        tags, p = identifier.report(routing.scripts if scripts is None else scripts,
                                    routing.scores)
        for i, tag, q in zip(np.flatnonzero(routing.mixed).tolist(), tags, p.tolist(),
                             strict=True):
            codes[i], probs[i] = tag, float(q)
    return codes, probs


def meaning_of_texts(model: Any, X: np.ndarray, texts: Sequence[str], languages: Any = None
                     ) -> np.ndarray:
    """``(n, d_m) float32``: the meaning part of :func:`text_meaning`."""
    return text_meaning(model, X, texts, languages).vectors
