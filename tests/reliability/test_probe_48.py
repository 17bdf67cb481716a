"""Issue 48.6: a fresh probe of odd text, blank lines, huge inputs and bad files through the
library and the CLI, cases not in the earlier probes (test_hostile_probe.py,
test_bad_inputs.py). The wrong-type, edited-model and CLI-option cases of the same probe are
in test_probe_text_inputs.py, test_probe_model_configs.py and test_probe_cli_edges.py;
docs/reliability.md counts them all.

Every case ends in an allowed exit code, never a traceback; a refusal is one
``disembed VERB: error:`` line; a success writes one vector per kept line, all finite."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from world import run_cli

from disembed import SavedModel
from disembed.exceptions import DataError

OK, ERR = 0, 2

#: name -> (file content, exit code of ``encode``, vectors written when it succeeds)
TEXTS: dict[str, tuple[str | bytes, int, int]] = {
    "line-separator-u2028": ("eins\u2028zwei\ndrei\n", OK, 2),
    "next-line-u0085": ("eins\u0085zwei\ndrei\n", OK, 2),
    "vertical-tab-and-form-feed": ("eins\x0bzwei\x0cdrei\nvier\n", OK, 2),
    "ideographic-space-line": ("eins\n\u3000\u3000\nzwei\n", ERR, 0),
    "nbsp-only-line": ("eins\n\u00a0\nzwei\n", ERR, 0),
    "combining-mark-alone": ("\u0301\nzwei\n", OK, 2),
    "zalgo-200-marks": ("a" + "\u0301" * 200 + "\nzwei\n", OK, 2),
    "variation-selector-only": ("eins\n\ufe0f\nzwei\n", ERR, 0),
    "tag-characters": ("\U000e0041\U000e0042 flag\nzwei\n", OK, 2),
    "private-use": ("\ue000\ue001\nzwei\n", OK, 2),
    "noncharacter-ffff": ("\uffff\nzwei\n", OK, 2),
    "bom-mid-file": ("eins\n\ufeffzwei\n", OK, 2),
    "bom-only-line": ("eins\n\ufeff\nzwei\n", ERR, 0),
    "math-bold-latin": ("\U0001d41b\U0001d428\U0001d425\U0001d41d\nzwei\n", OK, 2),
    "hangul-filler-only": ("\u3164\nzwei\n", OK, 2),
    "decomposed-umlaut": ("Mu\u0308ller\nMüller\n", OK, 2),
    "mixed-scripts": ("Hallo мир 世界 عالم\nzwei\n", OK, 2),
    "one-megabyte-word": ("x" * (1 << 20) + "\nzwei\n", OK, 2),
    "ten-thousand-lines": ("".join(f"z{i}\n" for i in range(10000)), OK, 10000),
    "overlong-utf8": (b"eins\n\xc0\xaf\n", ERR, 0),
    "cesu8-surrogate": (b"eins\n\xed\xa0\x80\n", ERR, 0),
    "truncated-multibyte": (b"eins\nzw\xe2\x82", ERR, 0),
    "lone-cr-at-end": ("eins\nzwei\r", ERR, 0),
    "blank-lines-between": ("eins\n\n\nzwei\n", ERR, 0),
    "tabs-only-line": ("eins\n\t\t\nzwei\n", ERR, 0),
}


def _write(root, name, content):
    path = root / f"{name}.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _one_error_line(err: str, verb: str) -> bool:
    lines = [x for x in err.splitlines() if x.strip() and " INFO " not in x
             and " WARNING " not in x]
    return "Traceback" not in err and any(x.startswith(f"disembed {verb}: error:")
                                          for x in lines)


@pytest.mark.parametrize("case", sorted(TEXTS))
def test_encode_odd_text(env, tmp_path, capsys, case):
    content, code, rows = TEXTS[case]
    src = _write(tmp_path, case, content)
    out = tmp_path / "e.npy"
    got, _, err = run_cli(["encode", str(src), "--out", str(out), "--encoder", "hash:8",
                           "-q"], capsys)
    assert got == code, err
    if code == OK:
        X = np.load(out)
        assert X.shape == (rows, 8) and np.isfinite(X).all()
        # lines end in LF only: str.splitlines() would also split at U+2028, NEL, VT, FF
        assert len((tmp_path / "e.txt").read_text(encoding="utf-8").split("\n")) == rows + 1
    else:
        assert _one_error_line(err, "encode"), err
        assert not out.exists()


#: refused for a blank line (a stray CR is refused even with --skip-bad-lines: it may be a
#: line end of another system, so nothing is guessed)
BLANK_ONES = sorted(k for k, v in TEXTS.items() if v[1] == ERR and isinstance(v[0], str)
                    and k != "lone-cr-at-end")


@pytest.mark.parametrize("case", BLANK_ONES)
def test_skip_bad_lines_keeps_every_other_line(env, tmp_path, capsys, case):
    content, _, _ = TEXTS[case]
    src = _write(tmp_path, case, content)
    got, _, err = run_cli(["encode", str(src), "--out", str(tmp_path / "e.npy"), "--encoder",
                           "hash:8", "--skip-bad-lines", "-q"], capsys)
    assert got == OK, err
    kept = (tmp_path / "e.txt").read_text(encoding="utf-8").splitlines()
    assert kept == ["eins", "zwei"]


@pytest.mark.parametrize("case", sorted(k for k, v in TEXTS.items() if v[1] == OK
                                        and isinstance(v[0], str) and v[2] == 2
                                        and k != "decomposed-umlaut"))  # 2 equal lines: a tie
def test_search_odd_text_finds_each_line_itself(env, tmp_path, capsys, case):
    """A line searched against its own file finds itself first (nothing mixed up)."""
    src = _write(tmp_path, case, TEXTS[case][0])
    out = tmp_path / "s.tsv"
    got, _, err = run_cli(["search", str(src), str(src), "--out", str(out), "-k", "1",
                           "--encoder", "hash:16", "-q"], capsys)
    assert got == OK, err
    rows = [r.split("\t") for r in out.read_text(encoding="utf-8").split("\n")[1:-1]]
    assert len(rows) == 2 and all(r[0] == r[3] for r in rows), rows


# --- the library: the same text in any Unicode form gives the same vector ---------------------

def test_decomposed_and_composed_text_give_one_vector(env):
    saved = SavedModel.load(env["model"])
    a, b = saved.meaning(["Mu\u0308ller", "Müller"], "de")
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("text", ["\u200b", "\ufeff", " \u3000 ", "\u00a0", "\x00"])
def test_the_library_refuses_an_invisible_sentence_naming_its_row(env, text):
    saved = SavedModel.load(env["model"])
    with pytest.raises(DataError, match="sentence 1 is empty"):
        saved.meaning(["eins", text], "de")


@pytest.mark.parametrize("bad", [None, 3, b"bytes", ["nested"], 1.5])
def test_the_library_refuses_a_non_string_row_naming_it(env, bad):
    saved = SavedModel.load(env["model"])
    with pytest.raises(DataError, match=f"item 1 is {type(bad).__name__}, expected str"):
        saved.meaning(["eins", bad], "de")


def test_an_empty_list_gives_an_empty_matrix(env):
    saved = SavedModel.load(env["model"])
    out = saved.meaning([], "de")
    assert out.shape[0] == 0


# --- bad files for mining inputs (gzip) -----------------------------------------------------

GZ = {
    "truncated-gzip": lambda p: p.write_bytes(gzip.compress(
        "".join(f"Satz {i}\n" for i in range(2000)).encode())[:400]),
    "empty-gzip": lambda p: p.write_bytes(gzip.compress(b"")),
    "not-gzip": lambda p: p.write_bytes(b"eins\nzwei\n"),
    "gzip-of-binary": lambda p: p.write_bytes(gzip.compress(bytes(range(256)))),
}


@pytest.mark.parametrize("case", sorted(GZ))
def test_mine_refuses_a_bad_gzip_input_clearly(env, tmp_path, capsys, case):
    src = tmp_path / "src.txt.gz"
    GZ[case](src)
    out = tmp_path / "m.tsv"
    got, _, err = run_cli(["mine", str(src), str(env["a"]), "--out", str(out), "--encoder",
                           "hash:8", "--run-dir", str(tmp_path / "run"), "-q"], capsys)
    assert got == ERR, err
    assert _one_error_line(err, "mine"), err
    assert not out.exists()
