"""Disembed's routing rule, whole: how a text without a language tag is routed through a
language-dependent model. The library runs this file, and an export ships this same file
beside its sentence-transformers module, copied byte for byte (``disembed export``), so the
two cannot drift.

This file imports nothing from disembed, only the standard library and numpy: it runs where
only sentence-transformers (and so numpy) is installed.

For one row: the text ``t`` (as the encoder sees it), its raw embedding ``e (d,)``, and the
caller's tag, if any.

1. **The script of the text** (:func:`script_of`): the ISO 15924 script of most of its
   letters, over a code point table (``names``, ``starts``/``ends``/``scripts``; disembed
   builds it from ``unicodedata``, :func:`disembed.util.scripts.script_ranges`, and an export
   carries it). Letters are read NFKC-folded (mathematical bold ``𝐀`` is Latin ``A``;
   the text embedded is not changed), the invisible Hangul fillers count as no letter
   (:data:`NOT_LETTERS`), ties go to the script first in ``names``. A tag that names only a
   script (``und-Hani``, ``mul_cyrl``) gives the script itself (:func:`script_subtag`).
2. **The mask** (:func:`allowed`): the training languages that write that script (a script
   such as ``Jpan`` stands for several, :data:`SCRIPT_PARTS`); every language where none
   does or the text has no letter.
3. **The identifier's posterior** (:func:`logits`, :func:`route_weights`):
   ``z = (e - c) / |e - c|``, ``r = softmax((W z + b) / T)`` (or ``sparsemax``) over the
   allowed languages. Where ``r`` is unsure of the language (its top weight ``p`` below
   the upper end ``hi`` of the model's ``prior_confidence``, :data:`PRIOR_CONFIDENCE`),
   the prior gives way to the whole posterior ``q`` (the same map over every language):
   ``w = g r + (1 - g) q`` with ``g = clip((p - lo) / (hi - lo), 0, 1)``
   (:func:`prior_share`): a text in a language the model never saw (Turkmen, Marathi) is
   routed as the identifier sees it, not forced among the languages that share its script.
   Then weights below ``min_weight`` are dropped and the rest renormalised.
4. **The mixture** (:func:`mixture`): ``m = sum_k w_k route_k(e)``, in float64. No argmax:
   ``m`` is continuous in ``e``, so float rounding cannot move a text to another language.
5. **The reported language** (:func:`reported_languages`): the language of the largest
   weight at ``T = 1`` with its probability, or ``und-<Script>`` where no training language
   writes the text's script (``und-Zyyy``: a text without a letter, :data:`NO_SCRIPT`), or
   ``und`` (``und-<Script>``) where the probability is below :data:`REPORT_THRESHOLD`
   (docs/ecosystem.md, "Reported language").

Every row is handled on its own, so a row's answer never depends on the other rows.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from typing import Any, Callable, Mapping, Sequence

import numpy as np

#: BCP-47's "no one language" subtags: a row tagged so is routed as untagged
NO_LANGUAGE = ("und", "mul")
#: the language subtag of a tag that names a script but no language
UNDETERMINED = "und"
#: scripts that stand for several (a CLDR likely script or a tag's script subtag -> the ISO
#: 15924 scripts of its letters, as :func:`script_of` names them)
SCRIPT_PARTS = {"Hans": ("Hani",), "Hant": ("Hani",), "Jpan": ("Hani", "Hira", "Kana"),
                "Kore": ("Hang", "Hani")}
#: the Unicode form every text is put in before it is embedded
UNICODE_FORM = "NFC"
#: the control characters replaced by a space (category Cc less TAB and LF)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: letters by ``str.isalpha`` that show nothing: the Hangul fillers (choseong and
#: jungseong fillers, the compatibility and half-width fillers); no script's letters
NOT_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
#: ISO 15924's "Common" script (digits, punctuation, symbols): what a text without a letter
#: is reported in (``und-Zyyy``); no language writes it
NO_SCRIPT = "Zyyy"
#: how logits become route weights
ROUTE_MAPS = ("softmax", "sparsemax")
#: a route weight below this is dropped (and the row's other weights renormalised)
MIN_ROUTE_WEIGHT = 1e-4
#: ``(lo, hi)``: where the script prior's top weight is below ``hi`` the route takes a share of
#: the whole posterior, all of it at ``lo`` and below (:func:`prior_share`); chosen on
#: validation data (docs/language_free.md, "When the prior is unsure";
#: scripts/unseen_script_prior.py). ``hi`` is :data:`REPORT_THRESHOLD`: the prior holds
#: whole exactly where the row's language would be reported
PRIOR_CONFIDENCE = (0.7, 0.9)
#: a reported language whose probability is below this is ``und`` (chosen on validation
#: data: docs/ecosystem.md, "Reported language"; scripts/report_threshold.py)
REPORT_THRESHOLD = 0.9


# --- 1. the script of a text ----------------------------------------------------------
def normalize_text(text: str) -> str:
    """``text`` as disembed embeds it: NFC, control characters other than TAB and LF
    replaced by a space. Idempotent."""
    if not unicodedata.is_normalized(UNICODE_FORM, text):
        text = unicodedata.normalize(UNICODE_FORM, text)
    return CONTROL.sub(" ", text)


def script_of(text: str, names: Sequence[str], ranges: Sequence[Sequence[int]]
              ) -> str | None:
    """The script of most of ``text``'s letters (``None``: no letter). ``ranges``:
    ``(starts, ends, scripts)``; a code point inside ``starts[i]..ends[i]`` counts for
    ``names[scripts[i]]``. Letters are read NFKC-folded (for the script only), the
    :data:`NOT_LETTERS` are skipped, ties go to the script first in ``names``."""
    starts, ends, scripts = ranges
    counts = [0] * len(names)
    for ch in unicodedata.normalize("NFKC", CONTROL.sub(" ", text)):
        if ch in NOT_LETTERS:
            continue
        cp = ord(ch)
        i = bisect.bisect_right(starts, cp) - 1
        if i >= 0 and cp <= ends[i]:
            counts[scripts[i]] += 1
    best = max(counts, default=0)
    return names[counts.index(best)] if best else None


def script_subtag(code: Any) -> str | None:
    """The script of a tag that names no language, as disembed reads it (``und-Hani``,
    ``mul_hani``, ``und-Hani-TW`` -> ``Hani``); ``None`` for any other tag."""
    if not isinstance(code, str):
        return None
    parts = code.strip().replace("_", "-").split("-")
    if parts[0].lower() not in NO_LANGUAGE:
        return None
    script = parts[1] if len(parts) > 1 and len(parts[1]) == 4 else None
    if script is None or not script.isascii() or not script.isalpha():
        return None
    return script.title()


def script_parts(script: str) -> tuple[str, ...]:
    """The scripts of the letters ``script`` stands for (``Jpan`` -> Hani, Hira, Kana)."""
    return SCRIPT_PARTS.get(script, (script,))


# --- 2. the mask ------------------------------------------------------------------------
def writers(scripts: Sequence[str | None], languages: Sequence[str],
            language_scripts: Mapping[str, Sequence[str]]) -> np.ndarray:
    """``(n, L) bool``: the languages that write each row's script (none for no script)."""
    writes = [set(language_scripts.get(code, ())) for code in languages]
    rows = [[bool(script and set(script_parts(script)) & w) for w in writes]
            for script in scripts]
    return np.array(rows, bool).reshape(len(scripts), len(languages))


def allowed(scripts: Sequence[str | None], languages: Sequence[str],
            language_scripts: Mapping[str, Sequence[str]]) -> np.ndarray:
    """``(n, L) bool``: the languages each row may be in, those that write its script;
    every language where none does or the row has no script."""
    mask = writers(scripts, languages, language_scripts)
    mask[~mask.any(axis=1)] = True
    return mask


# --- 3. the identifier's posterior ------------------------------------------------------
def logits(e: np.ndarray, center: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(n, L) float32``: ``W z + b`` for ``z = (e - c) / |e - c|``, each row of ``e (n, d)``."""
    z = np.asarray(e, np.float32) - center
    z = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    return z @ W.T + b


def sparsemax(z: np.ndarray) -> np.ndarray:
    """Row-wise ``argmin_w |w - z|^2`` over the probability simplex, for ``z (n, L)``
    (Martins & Astudillo, ICML 2016): continuous and piecewise linear in ``z``, with exact
    zeros (one-hot where the top entry leads the second by at least 1)."""
    zs = -np.sort(-z, axis=1)  # (n, L) descending
    cs = np.cumsum(zs, axis=1)
    k = np.arange(1, z.shape[1] + 1)
    size = (1 + k * zs > cs).sum(axis=1)  # the support's size, >= 1
    tau = (cs[np.arange(len(z)), size - 1] - 1) / size
    return np.maximum(z - tau[:, None], 0.0)


def mapped(z: np.ndarray, route_map: str = "softmax") -> np.ndarray:
    """``(n, L)``, in ``z``'s precision: the route map of logits ``z`` (``-inf``: a language
    the row may not be in), row by row: ``softmax`` or ``sparsemax``."""
    z = z - z.max(axis=1, keepdims=True)
    if route_map == "sparsemax":
        return sparsemax(z)
    w = np.exp(z)
    return w / w.sum(axis=1, keepdims=True)


def prior_share(restricted: np.ndarray, confidence: Sequence[float] | None) -> np.ndarray:
    """``(n,)``: how much of each row's route the script prior decides, from the top weight
    ``p`` of its restricted posterior ``restricted (n, L)``: 1 from ``hi`` up, 0 at ``lo``
    and below, linear between (``confidence = (lo, hi)``; ``None``: always 1, the prior
    whole, as models saved before it)."""
    if confidence is None or not restricted.size:
        return np.ones(len(restricted))
    lo, hi = confidence
    return np.clip((restricted.max(axis=1) - lo) / (hi - lo), 0.0, 1.0)


def route_weights(scores: np.ndarray, temperature: float = 1.0, route_map: str = "softmax",
                  min_weight: float = MIN_ROUTE_WEIGHT, mask: np.ndarray | None = None,
                  confidence: Sequence[float] | None = None) -> np.ndarray:
    """``(n, L) float64``: each language's weight for each row of ``scores`` (the
    :func:`logits`): ``softmax(scores / temperature)`` (or sparsemax) over the languages of
    ``mask (n, L) bool`` (the others' logits are ``-inf``), blended with the same map over
    every language where that restricted posterior is unsure (:func:`prior_share` with
    ``confidence``), then weights below ``min_weight`` dropped and each row renormalised."""
    z = np.asarray(scores, np.float64) / temperature
    if mask is None:
        w = mapped(z, route_map)
    else:
        restricted = mapped(np.where(mask, z, -np.inf), route_map)
        g = prior_share(restricted, confidence)[:, None]
        w = restricted if np.all(g == 1.0) else g * restricted + (1 - g) * mapped(z, route_map)
    w[w < min_weight] = 0.0
    return w / w.sum(axis=1, keepdims=True)


# --- 4. the mixture ---------------------------------------------------------------------
def _leaves(fn: Callable, *trees: Any) -> Any:
    """``fn`` over the arrays of outputs of one structure (an array, ``None``, or a dict)."""
    if trees[0] is None:
        return None
    if isinstance(trees[0], dict):
        return {k: _leaves(fn, *(t[k] for t in trees)) for k in trees[0]}
    return fn(*trees)


def mixture(weights: np.ndarray, names: Sequence[str],
            run: Callable[[np.ndarray, str], Any]) -> Any:
    """``sum_k w_k route_k`` for every row of ``weights (n, L)``, in float64 and returned
    in float32; ``run(rows, name)`` is route ``name`` on the rows ``rows`` (an index array),
    an array ``(r, ...)``, ``None``, or a dict of arrays. A route runs only on the rows
    that weigh it."""
    total = None
    n = len(weights)
    for k, name in enumerate(names):
        rows = np.flatnonzero(weights[:, k] > 0)
        if not len(rows):
            continue
        y = run(rows, name)
        if total is None:
            total = _leaves(lambda a: np.zeros((n, *np.shape(a)[1:]), np.float64), y)
        w = weights[rows, k]

        def add(acc, part, rows=rows, w=w):
            part = np.asarray(part, np.float64)
            acc[rows] += w.reshape(-1, *([1] * (part.ndim - 1))) * part

        _leaves(add, total, y)
    return _leaves(lambda a: a.astype(np.float32), total)


# --- 5. the reported language -----------------------------------------------------------
def reported_languages(scores: np.ndarray, languages: Sequence[str],
                       scripts: Sequence[str | None],
                       language_scripts: Mapping[str, Sequence[str]],
                       threshold: float = REPORT_THRESHOLD
                       ) -> tuple[list[str], np.ndarray]:
    """``(tags, probabilities)``: for each row of ``scores (n, L)``, the most likely training
    language among those that write its script, with its probability (the identifier's
    posterior restricted to them); ``und-<Script>`` (probability 0) where no training
    language writes the row's script; ``und`` (``und-<Script>``) where the probability is
    below ``threshold``. A row of script ``None`` (not known) is read over every language;
    a text without a letter is of script :data:`NO_SCRIPT`, which no language writes."""
    write = writers(scripts, languages, language_scripts)
    has_script = np.array([s is not None for s in scripts], bool)
    nobody = has_script & ~write.any(axis=1)
    mask = np.where(has_script[:, None] & ~nobody[:, None], write, True)
    p = route_weights(scores, 1.0, "softmax", 0.0, mask) if len(scores) else np.zeros((0, 0))
    best = p.argmax(axis=1) if len(p) else np.zeros(0, int)
    prob = p[np.arange(len(p)), best] if len(p) else np.zeros(0)
    tags = []
    for i, script in enumerate(scripts):
        unsure = f"{UNDETERMINED}-{script}" if script else UNDETERMINED
        if nobody[i]:
            prob[i] = 0.0
        tags.append(unsure if nobody[i] or prob[i] < threshold else languages[int(best[i])])
    return tags, prob.astype(np.float64)
