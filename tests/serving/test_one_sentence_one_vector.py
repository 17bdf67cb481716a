"""One sentence, one vector (issue 31): a meaning vector is a function of the text and the
saved model only, whatever the batch around it, the process and its thread count, the
precision of the embedding, the surface (library, CLI, service, export) and the Unicode
spelling of the text. One contract, asserted over the registry where a surface exists for
every recipe, on tiny models (a hash encoder; a random one-layer BERT where the export needs
a transformer); the real-encoder variants are marked slow.

The bugs these tests were written against (each made a test here fail when put back): the
export's argmax route, the service routing untagged rows by their argmax code, text not
normalised on the CLI or service path, the cache keyed by the text as given, a NUL that
ends the text, a model reopened in the precision the probe picks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
httpx = pytest.importorskip("httpx")

from script_models import WORDS, fit_script_model, library_text  # noqa: E402
from tiny_bert import save_tiny_bert  # noqa: E402

from disembed.encoders import HashEncoder, load_encoder  # noqa: E402
from disembed.methods import METHODS, NeuralDisentangler, make_method, method_class  # noqa: E402
from disembed.util.dedup import distinct  # noqa: E402

DE = ["hallo", "welt", "katze", "hund", "haus", "baum", "rot", "über", "größe", "straße"]
EN = ["hello", "world", "cat", "dog", "house", "tree", "red", "over", "size", "street"]
FR = ["été", "café", "élève", "noël"]
#: Greek: a script no training language of the surface models writes
EL = ["καλημέρα", "κόσμε", "γάτα"]
#: the texts of the contract, each with spellings that must give the same vector; the
#: surface models are trained on de, ru, zh, ar (:mod:`script_models`), so an untagged
#: Cyrillic, Han or Arabic text is routed by its script, a Greek one and "123" by the
#: whole posterior
TEXTS = ["hallo welt über größe", "hello world cat", "katze straße baum", "été café",
         "dog house red over", "привет мир кошка", "你好 世界 猫", "مرحبا عالم قطة",
         "καλημέρα κόσμε", "123"]
#: tags: untagged, a training language, an unseen real language, "undetermined"
TAGS = [None, "de", "hi", "und"]
NAMES = sorted(set(METHODS.names()) | {"seed-centered", "mean-centering"})
FAST = {"max_epochs": 2, "batch_size": 32}


def spellings(text: str) -> list[str]:
    """``text``, its NFD form, and its spaces as NUL and other control characters."""
    return [text, unicodedata.normalize("NFD", text), text.replace(" ", "\x00", 1),
            text.replace(" ", "\x85", 1).replace(" ", "\r", 1)]


def _pairs(n=160, seed=0):
    rng = np.random.default_rng(seed)
    idx = [rng.choice(len(EN), size=rng.integers(2, 6)) for _ in range(n)]
    return ([" ".join(DE[i] for i in row) for row in idx],
            [" ".join(EN[i] for i in row) for row in idx])


def fit(name: str, enc):
    de, en = _pairs()
    params = dict(FAST) if issubclass(method_class(name), NeuralDisentangler) else {}
    return make_method(name, **params).fit(enc.encode(de), enc.encode(en), "de", "en")


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def assert_same(a, b, tol=1e-6, what=""):
    """Equal to ``tol`` of each row's norm (float32 kernels block other batch sizes
    differently)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.maximum(1.0, np.linalg.norm(a, axis=1, keepdims=True))
    assert (np.abs(a - b) / scale).max() <= tol, (what, (np.abs(a - b) / scale).max())


def bf16(X: np.ndarray) -> np.ndarray:
    import torch

    return torch.from_numpy(X).to(torch.bfloat16).float().numpy()


# --- the library, every recipe: batch, Unicode form, precision, tags -------------------
@pytest.fixture(scope="module")
def hash_models():
    enc = HashEncoder(16)
    return enc, {name: fit(name, enc) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_library_one_vector_per_sentence_over_the_registry(hash_models, name):
    enc, models = hash_models
    model = models[name]
    texts = [s for t in TEXTS for s in spellings(t)]
    canonical = [t for t in TEXTS for _ in spellings(t)]
    X = enc.encode(texts)
    np.testing.assert_array_equal(X, enc.encode(canonical))  # spelling: one string
    for tag in TAGS:
        full = model.meaning(X, tag)
        alone = np.concatenate([model.meaning(X[i:i + 1], tag) for i in range(len(X))])
        assert_same(full, alone, what=f"{name} {tag}: batch vs alone")
        mixed = [TAGS[i % len(TAGS)] for i in range(len(X))]
        per_row = model.meaning(X, mixed)
        assert_same(per_row[[i for i in range(len(X)) if mixed[i] == tag]],
                    full[[i for i in range(len(X)) if mixed[i] == tag]],
                    what=f"{name} {tag}: mixed call")
        # precision: the same text's embedding rounded to bfloat16 (what torch bfloat16
        # gives, 8 bits of mantissa) moves the meaning by less than cosine 0.999
        assert cosines(model.meaning(bf16(X), tag), full).min() >= 0.999, (name, tag)


# --- two processes, 1 and 2 threads ----------------------------------------------------
PROCESS = textwrap.dedent("""
    import json, sys
    import numpy as np
    from disembed.saved_model import SavedModel
    jobs = json.load(open(sys.argv[1]))
    out = {}
    for folder, texts, tags in jobs:
        saved = SavedModel.load(folder)
        X = saved.encoder.encode(texts)
        for tag in tags:
            out[f"{folder}|{tag}"] = saved.disentangler.meaning(X, tag).tolist()
    json.dump(out, open(sys.argv[2], "w"))
""")


def in_process(jobs: list, threads: int, tmp_path: Path) -> dict:
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    (tmp_path / "run.py").write_text(PROCESS)
    env = {**os.environ, "DISEMBED_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    out = tmp_path / f"out-{threads}.json"
    subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path / "jobs.json"),
                    str(out)], check=True, env=env, timeout=600)
    return {k: np.asarray(v) for k, v in json.loads(out.read_text()).items()}


def test_two_processes_with_one_and_two_threads_give_the_same_vectors(hash_models, tmp_path):
    enc, models = hash_models
    texts = [s for t in TEXTS for s in spellings(t)]
    jobs = []
    for name in ("seed-centered", "mean-centering", "lir", "dream"):
        folder = models[name].save(tmp_path / name, metadata={
            "encoder": enc.identity.to_dict(), "encoder_spec": "hash:16"})
        jobs.append([str(folder), texts, TAGS[:3]])
    one, two = in_process(jobs, 1, tmp_path), in_process(jobs, 2, tmp_path)
    assert one.keys() == two.keys() and len(one) == 12
    for key in one:
        name = Path(key.split("|")[0]).name
        here = models[name].meaning(enc.encode(texts), key.split("|")[1].replace("None", "")
                                    or None)
        assert_same(one[key], two[key], what=f"{key}: 1 vs 2 threads")
        assert_same(one[key], here, what=f"{key}: process vs this process")


# --- every surface: library, CLI, service, export (tiny BERT) --------------------------
def build_tiny_bert(folder):
    """A random 16-d one-layer BERT, a word-level tokenizer (no normaliser of its own) over
    the words of :data:`TEXTS` in NFC, saved to ``folder``."""
    return save_tiny_bert(folder, [*DE, *EN, *FR, *EL,
                                   *(w for ws in WORDS.values() for w in ws)])


SURFACE_RECIPES = ("seed-centered", "mean-centering", "seed")


@pytest.fixture(scope="module")
def bert_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("one-vector")
    bert = build_tiny_bert(root / "tiny-bert")
    enc = load_encoder(f"st:{bert}", pooling="mean", prefix="")
    out = {}
    for name in SURFACE_RECIPES:  # trained on de, ru, zh, ar with en: the script prior bites
        model = fit_script_model(name, enc)
        out[name] = model.save(root / name, metadata={"encoder": enc.identity.to_dict(),
                                                        "encoder_spec": f"st:{bert}"})
    return root, out


def test_service_gives_the_librarys_vector_for_every_spelling(bert_models):
    from disembed.serving.app import BackgroundServer, create_app
    from disembed.serving.loading import load_service

    _, folders = bert_models
    texts = [s for t in TEXTS for s in spellings(t)]
    canonical = [t for t in TEXTS for _ in spellings(t)]
    for name, folder in folders.items():
        with BackgroundServer(create_app(load_service(folder, use_cache=False))) as url:
            for tag in [*TAGS, "und-Hani"]:
                body = {"input": texts, "normalize": False,  # the library's vector
                        **({"language": tag} if tag else {})}
                r = httpx.post(url + "/v1/embeddings", json=body, timeout=60)
                assert r.status_code == 200, r.text
                got = [d["embedding"] for d in r.json()["data"]]
                assert_same(got, library_text(folder, canonical, tag), 1e-5,
                            f"service {name} {tag}")


def test_cli_gives_the_librarys_vector_for_every_spelling(bert_models, tmp_path):
    """``disembed search --model``: each spelling of a text finds the text itself at the
    library's cosine (1 for the same string), tagged or not, and the matrices searched are
    the library's text path's (``SavedModel.meaning``: an untagged text routed by its
    script)."""
    from disembed.cli import main

    _, folders = bert_models
    # a line file: spellings with a line break of their own (CR, NEL) are another issue's
    queries = [s for t in TEXTS for s in spellings(t)[1:] if len(s.splitlines()) == 1]
    (tmp_path / "q.txt").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (tmp_path / "db.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    for name, folder in folders.items():
        for tag in (None, "de", "hi"):  # untagged, a training language, an unseen one
            out = tmp_path / f"{name}-{tag}.tsv"
            args = ["search", str(tmp_path / "q.txt"), str(tmp_path / "db.txt"), "--model",
                    str(folder), "-k", "1", "--out", str(out), "--backend", "exact", "-q",
                    "--cache-dir", str(tmp_path / "cache")]
            if tag:
                args += ["--src-lang", tag, "--tgt-lang", tag]
            assert main(args) == 0
            rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
            header, rows = rows[0], rows[1:]
            score = [float(r[header.index("score")]) for r in rows]
            hit = [r[header.index("match")] for r in rows]
            assert hit == [unicodedata.normalize("NFC", q).replace("\x00", " ")
                           for q in queries], (name, tag)
            assert min(score) >= 1 - 1e-5, (name, tag, score)
            # and the vectors searched are the library's text path's, routed by script
            run = Path(str(out) + ".run")
            for matrix, lines in (("queries", queries), ("database", TEXTS)):
                texts = distinct(lines).texts  # the run folder holds each distinct text once
                want = library_text(folder, [unicodedata.normalize("NFC", t) for t in texts],
                                    tag)
                want /= np.linalg.norm(want, axis=1, keepdims=True)
                assert_same(np.load(run / f"{matrix}.npy"), want, 1e-5,
                            f"cli {name} {tag} {matrix}")


def test_export_gives_the_librarys_vector_for_every_spelling_without_disembed(bert_models,
                                                                            tmp_path):
    """Loaded by sentence-transformers where disembed cannot be imported: the tokenizer
    carries disembed's normalisation, the module the identifier's mixture and every real
    language's code."""
    from fresh_st import encode_in_fresh_process

    from disembed.serving import export_model, read_export_info

    _, folders = bert_models
    texts = [s for t in TEXTS for s in spellings(t)]
    canonical = [t for t in TEXTS for _ in spellings(t)]
    jobs, want = [], []
    for name, folder in folders.items():
        out = export_model(folder, tmp_path / f"export-{name}").path
        trust = read_export_info(out)["identifies_language"]
        for tag in TAGS if trust else [None]:
            jobs.append({"dir": str(out), "texts": texts, "trust": trust,
                         "kwargs": {"language": tag} if tag else {}})
            want.append((f"{name} {tag}", library_text(folder, canonical, tag)))
    got = encode_in_fresh_process(jobs, tmp_path)
    for (key, expected), vectors in zip(want, got, strict=True):
        assert_same(vectors, expected, 1e-5, f"export {key}")


# --- the real encoder (slow) -------------------------------------------------------------
SCRIPT_SAMPLE = ["Der Zug fährt um acht Uhr ab.", "Поезд отправляется в восемь часов.",
                 "Το τρένο φεύγει στις οκτώ.", "القطار يغادر في الساعة الثامنة.",
                 "הרכבת יוצאת בשמונה.", "ट्रेन आठ बजे निकलती है।", "ট্রেন আটটায় ছাড়ে।",
                 "ரயில் எட்டு மணிக்கு புறப்படுகிறது.", "రైలు ఎనిమిది గంటలకు బయలుదేరుతుంది.",
                 "ട്രെയിൻ എട്ട് മണിക്ക് പുറപ്പെടും.", "รถไฟออกเวลาแปดโมง", "រថភ្លើងចេញម៉ោងប្រាំបី។",
                 "მატარებელი რვა საათზე გადის.", "Գնացքը մեկնում է ժամը ութին։", "火车八点出发。",
                 "電車は八時に出発します。", "기차는 8시에 출발합니다.", "ባቡሩ በስምንት ሰዓት ይነሳል።",
                 "Tàu khởi hành lúc tám giờ.", "The train leaves at eight."]


@pytest.mark.slow
def test_real_e5_bf16_and_fp32_meanings_agree_and_forms_are_one(tmp_path):
    """e5-small in torch bfloat16 and float32, a model trained on the bfloat16 embeddings of
    a few sentence pairs: meaning cosine >= 0.999 for every row of 20 scripts, tagged and
    untagged, and NFC/NFD spellings give the same vector."""
    b16 = load_encoder("e5-small-torch", dtype="bfloat16")
    f32 = load_encoder("e5-small-torch", dtype="float32")
    de, en = _pairs(60)
    model = make_method("mean-centering").fit(b16.encode(de), b16.encode(en), "de", "en")
    texts = SCRIPT_SAMPLE + [unicodedata.normalize("NFD", t) for t in SCRIPT_SAMPLE]
    Eb, Ef = b16.encode(texts), f32.encode(texts)
    n = len(SCRIPT_SAMPLE)
    for tag in (None, "de", "hi"):
        mb, mf = model.meaning(Eb, tag), model.meaning(Ef, tag)
        assert cosines(mb, mf).min() >= 0.999, tag
        np.testing.assert_array_equal(mb[:n], mb[n:])


@pytest.mark.slow
def test_real_e5_two_processes_with_one_and_two_threads(tmp_path):
    enc = load_encoder("e5-small-torch", dtype="float32")
    de, en = _pairs(60)
    model = make_method("mean-centering").fit(enc.encode(de), enc.encode(en), "de", "en")
    folder = model.save(tmp_path / "m", metadata={"encoder": enc.identity.to_dict(),
                                                   "encoder_spec": "e5-small"})
    jobs = [[str(folder), SCRIPT_SAMPLE, [None, "de"]]]
    one, two = in_process(jobs, 1, tmp_path), in_process(jobs, 2, tmp_path)
    for key in one:
        assert cosines(one[key], two[key]).min() >= 0.99999, key
