"""``disembed export`` on a tiny random transformer: the exported folder, loaded by plain
sentence-transformers in a fresh process that never imports disembed, gives disembed's
meaning part."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from tiny_bert import save_tiny_bert  # noqa: E402

from disembed import load_encoder  # noqa: E402
from disembed.exceptions import ConfigError  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.serving import apply_map, export_model, meaning_map, read_export_info  # noqa: E402

EN = ["hello", "world", "cat", "dog", "house", "tree", "red", "big"]
DE = ["hallo", "welt", "katze", "hund", "haus", "baum", "rot", "gross"]


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def build_tiny_bert(folder):
    """A random 16-d one-layer BERT, word-level tokenizer over EN + DE, saved to ``folder``."""
    return save_tiny_bert(folder, ["passage", ":", *EN, *DE])


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


def _pairs(n=160, seed=0):
    rng = np.random.default_rng(seed)
    idx = [rng.choice(len(EN), size=rng.integers(2, 6)) for _ in range(n)]
    return ([" ".join(DE[i] for i in row) for row in idx],
            [" ".join(EN[i] for i in row) for row in idx])


@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    """Models of five kinds, trained on the tiny encoder's embeddings and saved like `train`."""
    root = tmp_path_factory.mktemp("models")
    de, en = _pairs()
    out = {}
    recipes = {"seed": ({"max_epochs": 2, "batch_size": 32}, "passage: "),
               "dream": ({"max_epochs": 2, "batch_size": 32, "hidden": 8}, ""),
               "mean-centering": ({}, ""),
               # the default recipe: a head on per-language-centred inputs, routed per language
               "seed-centered": ({"max_epochs": 2, "batch_size": 32, "init_scale": 0.9}, ""),
               "linear-map": ({"heldout_fraction": 0.0, "ridge": 0.01}, "")}
    for name, (params, prefix) in recipes.items():
        enc = load_encoder(f"st:{tiny_model_dir}", pooling="mean", prefix=prefix)
        X, Y = enc.encode(de), enc.encode(en)
        model = make_method(name, **params).fit(X, Y, "de", "en")
        model.save(root / name, metadata={"encoder": enc.identity.to_dict(),
                                          "encoder_spec": f"st:{tiny_model_dir}",
                                          "training": {"source": "tiny", "pairs": len(de)}})
        out[name] = (model, enc)
    return root, out


FRESH = textwrap.dedent("""
    import json, sys
    from sentence_transformers import SentenceTransformer
    jobs, result = json.load(open(sys.argv[1])), {}
    for job in jobs:
        model = SentenceTransformer(job["dir"], device="cpu")
        kwargs = {"task": job["lang"]} if job["lang"] else {}
        result[job["dir"] + "|" + str(job["lang"])] = model.encode(job["texts"], **kwargs).tolist()
    assert "disembed" not in sys.modules, "the export needed disembed"
    json.dump(result, open(sys.argv[2], "w"))
""")


def encode_in_fresh_process(jobs, tmp_path):
    """Embeddings from a new Python process that never imports disembed."""
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    (tmp_path / "fresh.py").write_text(FRESH)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, str(tmp_path / "fresh.py"), str(tmp_path / "jobs.json"),
                    str(tmp_path / "out.json")], check=True, env=env, cwd=tmp_path, timeout=300)
    return json.loads((tmp_path / "out.json").read_text())


def test_exported_models_give_the_meaning_part_without_disembed(trained, tmp_path):
    """Every recipe, in a process where disembed cannot be imported: plain ``encode(texts)``
    (a language-dependent recipe identifies the language itself, as ``meaning(X)`` does),
    and with an explicit language (``language=`` or ``task=``, any spelling)."""
    from fresh_st import encode_in_fresh_process as fresh

    root, models = trained
    texts = {"de": ["hallo welt", "katze hund haus", "rot baum"],
             "en": ["hello world", "cat dog house", "red tree big"]}
    jobs, expected = [], []
    for name, (model, enc) in models.items():
        result = export_model(root / name, tmp_path / f"export-{name}")
        info = read_export_info(result.path)
        trust = info["identifies_language"]
        assert trust == model.uses_language, name  # every language-using recipe identifies
        for lang in ("de", "en"):
            X = enc.encode(texts[lang])
            jobs.append({"dir": str(result.path), "texts": texts[lang], "trust": trust})
            expected.append((name, model.meaning(X)))
            if trust:
                for kwargs in ({"language": lang}, {"task": {"de": "deu", "en": "EN"}[lang]}):
                    jobs.append({"dir": str(result.path), "texts": texts[lang],
                                 "trust": True, "kwargs": kwargs})
                    expected.append((f"{name} {kwargs}", model.meaning(X, lang)))
    got = fresh(jobs, tmp_path)
    for (key, want), vectors in zip(expected, got, strict=True):
        assert cosines(vectors, want).min() >= 0.9999, key
        np.testing.assert_allclose(vectors, want, atol=1e-4, err_msg=key)


def test_meaning_map_reproduces_every_exportable_method_in_numpy(trained):
    _, models = trained
    X = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    for name, (model, _) in models.items():
        mmap = meaning_map(model)
        for lang in ("de", "en"):
            np.testing.assert_allclose(apply_map(mmap, X, lang), model.meaning(X, lang),
                                       atol=1e-5, err_msg=name)
    assert meaning_map(models["dream"][0]).routes[""][0].activation == "relu"  # hidden=8 MLP


def test_export_folder_works_as_an_st_encoder_and_carries_a_card(trained, tmp_path):
    root, models = trained
    model, enc = models["seed"]
    out = export_model(root / "seed", tmp_path / "seed-export").path
    exported = load_encoder(f"st:{out}")
    assert exported.prefix == "passage: "  # the saved default prompt, applied once
    texts = ["hallo welt katze", "hello world cat"]
    want = model.meaning(enc.encode(texts), "de")
    assert cosines(exported.encode(texts), want).min() >= 0.9999
    card = (out / "README.md").read_text()
    assert "seed" in card and "SentenceTransformer(" in card and "160 pairs" in card
    info = read_export_info(out)
    assert info["method"] == "seed" and info["params"]["max_epochs"] == 2


def test_card_shows_the_scores_of_a_result_file(trained, tmp_path):
    from disembed.evaluation.task_scores import ScoreRow, TaskScores

    root, _ = trained
    scores = TaskScores("sts17", "spearman", "avg:cross-lingual", averages=[
        ScoreRow("meaning", "avg:cross-lingual", "spearman", 0.7512, 7),
        ScoreRow("language", "avg:cross-lingual", "spearman", 0.1049, 7)])
    (tmp_path / "result.json").write_text(json.dumps({"scores": [scores.to_dict()]}))
    out = export_model(root / "seed", tmp_path / "scored", scores=tmp_path / "result.json").path
    card = (out / "README.md").read_text()
    assert "| sts17 | spearman | mean over 7 tracks | 75.1 | 10.5 | 0 items over 0 subsets" in card


def test_card_metadata_is_what_the_hub_reads(trained, tmp_path):
    """base_model, language, license, a model-index with scores, protocol and item counts,
    and the recipe's paper, parsed back by huggingface_hub."""
    from huggingface_hub import ModelCard

    from disembed.evaluation.task_scores import ScoreRow, TaskScores

    root, _ = trained
    scores = TaskScores("sts17", "spearman", "avg:cross-lingual", averages=[
        ScoreRow("meaning", "avg:cross-lingual", "spearman", 0.7512, 7)],
        config={"max_items": 300, "seed": 0}, data_sizes={"en-de": 250, "es-en": 250})
    (tmp_path / "result.json").write_text(json.dumps({"scores": [scores.to_dict()]}))
    out = export_model(root / "seed-centered", tmp_path / "sc",
                       scores=tmp_path / "result.json").path
    text = (out / "README.md").read_text()
    data = ModelCard(text).data
    assert data.license == "other" and data.base_model is None  # a local st: folder
    assert data.language == ["de", "en", "multilingual"]
    assert data.library_name == "sentence-transformers"
    assert data.datasets == ["mteb/sts17-crosslingual-sts"]  # a Hub data set id
    [result] = data.eval_results
    assert (result.dataset_type, result.metric_type, result.metric_value) == (
        "mteb/sts17-crosslingual-sts", "cos_sim_spearman", 75.12)
    assert result.metric_name.endswith("mean over 2 tracks: en-de, es-en")
    assert result.dataset_revision == "faeb762787bd10488a50c8b5be4a3b82e411949c"
    assert result.dataset_args == {"items": 500, "subsets": 2, "max_items_per_subset": 300,
                                   "seed": 0}
    assert "500 items over 2 subsets, a seeded sample of at most 300" in text
    assert "Fukushima" in text and "Libovický" in text  # SEED + its centring
    assert "seed-centered" in text and read_export_info(out)["method"] == "seed-centered"


def test_card_labels_say_what_was_averaged_and_use_standard_metric_names():
    """A Tatoeba score over 2 languages is not labelled "tatoeba-14"; every registered
    task's card entry parses back with its Hub data set id and a standard metric type."""
    from huggingface_hub import ModelCard

    from disembed.evaluation import TASKS
    from disembed.evaluation.task_scores import ScoreRow, TaskScores
    from disembed.serving.model_card import card_metadata

    scores = []
    for name in TASKS.names():
        meta = TASKS.get(name).metadata
        sizes = {"tatoeba": {"de": 9, "zh": 9}, "sts17": {"en-de": 9}, "bucc": {"de-en": 9}
                 }.get(name, {"en-de": 9, "ro-en": 9})
        scores.append(TaskScores(name, meta.main_metric, meta.main_subset, averages=[
            ScoreRow("meaning", meta.main_subset, meta.main_metric, 0.5, len(sizes))],
            data_sizes=sizes))
    info = {"method": "seed", "languages": ["de"], "base_model": None}
    card = ModelCard("---\n" + card_metadata(info, scores) + "\n---\n\n# card\n")
    results = {r.dataset_name: r for r in card.data.eval_results}
    tatoeba = results["Tatoeba (LASER v1)"]
    assert tatoeba.metric_type == "accuracy" and "tatoeba-14" not in tatoeba.metric_name
    assert tatoeba.metric_name.endswith("mean over 2 languages: de, zh")
    assert tatoeba.dataset_type == "mteb/tatoeba-bitext-mining"
    assert results["WMT20 QE task 1 (direct assessment)"].metric_type == "cos_sim_pearson"
    assert results["BUCC 2018 (sample split)"].metric_type == "f1"
    assert sorted(card.data.datasets) == ["mteb/sts17-crosslingual-sts",
                                          "mteb/tatoeba-bitext-mining", "wmt/wmt20_mlqe_task1"]


def test_routed_export_card_says_it_identifies_the_language(trained, tmp_path):
    root, _ = trained
    out = export_model(root / "mean-centering", tmp_path / "mc").path
    card = (out / "README.md").read_text()
    assert "trust_remote_code=True" in card and 'language="de"' in card
    assert "disembed_meaning.py" in card and (out / "disembed_meaning.py").is_file()
    assert read_export_info(out)["routes"] == ["de", "en", "global"]
    modules = json.loads((out / "modules.json").read_text())
    assert modules[-1]["type"] == "disembed_meaning.LanguageRoutedMeaning"


def test_export_refuses_encoders_without_a_sentence_transformers_form(tmp_path, hash_encoder):
    X = hash_encoder.encode(["a", "b", "c"])
    model = make_method("mean-centering").fit(X, X, "de", "en")
    model.save(tmp_path / "m", metadata={"encoder": hash_encoder.identity.to_dict()})
    with pytest.raises(ConfigError, match="'hash' encoder.*no sentence-transformers form"):
        export_model(tmp_path / "m", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.tmp-*"))


def test_cli_export_prints_how_to_load(trained, tmp_path, capsys):
    from disembed.cli import main

    root, _ = trained
    assert main(["export", "--model", str(root / "linear-map"), "--out",
                 str(tmp_path / "lm")]) == 0
    out = capsys.readouterr().out
    assert "trust_remote_code=True" in out and "language=LANG" in out and "de, en" in out
    assert (tmp_path / "lm" / "modules.json").is_file()


def test_export_will_not_overwrite_without_being_asked(trained, tmp_path):
    root, _ = trained
    (tmp_path / "taken").mkdir()
    with pytest.raises(ConfigError, match="already exists"):
        export_model(root / "seed", tmp_path / "taken")


def test_an_export_through_a_link_replaces_its_target_and_keeps_the_link(trained, tmp_path):
    """--out a link to an earlier export: the swap replaced the link itself by a folder and
    left the linked export stale (issue 33 probe)."""
    root, _ = trained
    export_model(root / "mean-centering", tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    export_model(root / "seed-centered", tmp_path / "link", overwrite=True)
    assert (tmp_path / "link").is_symlink()
    info = json.loads((tmp_path / "real" / "disembed_export.json").read_text())
    assert info["method"] == "seed-centered"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_every_file_of_an_export_has_plain_permissions(trained, tmp_path):
    """safetensors wrote model.safetensors 0600 beside 0644 files (issue 33): a shared
    export was then unreadable to the other users who could read the rest."""
    import os
    import stat

    root, _ = trained
    old = os.umask(0o022)
    try:
        export_model(root / "seed-centered", tmp_path / "exp")
    finally:
        os.umask(old)
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode)
             for p in [tmp_path / "exp", *(tmp_path / "exp").rglob("*")]}
    assert any(name.endswith("model.safetensors") for name in modes)
    assert {n: m for n, m in modes.items()
            if m != (0o755 if (tmp_path / n).is_dir() else 0o644)} == {}


@pytest.mark.slow
def test_real_e5_export_matches_disembed_on_real_sentences(tmp_path):
    """e5-small (torch backend, float32) + SEED and mean-centering on Tatoeba pairs: plain
    ``encode`` (the export identifies the language itself) and with ``language=``."""
    from fresh_st import encode_in_fresh_process as fresh

    from disembed.data.tatoeba import load_tatoeba

    data = load_tatoeba("de", os.environ.get("DISEMBED_DATA_DIR"))
    de, en = data.source[:300], data.english[:300]
    enc = load_encoder("e5-small-torch")
    X, Y = enc.encode(de), enc.encode(en)
    probe = {"de": data.source[300:310], "en": data.english[300:310]}
    jobs, expected = [], []
    for name, params in (("seed", {"max_epochs": 5}), ("mean-centering", {})):
        model = make_method(name, **params).fit(X, Y, "de", "en")
        model.save(tmp_path / name, metadata={"encoder": enc.identity.to_dict()})
        result = export_model(tmp_path / name, tmp_path / f"{name}-st")
        trust = read_export_info(result.path)["identifies_language"]
        for lang, texts in probe.items():
            E = enc.encode(texts)
            jobs.append({"dir": str(result.path), "texts": texts, "trust": trust})
            expected.append((f"{name} {lang}", model.meaning(E)))
            if trust:
                jobs.append({"dir": str(result.path), "texts": texts, "trust": True,
                             "kwargs": {"language": lang}})
                expected.append((f"{name} {lang} tagged", model.meaning(E, lang)))
    got = fresh(jobs, tmp_path)
    for (key, want), vectors in zip(expected, got, strict=True):
        assert cosines(vectors, want).min() >= 0.9999, key


def test_export_never_deletes_its_model_or_a_users_folder(trained, tmp_path):
    """Issue 22: ``export --model D --out D --overwrite`` deleted the model; ``--out`` the
    model's parent deleted everything in it."""
    import shutil

    from disembed.cli import main

    root, _ = trained
    parent = tmp_path / "p"
    model = parent / "m"
    shutil.copytree(root / "mean-centering", model)
    (parent / "notes.txt").write_text("mine")
    for out in (model, parent):
        with pytest.raises(ConfigError, match="holds the input folder|is the input folder"):
            export_model(model, out, overwrite=True)
        assert main(["export", "--model", str(model), "--out", str(out), "--overwrite"]) == 2
    assert (model / "config.json").is_file() and (parent / "notes.txt").read_text() == "mine"
    users = tmp_path / "users"
    users.mkdir()
    (users / "thesis.tex").write_text("x")
    with pytest.raises(ConfigError, match="not written by disembed.*thesis.tex"):
        export_model(model, users, overwrite=True)
    assert (users / "thesis.tex").is_file()


def test_overwrite_replaces_an_export_but_not_one_with_foreign_files(trained, tmp_path):
    root, _ = trained
    out = tmp_path / "exp"
    export_model(root / "mean-centering", out)
    assert (out / ".disembed-manifest.json").is_file()
    export_model(root / "linear-map", out, overwrite=True)  # an export: replaced
    assert json.loads((out / "disembed_export.json").read_text())["method"] == "linear-map"
    (out / "added.txt").write_text("mine")
    with pytest.raises(ConfigError, match="did not write there: added.txt"):
        export_model(root / "mean-centering", out, overwrite=True)
    assert (out / "added.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_the_work_folder_of_a_killed_export_is_removed_by_the_next(trained, tmp_path):
    """A SIGKILLed export leaves ``.OUT.tmp-<pid>-*``; the next export removes it."""
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".exp.tmp-{dead.pid}-abc"
    (stale / "model").mkdir(parents=True)
    (stale / "model" / "big.bin").write_bytes(b"0" * 1000)
    root, _ = trained
    export_model(root / "mean-centering", tmp_path / "exp")
    assert not stale.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


@pytest.mark.parametrize("name", ["mean-centering", "seed-centered"])
def test_exported_identifier_centres_far_rows_as_disembed_does(trained, name):
    """Rows far from every known language (the identifier says "unknown") take their most
    likely language in the export's module too, exactly as ``meaning(X)`` does, whatever
    the model's ``unknown_language`` (which is for tags the model never saw)."""
    import copy

    import torch

    from disembed.serving.st_pipeline import identifying_module

    model, enc = trained[1][name]
    assert model.unknown_policy == "global"  # the default
    model = copy.deepcopy(model)
    model.language_id_.threshold_ = 1.01  # every row is "far from every known language"
    far = enc.encode(["hallo welt", "hello world", "katze hund haus", "red tree big"])
    assert set(model.predict_language(far).codes) == {"unknown"}
    module = identifying_module(meaning_map(model), model.language_id_, {},
                                model.unknown_policy)
    got = module.forward({"sentence_embedding": torch.from_numpy(far)})["sentence_embedding"]
    np.testing.assert_allclose(got.numpy(), model.meaning(far), atol=1e-5)
    assert module.identify(torch.from_numpy(far)) == list(model.predict_language(far).nearest)


@pytest.mark.parametrize("name", ["mean-centering", "seed-centered", "linear-map"])
def test_exported_module_takes_every_code_disembed_takes(trained, name):
    """Issue 31: a real language the model never saw (``hi``, ``yo``, ``bod_Tibt``) gets the
    model's fallback in the export as in disembed (the export refused ``hi``); ``und`` and
    ``mul`` are no tag; only a malformed code is an error."""
    import torch

    from disembed.serving.export import _aliases
    from disembed.serving.st_pipeline import identifying_module

    model, enc = trained[1][name]
    mmap = meaning_map(model)
    module = identifying_module(mmap, model.language_id_, _aliases(mmap.routes),
                                model.unseen_route())
    X = enc.encode(["hallo welt", "hello world", "katze hund haus"])

    def run(**kwargs):
        out = module.forward({"sentence_embedding": torch.from_numpy(X)}, **kwargs)
        return out["sentence_embedding"].numpy()

    for code in ("hi", "yo", "bod_Tibt", "de", "deu", "ger", "EN", "und", "mul-Latn"):
        np.testing.assert_allclose(run(language=code), model.meaning(X, code), atol=1e-5,
                                   err_msg=code)
    np.testing.assert_allclose(run(), model.meaning(X), atol=1e-5)
    for bad in ("xx", "zzz", "qaa"):
        with pytest.raises(ValueError, match="not a well-formed code"):
            run(language=bad)
