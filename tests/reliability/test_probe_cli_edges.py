"""Issue 48's CLI weak cases, each with the bug it once had: ``--out newdir/`` wrote a file
named ``newdir``; ``--model ""`` scored raw vectors without a word; ``--out - | head`` exited
2; ``score --src-col src --tgt-col src`` scored each sentence against itself;
``hash:100000000`` wrote 3.2 GB for 4 lines; a full disk said "(unknown path)" or "This is a
bug in disembed"."""

from __future__ import annotations

import errno
import io
import sys

import pytest
from world import run_cli

from disembed.encoders import HashEncoder
from disembed.encoders.hash_encoder import MAX_DIM
from disembed.exceptions import ConfigError

HASH = ["--encoder", "hash:16", "-q"]


def _argv(env, verb, out, *extra):
    """``VERB INPUTS --encoder hash:16 -q --out OUT EXTRA...``; ``out``: a path or ``-``."""
    run = env.root / "runs" / f"run-{abs(hash(str(out)))}"
    inputs = {"score": [str(env["st"])], "encode": [str(env["a"])],
              "search": [str(env["a"]), str(env["a"])],
              "mine": [str(env["s"]), str(env["t"]), "--run-dir", str(run)]}
    return [verb, *inputs[verb], *HASH, "--out", str(out), *extra]


@pytest.mark.parametrize("verb", ["score", "search", "mine", "encode"])
def test_an_out_path_ending_in_a_slash_is_refused_not_written_as_a_file(env, tmp_path, capsys,
                                                                         verb):
    out = str(tmp_path / "newdir") + "/"
    code, _, err = run_cli(_argv(env, verb, out), capsys)
    assert code == 2
    assert "ends in '/'" in err or "ending in .npy" in err, err
    assert not (tmp_path / "newdir").exists()


@pytest.mark.parametrize("option", ["--model", "--out", "--cache-dir", "--encoder"])
@pytest.mark.parametrize("verb", ["score", "search", "mine"])
def test_an_empty_option_is_refused(env, tmp_path, capsys, verb, option):
    """``--model ""`` is the working folder to pathlib; once it silently scored raw vectors."""
    argv = _argv(env, verb, tmp_path / "o.tsv") + [option, ""]
    code, _, err = run_cli(argv, capsys)
    assert code == 2, err
    assert "empty" in err and option in err, err
    assert not (tmp_path / "o.tsv").exists()


def test_one_column_for_both_sides_is_refused(env, tmp_path, capsys):
    out = tmp_path / "s.tsv"
    code, _, err = run_cli(_argv(env, "score", out, "--src-col", "src", "--tgt-col", "src"),
                           capsys)
    assert code == 2 and "--src-col and --tgt-col are both 'src'" in err, err
    assert not out.exists()


def test_score_tsv_refuses_one_column_for_both_sides(env, tmp_path):
    from disembed import score_tsv
    with pytest.raises(ConfigError, match="both 'src'"):
        score_tsv(env["st"], HashEncoder(16), tmp_path / "s.tsv", src_col="src", tgt_col="src")


class _ClosedPipe(io.RawIOBase):
    """Standard output whose reader has gone (``| head`` after its lines)."""

    def writable(self):
        return True

    def write(self, data):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


@pytest.mark.parametrize("verb", ["score", "search"])
def test_a_closed_pipe_on_standard_output_ends_quietly_with_exit_0(env, capsys, monkeypatch,
                                                                  verb):
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(_ClosedPipe())))
    code, _, err = run_cli(_argv(env, verb, "-"), capsys)
    assert code == 0, err
    assert "Broken pipe" not in err and "error" not in err, err


def test_the_hash_encoders_dimension_is_capped_at_its_limit_inclusive():
    assert HashEncoder(MAX_DIM).dim == MAX_DIM
    with pytest.raises(ConfigError, match=f"dim {MAX_DIM + 1} is above the limit"):
        HashEncoder(MAX_DIM + 1)


def test_a_huge_hash_dimension_is_refused_before_anything_is_written(env, tmp_path, capsys):
    out = tmp_path / "x.npy"
    code, _, err = run_cli(["encode", str(env["a"]), "--encoder", "hash:100000000", "--out",
                            str(out), "-q"], capsys)
    assert code == 2 and "above the limit of 65536" in err, err
    assert not out.exists()


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")  # no filename, as numpy's writes


def test_a_full_disk_without_a_path_names_what_the_command_writes(env, tmp_path, capsys,
                                                                  monkeypatch):
    monkeypatch.setattr("disembed.util.files.AtomicFile.write", _no_space)
    out = tmp_path / "s.tsv"
    code, _, err = run_cli(_argv(env, "score", out), capsys)
    assert code == 2, err
    assert "disk full / file too large: one of " in err and str(out) in err, err
    assert "unknown path" not in err


def test_a_full_disk_wrapped_in_another_error_is_not_called_a_bug(env, tmp_path, capsys,
                                                                  monkeypatch):
    def wrapped(self, texts, *, batch_size=64):
        try:
            _no_space()
        except OSError as exc:
            raise RuntimeError("could not write the shard") from exc

    monkeypatch.setattr(HashEncoder, "encode", wrapped)
    out = tmp_path / "x.npy"
    code, _, err = run_cli(["encode", str(env["a"]), "--encoder", "hash:24", "--out",
                            str(out), "-q"], capsys)
    assert code == 2, err
    assert "disk full" in err and "bug" not in err, err
