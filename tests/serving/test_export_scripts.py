"""The script prior in the export: ``SentenceTransformer(folder).encode(texts)`` gives the
library's text path, ``SavedModel.meaning(texts)``, where an untagged text is restricted to
the training languages that write its script (``disembed.methods.routing``), in a process
where disembed cannot be imported.

The export runs disembed's own routing rule (``disembed/util/routing_rule.py``, shipped as
``routing_rule.py`` byte for byte), so there is no twin to keep in line. Bugs feared (each
was put in and made a test here fail): the export ignoring the script (the whole posterior,
as before), the script counted on the prompt as well (``passage: `` is Latin letters and
makes a short Chinese text Latin), a rewritten copy of the rule shipped instead of the
file.
"""

from __future__ import annotations

import json
import sys
import unicodedata

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
torch = pytest.importorskip("torch")

from fresh_st import encode_in_fresh_process  # noqa: E402
from tiny_bert import save_tiny_bert  # noqa: E402

from disembed import load_encoder  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.saved_model import SavedModel  # noqa: E402
from disembed.serving import export_model, exported_module  # noqa: E402


def _nfc(words: list[str]) -> list[str]:
    return [unicodedata.normalize("NFC", w) for w in words]


#: one small vocabulary per training language (Chinese words spaced, for a word tokenizer);
#: every language is paired with English
WORDS = {"en": ["hello", "world", "cat", "dog", "house", "tree", "red", "over"],
         "de": ["hallo", "welt", "katze", "hund", "haus", "baum", "rot", "über"],
         "ru": ["привет", "мир", "кошка", "собака", "дом", "дерево", "красный", "над"],
         "zh": ["你好", "世界", "猫", "狗", "房子", "树", "红", "上面"],
         "ar": ["مرحبا", "عالم", "قطة", "كلب", "بيت", "شجرة", "أحمر", "فوق"],
         "hi": _nfc(["नमस्ते", "दुनिया", "बिल्ली", "कुत्ता", "घर", "पेड़", "लाल", "ऊपर"])}
GREEK = ["γεια", "κόσμος", "γάτα", "σκύλος"]  # a script no training language writes
#: untagged texts of every script, several mixed with words of another script, so that the
#: identifier's posterior is split and the script's restriction moves the vector
TEXTS = ["hallo welt katze", "hello cat 猫", "hund über haus",  # Latin
         "привет мир кошка", "кошка hund",  # Cyrillic (5 letters to 4)
         "你好 世界 猫", "猫 狗", "你好 世界 房子 dog",  # Han; a short one: the prompt test
         "مرحبا عالم", "مرحبا cat",  # Arabic
         "नमस्ते दुनिया", "घर बिल्ली dog",  # Devanagari
         "γεια κόσμος", "γάτα hund",  # Greek: no training language writes it
         "hund 房子 树 红",  # a tie, 4 Latin letters to 4 Han ones: the first script, Latin
         "123", "12 + 3 = 15!"]  # no letter: the whole posterior
#: the tags a caller may give: untagged, BCP-47's undetermined (with a script, or with the
#: text's), a training language, a real language the model never saw. ``und-Hans`` and
#: ``und-Jpan`` stand for Han (and kana): both restrict to zh, in the library and the twin
TAGS = [None, "und", "und-Hani", "mul_cyrl", "und-Grek", "und-Hans", "und-Jpan", "zh", "fr"]


def test_the_export_ships_the_librarys_routing_rule_byte_for_byte(scripted):
    """The rule is one file: the export's ``routing_rule.py`` is ``disembed.util.routing_rule``
    as it is (not a twin kept in line by hand), and the head imports it."""
    from pathlib import Path

    import disembed.util.routing_rule as rule

    for _, export in scripted.values():
        assert (export / "routing_rule.py").read_bytes() == Path(rule.__file__).read_bytes()
        head = (export / "disembed_meaning.py").read_text(encoding="utf-8")
        assert "from .routing_rule import" in head
        assert "def script_of" not in head and "def route_weights(e" not in head


# --- the export against the library --------------------------------------------------------
def build_tiny_bert(folder):
    """A random 16-d one-layer BERT, a word-level tokenizer over :data:`WORDS`, Greek and
    e5's ``passage:``."""
    return save_tiny_bert(folder, ["passage", ":", *(w for ws in WORDS.values() for w in ws),
                                   *GREEK])


def _pairs(n=40, seed=0):
    """``n`` sentence pairs of each language with English: source texts, their languages,
    the English texts."""
    rng = np.random.default_rng(seed)
    src, langs, en = [], [], []
    for lang in ("de", "ru", "zh", "ar", "hi"):
        for _ in range(n):
            idx = rng.choice(8, size=rng.integers(2, 5))
            src.append(" ".join(WORDS[lang][i] for i in idx))
            en.append(" ".join(WORDS["en"][i] for i in idx))
            langs.append(lang)
    return src, langs, en


#: recipe -> (parameters, the encoder's prefix): the prefix becomes the export's prompt
RECIPES = {"mean-centering": ({}, ""),
           "seed-centered": ({"max_epochs": 2, "batch_size": 32, "init_scale": 0.9,
                              "unknown_language": "nearest"}, "passage: ")}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """``{recipe: (model folder, export folder)}``: models fitted on five languages of five
    scripts (and English), saved like ``train`` and exported."""
    root = tmp_path_factory.mktemp("scripts")
    bert = build_tiny_bert(root / "tiny-bert")
    src, langs, en = _pairs()
    out = {}
    for name, (params, prefix) in RECIPES.items():
        enc = load_encoder(f"st:{bert}", pooling="mean", prefix=prefix)
        model = make_method(name, **params).fit(enc.encode(src), enc.encode(en), langs, "en")
        folder = model.save(root / name, metadata={"encoder": enc.identity.to_dict(),
                                                   "encoder_spec": f"st:{bert}"})
        out[name] = (folder, export_model(folder, root / f"{name}-st").path)
    return out


def assert_same(a, b, tol, what):
    """Equal to ``tol`` of each row's norm."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    err = np.abs(a - b).max(axis=1) / np.maximum(1.0, np.linalg.norm(b, axis=1))
    assert err.max() <= tol, (what, [(TEXTS[i], float(err[i])) for i in np.flatnonzero(err > tol)])


def test_the_script_prior_moves_these_texts(scripted):
    """The test's premise: for most texts (each mixed text, the short Chinese one, the tie)
    the library's text path differs from the identifier's whole posterior, so an export that
    ignored the script would fail the next test."""
    for name, (folder, _) in scripted.items():
        saved = SavedModel.load(folder)
        with_script = saved.meaning(TEXTS)
        without = saved.disentangler.meaning(saved.encoder.encode(TEXTS))
        moved = np.abs(with_script - without).max(axis=1)
        for text in ("hello cat 猫", "кошка hund", "猫 狗", "你好 世界 房子 dog", "مرحبا cat",
                     "hund 房子 树 红"):
            assert moved[TEXTS.index(text)] > 1e-3, (name, text, moved)
        for text in ("γεια κόσμος", "123", "12 + 3 = 15!"):  # no writer: no restriction
            assert moved[TEXTS.index(text)] == 0, (name, text)


def test_the_export_gives_the_librarys_text_path_without_disembed(scripted, tmp_path):
    """Every script, every kind of tag, ``encode`` and ``encode_document`` (the prompt the
    model was trained with: the script is the text's, not the prompt's)."""
    jobs, want = [], []
    for name, (folder, export) in scripted.items():
        saved = SavedModel.load(folder)
        for tag in TAGS:
            jobs.append({"dir": str(export), "texts": TEXTS, "trust": True,
                         "kwargs": {"language": tag} if tag else {}})
            want.append((f"{name} {tag}", saved.meaning(TEXTS, tag)))
        jobs.append({"dir": str(export), "texts": TEXTS, "trust": True,
                     "call": "encode_document"})
        want.append((f"{name} encode_document", saved.meaning(TEXTS)))
        jobs.append({"dir": str(export), "texts": TEXTS[::-1], "trust": True,
                     "kwargs": {"batch_size": 3}})  # other batches, another order
        want.append((f"{name} batches of 3", saved.meaning(TEXTS)[::-1]))
    got = encode_in_fresh_process(jobs, tmp_path)
    for (key, expected), vectors in zip(want, got, strict=True):
        assert_same(vectors, expected, 1e-5, key)


def test_an_export_without_the_script_table_mixes_by_the_whole_posterior(scripted, tmp_path):
    """A module config written before the script prior (no ``language_scripts``,
    ``script_names``, ``script_ranges``) loads and mixes as before: ``meaning(X)``."""
    import shutil

    folder, export = scripted["mean-centering"]
    old = tmp_path / "old-export"
    shutil.copytree(export, old)
    config_path = next(old.rglob(exported_module.CONFIG))
    config = json.loads(config_path.read_text(encoding="utf-8"))
    for key in ("language_scripts", "script_names", "script_ranges"):
        del config[key]
    config_path.write_text(json.dumps(config), encoding="utf-8")
    got = encode_in_fresh_process([{"dir": str(old), "texts": TEXTS, "trust": True}],
                                  tmp_path)[0]
    saved = SavedModel.load(folder)
    assert_same(got, saved.disentangler.meaning(saved.encoder.encode(TEXTS)), 1e-5, "old")


def test_the_texts_survive_the_length_sorted_sub_batches(scripted, monkeypatch):
    """Where the transformer is not run packed (another architecture: here forced), its
    sub-batches by token count still hand the head every text in the batch's order, and the
    texts never reach the Hugging Face model."""
    from sentence_transformers import SentenceTransformer

    folder, export = scripted["seed-centered"]
    st = SentenceTransformer(str(export), device="cpu", trust_remote_code=True)
    module = sys.modules[type(st[0]).__module__]  # the export's disembed_meaning.py
    monkeypatch.setattr(module, "_packable", lambda model: False)
    seen, forward = [], st[0].model.forward

    def spy(*args, **kwargs):  # sentence-transformers calls the bound forward: no hooks
        seen.append(set(kwargs))
        return forward(*args, **kwargs)

    monkeypatch.setattr(st[0].model, "forward", spy)
    got = st.encode(TEXTS, batch_size=8)
    assert len(seen) > 2  # sub-batches ran
    assert not any(module.TEXTS_FEATURE in keys for keys in seen)
    assert_same(got, SavedModel.load(folder).meaning(TEXTS), 1e-5, "sub-batches")
