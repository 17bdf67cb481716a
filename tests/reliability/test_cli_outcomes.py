"""Cases that end in a correct result (not an error), and how the CLI ends on faults and bugs."""

from __future__ import annotations

import errno
import json
import os
import stat

import numpy as np
import pytest
from world import LINES, run_cli

import disembed.cli.encode as encode_verb
from disembed.cli import errors


@pytest.mark.parametrize("template, output", [
    ("encode {a} --out {out}/x/y/e.npy --encoder hash:8", "x/y/e.npy"),
    ("score {st} --out {out}/x/y/sc.tsv --encoder hash:8", "x/y/sc.tsv"),
    ("mine {s} {t} --out {out}/x/y/m.tsv --encoder hash:8", "x/y/m.tsv"),
    ("search {s} {t} --out {out}/x/y/q.tsv --encoder hash:8", "x/y/q.tsv"),
    ("evaluate --encoder hash:8 --tasks sts17 --out {out}/x/y/r.json", "x/y/r.json"),
], ids=["encode", "score", "mine", "search", "evaluate"])
def test_missing_output_folders_are_created(template, output, env, tmp_path, capsys):
    code, _, err = run_cli(env.argv(template, tmp_path / "out"), capsys)
    assert code == 0, err
    assert (tmp_path / "out" / output).is_file()


def test_outputs_get_plain_file_permissions(env, tmp_path, capsys):
    """mkstemp's 0600 used to leak into every output (and over a rewritten input)."""
    old = os.umask(0o022)
    try:
        code, _, err = run_cli(env.argv("encode {a} --out {out}/e.npy --encoder hash:8",
                                        tmp_path), capsys)
    finally:
        os.umask(old)
    assert code == 0, err
    for name in ("e.npy", "e.txt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644


def test_a_cache_dir_from_the_environment_that_is_a_file(env, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(env["afile"]))
    code, _, err = run_cli(env.argv("encode {a} --out {out}/e.npy --encoder hash:8", tmp_path),
                           capsys)
    assert code == 2 and "is not a directory" in err and "DISEMBED_CACHE_DIR" in err, err


def test_search_k_larger_than_the_database_says_what_it_wrote(env, tmp_path, capsys):
    code, out, err = run_cli(env.argv("search {s} {t} --out {out}/q.tsv --encoder hash:8 -k 100",
                                      tmp_path), capsys)
    assert code == 0, err
    assert "12 queries x 12 neighbours" in out and "the database has only 12" in out
    assert len((tmp_path / "q.tsv").read_text().splitlines()) == 1 + 12 * 12


def test_mine_with_a_model_uses_the_models_encoder(env, tmp_path, capsys):
    code, _, err = run_cli(env.argv("mine {s} {t} --out {out}/m.tsv --model {model} --src-lang "
                                    "de --tgt-lang en", tmp_path), capsys)
    assert code == 0, err
    record = json.loads((tmp_path / "m.tsv.run" / "src.json").read_text())
    assert record["encoder_name"] == "hash:16"  # the model's, not the default e5-small


def test_mine_sees_an_edit_that_keeps_size_and_mtime(env, tmp_path, capsys):
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("alpha\nbeta\ngamma\n")
    tgt.write_text("alpha\nbeta\ngamma\n")
    argv = ["mine", str(src), str(tgt), "--out", str(tmp_path / "m.tsv"), "--encoder", "hash:8"]
    assert run_cli(argv, capsys)[0] == 0
    stamp = src.stat()
    src.write_text("gamma\nalpha\nbeta\n")  # same bytes, another order
    os.utime(src, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert src.stat().st_size == stamp.st_size and src.stat().st_mtime_ns == stamp.st_mtime_ns
    assert run_cli(argv, capsys)[0] == 0
    rows = [line.split("\t") for line in (tmp_path / "m.tsv").read_text().splitlines()[1:]]
    assert rows and all(r[1] == r[2] for r in rows), rows  # each sentence with itself


def test_encode_refuses_to_overwrite_its_input_and_leaves_it_alone(env, tmp_path, capsys):
    words = tmp_path / "words.txt"
    words.write_bytes(b"x\n\ny\r\n")
    os.chmod(words, 0o640)
    code, _, err = run_cli(["encode", str(words), "--out", str(tmp_path / "words.npy"),
                            "--encoder", "hash:8", "--skip-bad-lines"], capsys)
    assert code == 2 and "which is the input file" in err
    assert words.read_bytes() == b"x\n\ny\r\n" and stat.S_IMODE(words.stat().st_mode) == 0o640
    assert not (tmp_path / "words.npy").exists()


def test_a_failed_encode_leaves_the_previous_outputs(env, tmp_path, capsys, monkeypatch):
    argv = env.argv("encode {a} --out {out}/e.npy --encoder hash:8", tmp_path)
    assert run_cli(argv, capsys)[0] == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    (tmp_path / "in.txt").write_text("\n".join(LINES[::-1] + ["new", "lines"]) + "\n")
    calls = []

    def failing_encode(self, texts, *, batch_size=64):
        calls.append(len(texts))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("disembed.encoders.cached.CachedEncoder.encode", failing_encode)
    code, _, err = run_cli(["encode", str(tmp_path / "in.txt"), "--out",
                            str(tmp_path / "e.npy"), "--encoder", "hash:8"], capsys)
    assert calls and code == 2
    assert "disk full / file too large: " in err and "Traceback" not in err
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "in.txt"}
    assert after == before  # the old pair, and no temporary files


def _npy_bytes(matrix) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, matrix)
    return buffer.getvalue()


def test_a_pair_cut_between_its_two_renames_is_finished_by_the_reader(tmp_path):
    """A writer killed after renaming the matrix but before its sentences: the journal lets
    the next reader (npy:) complete the pair, never read new rows beside old lines."""
    import subprocess
    import sys

    from disembed.encoders import HashEncoder
    from disembed.encoders.npy_encoder import NpyEncoder
    from disembed.util.files import AtomicFile

    (tmp_path / "e.npy").write_bytes(_npy_bytes(HashEncoder(8).encode(["a", "b"])))
    (tmp_path / "e.txt").write_text("a\nb\n")
    matrix, texts = AtomicFile(tmp_path / "e.npy"), AtomicFile(tmp_path / "e.txt")
    matrix.write(_npy_bytes(HashEncoder(8).encode(["c", "d", "e"])))
    texts.write(b"c\nd\ne\n")
    matrix.prepare()
    texts.prepare()
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)
    (tmp_path / f".e.npy.commit-{dead}").write_text(json.dumps(
        [[str(matrix.tmp), str(matrix.path)], [str(texts.tmp), str(texts.path)]]))
    os.replace(matrix.tmp, matrix.path)  # ... and the writer died here
    assert (tmp_path / "e.txt").read_text() == "a\nb\n"  # a mixed pair on disk, for now
    reader = NpyEncoder(str(tmp_path / "e.npy"))
    assert (tmp_path / "e.txt").read_text() == "c\nd\ne\n"
    np.testing.assert_array_equal(reader.encode(["e", "c"]), HashEncoder(8).encode(["e", "c"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.npy", "e.txt"]


def test_ctrl_c_between_the_two_renames_still_leaves_one_pair(tmp_path, monkeypatch):
    from disembed.encoders import HashEncoder
    from disembed.encoders.cached import CachedEncoder
    from disembed.util import files

    enc = CachedEncoder(HashEncoder(8), tmp_path / "cache")
    enc.encode_to_file(["a", "b"], tmp_path / "e.npy", texts_path=tmp_path / "e.txt")
    real_replace, calls = files.os.replace, []

    def replace_then_interrupt(src, dst):
        real_replace(src, dst)
        calls.append(str(dst))
        if calls[-1].endswith("e.npy"):  # the first of the pair's renames
            raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        enc.encode_to_file(["c", "d", "e"], tmp_path / "e.npy", texts_path=tmp_path / "e.txt")
    monkeypatch.setattr(files.os, "replace", real_replace)
    assert any(c.endswith("e.npy") for c in calls)
    assert (tmp_path / "e.txt").read_text() == "c\nd\ne\n"
    assert np.load(tmp_path / "e.npy").shape == (3, 8)
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".commit-" in p.name]


def test_a_bug_is_one_line_without_v_and_a_traceback_with_it(env, tmp_path, capsys,
                                                                monkeypatch):
    from disembed.cli import main

    def broken(args):
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(encode_verb, "handle", broken)  # the parser is built on every main()
    argv = env.argv("encode {a} --out {out}/e.npy --encoder hash:8", tmp_path)
    assert main(argv) == errors.INTERNAL_ERROR == 1
    err = capsys.readouterr().err
    assert err.startswith("disembed encode: internal error: ZeroDivisionError: division by zero")
    assert "rerun with -v" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert main(argv + ["-v"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "rerun with -v" not in err


@pytest.mark.parametrize("exc, code, fragment", [
    (OSError(errno.ENOSPC, "No space left on device", "/x/out.tsv"), 2,
     "disk full / file too large: /x/out.tsv"),
    (OSError(errno.EFBIG, "File too large", "/x/out.npy"), 2,
     "disk full / file too large: /x/out.npy"),
    (PermissionError(errno.EACCES, "Permission denied", "/x"), 2, "permission denied: /x"),
    (FileNotFoundError(errno.ENOENT, "No such file", "/x/y"), 2, "no such file or directory"),
    (KeyboardInterrupt(), 130, "interrupted; rerun the same command to resume"),
    (MemoryError(), 2, "out of memory"),
])
def test_system_errors_are_one_clear_line(exc, code, fragment, capsys):
    assert errors.report("mine", exc, 0) == code
    err = capsys.readouterr().err
    assert fragment in err and err.startswith("disembed mine: ") and "Traceback" not in err


def test_a_model_saved_without_a_checksum_still_loads(env, tmp_path, caplog):
    import shutil

    from disembed.methods import load_disentangler

    old = tmp_path / "old"
    shutil.copytree(env["model"], old)
    config = json.loads((old / "config.json").read_text())
    del config["weights_sha256"], config["config_sha256"]
    (old / "config.json").write_text(json.dumps(config))
    with caplog.at_level("WARNING", logger="disembed"):
        model = load_disentangler(old)
    assert model.method == "mean-centering"
    assert "saved without a checksum" in caplog.text
    X = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_array_equal(model.meaning(X, "de"),
                                  load_disentangler(env["model"]).meaning(X, "de"))


# --- issue 22: summaries and warnings say what happened ----------------------------------

def test_mine_says_the_pairs_it_wrote_and_the_k_it_used(env, tmp_path, capsys, caplog):
    """It printed "3 pairs" and wrote 2, and "k=50" on 5 sentences."""
    src = env.text("dup-s.tsv", "s1\tHallo Welt\ns2\tHallo Welt\ns3\tGuten Tag\n")
    tgt = env.text("dup-t.tsv", "t1\tHallo Welt\nt2\tGuten Tag\n")
    out = tmp_path / "m.tsv"
    code, stdout, err = run_cli(["mine", str(src), str(tgt), "--out", str(out), "--encoder",
                                 "hash:8", "-k", "50"], capsys)
    assert code == 0, err
    written = len(out.read_text().splitlines()) - 1
    assert stdout.startswith(f"{written} pairs -> "), stdout
    assert "k=2 (-k 50 clamped to the smaller side)" in stdout
    assert "k=50 but the smaller side has 2 sentences" in caplog.text


def test_score_says_cosine_ignores_pools(env, tmp_path, capsys, caplog):
    code, _, err = run_cli(env.argv("score {st} --out {out}/sc.tsv --encoder hash:8 "
                                    "--src-pool {a}", tmp_path), capsys)
    assert code == 0, err
    assert "--score cosine ignores them" in caplog.text


def test_train_warns_about_duplicated_identical_pairs_and_repeated_languages(
        env, tmp_path, capsys, caplog):
    pairs = env.text("dups.tsv", "de\ten\n" + "".join(f"Satz {i}\tSentence {i}\n"
                                                      for i in range(25))
                     + "Satz 1\tSentence 1\nHallo\tHallo\n")
    code, _, err = run_cli(["train", "--method", "mean-centering", "--pairs", str(pairs),
                            "--src-col", "de", "--tgt-col", "en", "--out", str(tmp_path / "m"),
                            "--encoder", "hash:8"], capsys)
    assert code == 0, err
    assert "1 of 27 pairs repeat an earlier pair" in caplog.text
    assert "1 of 27 pairs have the same text on both sides" in caplog.text
    from disembed.experiment import TrainingData

    data = TrainingData(("de", "deu", "de"), 20)
    assert data.languages == ("de",)
    assert "name de more than once" in caplog.text


def test_the_hardware_probe_cache_follows_cache_dir(env, tmp_path, capsys, monkeypatch):
    from disembed.util.cache_dir import default_cache_dir

    seen = []
    import disembed.cli.info as info_verb

    real = info_verb.probe if hasattr(info_verb, "probe") else None
    assert real is not None
    monkeypatch.setattr(info_verb, "probe", lambda *a, **k: seen.append(
        str(default_cache_dir())) or real(*a, **k))
    code, _, err = run_cli(["info", "--cache-dir", str(tmp_path / "c")], capsys)
    assert code == 0, err
    assert seen == [str(tmp_path / "c")]
    assert list((tmp_path / "c" / "hardware").glob("*.json"))
    assert str(default_cache_dir()) != str(tmp_path / "c")  # restored after the verb


def test_extreme_finite_vectors_score_right(env, tmp_path, capsys):
    """An npy: matrix of finite values near 1e38 scored 0.000000 (search)."""
    texts = ["alpha", "beta", "gamma"]
    matrix = np.array([[1e38, 0, 0], [0, 2e38, 0], [1e38, 1e38, 0]], np.float32)
    np.save(tmp_path / "big.npy", matrix)
    (tmp_path / "big.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    q = env.text("bigq.txt", "alpha\n")
    code, _, err = run_cli(["search", str(q), str(tmp_path / "big.txt"), "--out",
                            str(tmp_path / "q.tsv"), "--encoder", f"npy:{tmp_path / 'big.npy'}",
                            "-k", "3"], capsys)
    assert code == 0, err
    rows = [line.split("\t") for line in (tmp_path / "q.tsv").read_text().splitlines()[1:]]
    assert [float(r[2]) for r in rows] == pytest.approx([1.0, 2 ** -0.5, 0.0], abs=1e-6)


def test_standard_input_is_read_with_a_dash(env, tmp_path, capsys, monkeypatch):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"eins\nzwei\n")))
    code, _, err = run_cli(["encode", "-", "--out", str(tmp_path / "e.npy"), "--encoder",
                            "hash:8"], capsys)
    assert code == 0, err
    assert (tmp_path / "e.txt").read_text() == "eins\nzwei\n"
    assert np.load(tmp_path / "e.npy").shape == (2, 8)


def test_environment_settings_are_checked(monkeypatch):
    from disembed.exceptions import ConfigError
    from disembed.hardware.threads import choose_threads
    from disembed.util.locks import lock_timeout

    monkeypatch.setenv("DISEMBED_NUM_THREADS", "100000")
    with pytest.raises(ConfigError, match="DISEMBED_NUM_THREADS=100000 is more than 4 threads"):
        choose_threads()
    for bad in ("nan", "-1", "soon"):
        monkeypatch.setenv("DISEMBED_LOCK_TIMEOUT", bad)
        with pytest.raises(ConfigError, match="expected a number of seconds >= 0"):
            lock_timeout()
