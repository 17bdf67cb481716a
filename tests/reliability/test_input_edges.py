"""Issue 33: wrong answers that came with success, at the API and the CLI: calibrating from
the wrong text, a NaN row that emptied a mining result, file names read as patterns, a tab
that broke the output TSV, lone surrogates and invisible lines."""

from __future__ import annotations

import json

import numpy as np
import pytest
from world import run_cli

from disembed import calibrate_saved
from disembed.encoders import HashEncoder
from disembed.encoders.cached import cached
from disembed.exceptions import DataError, NonFiniteError
from disembed.methods import load_disentangler, make_method
from disembed.mining import MineConfig, mine_embeddings, score_embeddings
from disembed.retrieval.search import search, search_both

# --- calibrate: a list of sentences of the language it names ----------------------------------


def test_calibrate_saved_refuses_a_bare_string(env):
    before = (env["model"] / "config.json").read_bytes()
    with pytest.raises(DataError, match="got a single str .'こんにちは世界'.; wrap it in a list"):
        calibrate_saved(env["model"], "ja", "こんにちは世界")
    assert (env["model"] / "config.json").read_bytes() == before


def _clusters(seed: int = 0, d: int = 16):
    """Three well separated 'languages' of raw embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d)) * 4

    def rows(k, n):
        return (centres[k] + rng.normal(size=(n, d))).astype(np.float32)

    return rows


def test_calibrating_a_known_language_with_text_of_another_is_refused():
    rows = _clusters()
    model = make_method("mean-centering").fit(rows(0, 200), rows(1, 200), "de", "en")
    before = model.saved_state()[0]
    with pytest.raises(DataError, match=r"finds only 0% of these 50 sentences to be 'de' "
                                        r"\((unknown|en): 50\)"):
        model.calibrate(rows(2, 50), "de")
    after = model.saved_state()[0]
    assert all(np.array_equal(before[k], after[k]) for k in before)  # the German mean kept
    model.calibrate(rows(0, 50), "de")  # German text for German: accepted
    model.calibrate(rows(2, 50), "de", check_language=False)  # told so: accepted
    model.calibrate(rows(2, 50), "zh")  # a new language: nothing to replace


def test_calibrate_cli_passes_the_override(env, tmp_path, capsys, monkeypatch):
    seen = {}

    def fake(*args, **kwargs):
        seen.update(kwargs)
        raise DataError("stop here")

    monkeypatch.setattr("disembed.cli.calibrate.calibrate_saved", fake)
    argv = env.argv("calibrate {a} --model {model} --language de", tmp_path)
    assert run_cli(argv, capsys)[0] == 2 and seen["check_language"] is True
    assert run_cli(argv + ["--skip-language-check"], capsys)[0] == 2
    assert seen["check_language"] is False


# --- embeddings must be finite wherever they are searched --------------------------------------

def _unit(n: int, seed: int) -> np.ndarray:
    X = np.random.default_rng(seed).normal(size=(n, 8)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_row_is_an_error_not_an_empty_result(bad):
    x, y = _unit(20, 0), _unit(20, 1)
    assert len(mine_embeddings(x, y)) > 0
    x[7, 3] = bad
    with pytest.raises(NonFiniteError, match="x row 7 holds NaN or infinite values"):
        mine_embeddings(x, y, MineConfig(k=3))
    with pytest.raises(NonFiniteError, match="queries row 7"):
        search(x, y, 3)
    with pytest.raises(NonFiniteError, match="y row 7"):
        search_both(y, x, 3)
    with pytest.raises(NonFiniteError, match="src row 7"):
        score_embeddings(x, y)


def test_an_empty_side_is_named_not_a_k_error():
    with pytest.raises(DataError, match="x has no rows: there is nothing to mine"):
        mine_embeddings(_unit(5, 0)[:0], _unit(5, 1))


# --- file names are names, tabs never reach the output TSV -------------------------------------

def test_mine_reads_a_file_name_with_brackets_literally(env, tmp_path, capsys):
    (tmp_path / "data[1].txt").write_text("Haus\nBaum\n", encoding="utf-8")
    (tmp_path / "data1.txt").write_text("Auto\nZug\n", encoding="utf-8")  # what a glob matches
    (tmp_path / "a,b.txt").write_text("Haus\nBaum\n", encoding="utf-8")
    for name in ("data[1].txt", "a,b.txt"):
        out = tmp_path / f"m-{len(name)}.tsv"
        argv = ["mine", str(tmp_path / name), str(tmp_path / name), "--out", str(out),
                "--encoder", "hash:8"]
        code, _, err = run_cli(argv, capsys)
        assert code == 0, err
        rows = [r.split("\t") for r in out.read_text().splitlines()[1:]]
        assert {r[1] for r in rows} == {"Haus", "Baum"}, name


def test_a_line_with_a_tab_in_a_text_file_is_skipped_when_asked_never_written(env, tmp_path,
                                                                           capsys):
    """Every query of ``search`` is a row of its output: a text line with tabs, written
    verbatim, gave rows of 8 fields where 6 belong."""
    for verb, fields in (("search", 6), ("mine", 5)):
        argv = env.argv(verb + " {texttab} {texttab} --out {out}/o.tsv --encoder hash:8 "
                        "--skip-bad-lines -k 1", tmp_path)
        code, _, err = run_cli(argv, capsys)
        assert code == 0, err
        rows = (tmp_path / "o.tsv").read_text().splitlines()
        assert len(rows) == 2 and all(len(r.split("\t")) == fields for r in rows), rows


# --- text that is no text -----------------------------------------------------------------------

@pytest.mark.parametrize("text", ["a \ud800 b", "\udc00"])
def test_a_lone_surrogate_is_a_data_error_in_every_encoder_path(text, tmp_path):
    for encoder in (HashEncoder(8), cached(HashEncoder(8), tmp_path)):
        with pytest.raises(DataError, match=r"holds a lone surrogate \(U\+D[89A-F]00\)"):
            encoder.encode(["fine", text])


@pytest.mark.parametrize("text", ["\u200b", "\u200c\u200d", " \u2060 ", "\ufeff"])
def test_a_text_of_invisible_characters_is_empty(text, tmp_path):
    with pytest.raises(DataError, match="empty or whitespace only"):
        cached(HashEncoder(8), tmp_path).encode(["fine", text])


def test_calibrate_leaves_out_invisible_lines(env, tmp_path, capsys):
    text = tmp_path / "fr.txt"
    text.write_text("un\n\u200b\ndeux\n\n trois\n", encoding="utf-8")
    out = tmp_path / "c"
    assert run_cli(env.argv(f"calibrate {text} --model {{model}} --language fr --out {out}",
                            tmp_path), capsys)[0] == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["metadata"]["calibrated"]["fr"] == {"sentences": 3}
    load_disentangler(out)


# --- und: "no one language" wherever a language may be left to the model ----------------------

@pytest.mark.parametrize("verb", ["mine", "search"])
@pytest.mark.parametrize("code", ["und", "und-Latn", "mul"])
def test_und_and_mul_leave_the_language_to_the_model_in_mine_and_search(verb, code, env,
                                                                        tmp_path, capsys):
    """``und`` was refused by ``mine`` and passed on by ``search`` (issue 33); both now mean
    what leaving the option out means: the model identifies each sentence's language."""
    outputs = []
    for given in ([], ["--src-lang", code, "--tgt-lang", code]):
        out = tmp_path / f"{verb}{len(given)}.tsv"
        argv = env.argv(f"{verb} {{s}} {{t}} --model {{model}} --out {out} --run-dir "
                        f"{tmp_path}/run{len(given)}", tmp_path) + given
        code_, _, err = run_cli(argv, capsys)
        assert code_ == 0, err
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]
