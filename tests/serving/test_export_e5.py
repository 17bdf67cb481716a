"""The real e5-small export, run by plain sentence-transformers where disembed cannot be
imported, equals disembed's meaning vectors: ``encode`` and ``encode_document`` on the
passage side the model was trained on, ``encode_query`` on e5's query side."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from fresh_st import cosines, encode_in_fresh_process  # noqa: E402

from disembed import load_encoder  # noqa: E402
from disembed.data.paths import resolve_data_dir  # noqa: E402
from disembed.data.tatoeba import load_tatoeba  # noqa: E402
from disembed.exceptions import DisembedError  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.methods.routing import tags_with_scripts  # noqa: E402
from disembed.serving import export_model  # noqa: E402

BAR = 0.9999


def tatoeba_or_skip(lang: str):
    try:
        return load_tatoeba(lang, resolve_data_dir(None))
    except DisembedError as exc:
        pytest.skip(f"no Tatoeba data: {exc}")


#: made-up sentence pairs for the fast test, so it needs no downloaded data: 8 x 8 sentences
#: "the <noun> <verb>s" per language, each with its English translation
NOUNS = {"de": ["Der Hund", "Die Katze", "Der Lehrer", "Der Junge", "Der Vogel", "Der Bauer",
                "Die Ärztin", "Der König"],
         "zh": ["这只狗", "这只猫", "这位老师", "这个男孩", "这只鸟", "这位农民", "这位医生",
                "这位国王"],
         "en": ["The dog", "The cat", "The teacher", "The boy", "The bird", "The farmer",
                "The doctor", "The king"]}
VERBS = {"de": ["schläft.", "singt.", "lacht.", "wartet.", "arbeitet.", "liest.", "spielt.",
                "tanzt."],
         "zh": ["在睡觉。", "在唱歌。", "在笑。", "在等待。", "在工作。", "在看书。", "在玩。",
                "在跳舞。"],
         "en": ["sleeps.", "sings.", "laughs.", "waits.", "works.", "reads.", "plays.",
                "dances."]}


class MadeUp:
    """A Tatoeba-like set of 64 pairs of one language with English (``source``, ``english``)."""

    def __init__(self, lang: str):
        sentence = {x: [f"{n} {v}" if x != "zh" else f"{n}{v}" for n in NOUNS[x] for v in VERBS[x]]
                    for x in (lang, "en")}
        self.source, self.english = sentence[lang], sentence["en"]


def train_and_save(name, params, enc, langs, folder, n=60, sets=None):
    """``name`` fitted on the first ``n`` pairs of each of ``langs`` with English (of
    ``sets``, one per language; default: the Tatoeba test sets)."""
    sets = sets or [tatoeba_or_skip(lang) for lang in langs]
    X = np.vstack([enc.encode(s.source[:n]) for s in sets])
    Y = np.vstack([enc.encode(s.english[:n]) for s in sets])
    src = [lang for lang in langs for _ in range(n)]
    model = make_method(name, **params).fit(X, Y, src, "en")
    model.save(folder, metadata={"encoder": enc.identity.to_dict(), "encoder_spec": "e5-small"})
    return model


def test_e5_export_encode_query_and_document_match_disembed(tmp_path):
    enc = load_encoder("e5-small-torch", dtype="float32")
    query_enc = load_encoder("e5-small-torch", dtype="float32", side="query")
    sets = [MadeUp("de"), MadeUp("zh")]
    model = train_and_save("seed", {"max_epochs": 3, "seed": 0}, enc, ["de", "zh"],
                           tmp_path / "seed", sets=sets)
    out = export_model(tmp_path / "seed", tmp_path / "seed-st").path
    texts = [*sets[0].source[60:63], *sets[1].source[60:63]]  # never trained on
    got = encode_in_fresh_process(
        [{"dir": str(out), "texts": texts, "call": call}
         for call in ("encode", "encode_document", "encode_query")], tmp_path)
    # the library's text path: each untagged text restricted to the languages of its script
    passage = model.meaning(enc.encode(texts), tags_with_scripts(texts))
    query = model.meaning(query_enc.encode(texts), tags_with_scripts(texts))
    assert cosines(got[0], passage).min() >= BAR
    assert cosines(got[1], passage).min() >= BAR
    assert cosines(got[2], query).min() >= BAR
    assert cosines(got[2], passage).max() < BAR  # the query prompt was really applied
    card = (out / "README.md").read_text(encoding="utf-8")  # the encoder names its base
    assert "base_model: intfloat/multilingual-e5-small" in card and "license: mit" in card


def every_language_probe(per_language: int = 3) -> dict[str, list[str]]:
    """The last ``per_language`` sentences of every Tatoeba file (never trained on here)."""
    folder = resolve_data_dir(None) / "tatoeba"
    out = {}
    for path in sorted(folder.glob("tatoeba.*-eng.*")):
        lines = [t for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
        out.setdefault(path.name.rsplit(".", 1)[1], lines[-per_language:])
    return out


@pytest.mark.slow
def test_e5_export_equals_disembed_in_every_tatoeba_language(tmp_path):
    """Issue 18.1 and 17.7: a head recipe, the per-language default recipe and
    mean-centering, exported and run by plain ``SentenceTransformer(path).encode(texts)``
    (no language given: the per-language ones identify it among the languages of the
    text's script), cosine >= 0.9999 to disembed's text path ``model.meaning(X,
    tags_with_scripts(texts))`` on 3 sentences of each of the 113 Tatoeba files."""
    enc = load_encoder("e5-small-torch", dtype="float32")
    probe = every_language_probe()
    texts = [t for lang in sorted(probe) for t in probe[lang]]
    X = enc.encode(texts)
    recipes = {"seed": {"max_epochs": 5}, "seed-centered": {"lr": 3e-3, "init_scale": 0.9},
               "mean-centering": {}}
    jobs, expected = [], []
    for name, params in recipes.items():
        model = train_and_save(name, params, enc, ["de", "zh", "ja", "ru"], tmp_path / name)
        out = export_model(tmp_path / name, tmp_path / f"{name}-st").path
        jobs.append({"dir": str(out), "texts": texts, "trust": model.uses_language})
        expected.append(model.meaning(X, tags_with_scripts(texts)))
    got = encode_in_fresh_process(jobs, tmp_path)
    worst = {}
    for name, want, vectors in zip(recipes, expected, got, strict=True):
        cos = cosines(vectors, want)
        worst[name] = (float(cos.min()), texts[int(cos.argmin())])
    assert all(c >= BAR for c, _ in worst.values()), worst
