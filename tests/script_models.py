"""Models whose training languages span several scripts, and untagged texts in scripts
they do and do not write: what the script-prior tests of every surface share.

With de, ru, zh and ar paired with English, an untagged Latin text is routed among de/en,
a Cyrillic one to ru, a Han one to zh, an Arabic one to ar; a Greek text (no training
language writes Greek) and "123" (no letters) take the identifier's whole posterior. On the
hash encoder every sentence is a random vector, so the identifier's posterior is spread
over all five languages and the restriction moves every vector but the last two: a surface
that sends ``None`` instead of the script gives another vector (:func:`assert_mask_matters`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from disembed.encoders import HashEncoder
from disembed.methods import NeuralDisentangler, make_method, method_class
from disembed.saved_model import SavedModel

#: the training languages (each paired with English) and a few words of each
WORDS = {"de": ["hallo", "welt", "katze", "hund", "haus", "baum", "rot", "über"],
         "ru": ["привет", "мир", "кошка", "собака", "дом", "дерево"],
         "zh": ["你好", "世界", "猫", "狗", "房子", "树"],
         "ar": ["مرحبا", "عالم", "قطة", "كلب", "بيت", "شجرة"],
         "en": ["hello", "world", "cat", "dog", "house", "tree", "red", "over"]}
#: untagged texts: Latin, Cyrillic, Han, Arabic, Greek (no training language writes it),
#: no letters
SCRIPT_TEXTS = ["guten morgen welt", "доброе утро мир", "早上 好 世界", "صباح الخير يا عالم",
                "καλημέρα κόσμε", "123"]
#: the script tag each of :data:`SCRIPT_TEXTS` travels with
SCRIPT_TAGS = ["und-Latn", "und-Cyrl", "und-Hani", "und-Arab", "und-Grek", None]
#: the rows of :data:`SCRIPT_TEXTS` whose script some training language writes
MASKED = [0, 1, 2, 3]
#: the languages each of :data:`SCRIPT_TEXTS` may be reported as
ALLOWED = [{"de", "en"}, {"ru"}, {"zh"}, {"ar"}, None, None]
ENCODER_SPEC = "hash:16"
FAST = {"max_epochs": 2, "batch_size": 32}


def training_pairs(n_per_language: int = 40, seed: int = 0
                   ) -> tuple[list[str], list[str], list[str]]:
    """``(sources, targets, source languages)``: random sentences of :data:`WORDS` in each
    non-English language, each paired with an English one."""
    rng = np.random.default_rng(seed)
    src, tgt, langs = [], [], []
    for lang in ("de", "ru", "zh", "ar"):
        for _ in range(n_per_language):
            size = int(rng.integers(2, 5))
            src.append(" ".join(rng.choice(WORDS[lang], size)))
            tgt.append(" ".join(rng.choice(WORDS["en"], size)))
            langs.append(lang)
    return src, tgt, langs


def fit_script_model(name: str, enc=None):
    """Recipe ``name`` fitted on :func:`training_pairs` embedded by ``enc`` (default: the
    :data:`ENCODER_SPEC` hash encoder)."""
    enc = enc or HashEncoder(16)
    src, tgt, langs = training_pairs()
    params = dict(FAST) if issubclass(method_class(name), NeuralDisentangler) else {}
    return make_method(name, **params).fit(enc.encode(src), enc.encode(tgt), langs, "en")


def save_script_model(folder: Path, name: str = "mean-centering") -> Path:
    """:func:`fit_script_model` on the hash encoder, saved to ``folder`` with its encoder,
    and checked to give the tests teeth (:func:`assert_mask_matters`)."""
    enc = HashEncoder(16)
    out = fit_script_model(name, enc).save(folder, metadata={
        "encoder": enc.identity.to_dict(), "encoder_spec": ENCODER_SPEC})
    assert_mask_matters(out)
    return out


def library_text(folder: Path, texts, languages=None) -> np.ndarray:
    """The library's text path, the reference of every surface."""
    return SavedModel.load(folder).meaning(list(texts), languages)


def unit(X) -> np.ndarray:
    X = np.asarray(X, np.float64)
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)


def assert_mask_matters(folder: Path, texts=SCRIPT_TEXTS, rows=MASKED) -> None:
    """The test has teeth: for ``rows`` the whole posterior (what a surface that sends
    ``None`` gives) is another vector than the library's."""
    saved = SavedModel.load(folder)
    whole = saved.disentangler.meaning(saved.encoder.encode(list(texts)), None)
    scripted = saved.meaning(list(texts))
    gap = np.abs(unit(whole) - unit(scripted)).max(axis=1)
    assert (gap[rows] > 1e-3).all(), gap
