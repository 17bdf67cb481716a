"""Issue 33: what an output path names is written through or refused, never replaced, and a
folder a verb writes into is its own (or empty) unless ``--overwrite``.

An atomic write renames a temporary file over its target: done blindly, that replaced a
symbolic link by a file, a FIFO by a file, and (as root) ``/dev/stdout`` by a file.
:func:`disembed.util.files.output_target` decides for every writer.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path

import pytest
from world import run_cli

from disembed.exceptions import ConfigError
from disembed.util.files import AtomicFile, commit_together, output_target

sys.path.insert(0, str(Path(__file__).parents[1] / "faults"))
from harness import run_disembed  # noqa: E402

FILE_OUTPUTS = {
    "mine": "mine {s} {t} --out OUT --encoder hash:8 --run-dir {run}",
    "search": "search {s} {t} --out OUT --encoder hash:8 --run-dir {run}",
    "score": "score {st} --out OUT --encoder hash:8",
    "evaluate": "evaluate --encoder hash:8 --tasks sts17 --out OUT",
}
HEADS = {"mine": "score\tsrc\ttgt", "search": "query_id\trank", "score": "score\tsrc\ttgt",
         "evaluate": "{"}


def _argv(env, verb: str, out: Path | str, tmp_path: Path) -> list[str]:
    template = FILE_OUTPUTS[verb].replace("{run}", str(tmp_path / "run"))
    return [str(out) if a == "OUT" else a for a in env.argv(template, tmp_path)]


@pytest.mark.parametrize("verb", FILE_OUTPUTS)
def test_an_output_that_is_a_symbolic_link_is_written_through(verb, env, tmp_path, capsys):
    real, link = tmp_path / "real" / "result.txt", tmp_path / "link.txt"
    real.parent.mkdir()
    real.write_text("old\n")
    link.symlink_to(real)
    code, _, err = run_cli(_argv(env, verb, link, tmp_path), capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith(HEADS[verb])
    assert [p.name for p in real.parent.iterdir()] == ["result.txt"]  # no temporary left


def test_a_dangling_link_is_created_through(env, tmp_path, capsys):
    link = tmp_path / "link.tsv"
    link.symlink_to(tmp_path / "made.tsv")
    assert run_cli(_argv(env, "score", link, tmp_path), capsys)[0] == 0
    assert link.is_symlink() and (tmp_path / "made.tsv").read_text().startswith("score")


@pytest.mark.parametrize("verb", ["mine", "search", "score"])
def test_an_output_that_is_a_fifo_is_written_into_and_stays_a_fifo(verb, env, tmp_path,
                                                                    capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, out, err = run_cli(_argv(env, verb, fifo, tmp_path), capsys)
    reader.join(30)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert got and got[0].decode().startswith(HEADS[verb])


def test_dash_is_standard_output_and_the_summary_goes_to_standard_error(env, tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(_argv(env, "search", "-", tmp_path), capsys)
    assert code == 0, err
    assert out.startswith("query_id\trank\tscore") and "queries x" not in out
    assert "12 queries x 10 neighbours -> -" in err
    assert not (tmp_path / "-").exists() and not (tmp_path / "-.run").exists()


def _char_device(path: Path) -> Path:
    """A character device like /dev/null, made in the test's folder (never the system's own
    /dev: a regression would replace the system's node)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


def test_a_device_and_a_link_to_an_open_file_are_written_in_place(env, tmp_path, capsys):
    """A character device (as ``/dev/null``) stays one; a link into ``/proc/self/fd`` (as
    ``/dev/stdout``), in a child whose standard output is a file (as ``> f``): the pairs are
    appended to that file, the link stays, the summary goes to stderr. Stand-ins in the
    test's folder: a regression must not replace the system's ``/dev/null``."""
    null = _char_device(tmp_path / "null")
    assert run_cli(_argv(env, "score", null, tmp_path), capsys)[0] == 0
    assert stat.S_ISCHR(null.lstat().st_mode)
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    done = run_disembed(_argv(env, "search", stdout, tmp_path), tmp_path / "child",
                        env={"DISEMBED_CACHE_DIR": env.paths["cache"]})
    assert done.code == 0, done.stderr
    assert done.stdout.startswith("query_id\trank") and "neighbours ->" in done.stderr
    assert stdout.is_symlink()


def test_system_paths_are_streams_or_refused_never_files():
    """What the system's own nodes are taken for (decided without writing anything)."""
    assert output_target("/dev/stdout").kind == "stream"
    assert output_target("/dev/null").kind == "stream"
    assert output_target("/proc/self/fd/2").kind == "stream"
    with pytest.raises(ConfigError, match="no such device"):
        output_target("/dev/no-such-device")


@pytest.mark.parametrize("template, fragment", [
    ("encode {a} --out -", "encode writes two files as one step"),
    ("train --method mean-centering --pairs {pairs} --src-col de --tgt-col en --out -",
     "names a folder to write into"),
    ("bench --encoders hash:8 --out -", "names a folder to write into"),
    ("export --model {model} --out -", "names a folder to write into"),
])
def test_what_cannot_take_a_stream_refuses_it(template, fragment, env, tmp_path, capsys,
                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(env.argv(template, tmp_path), capsys)
    assert code == 2 and fragment in err, err
    assert not (tmp_path / "-").exists()


def test_block_devices_and_sockets_are_refused(tmp_path):
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "s"))
    with pytest.raises(ConfigError, match="is a socket"):
        AtomicFile(tmp_path / "s")
    try:
        os.mknod(tmp_path / "disk", stat.S_IFBLK | 0o600, os.makedev(7, 200))
    except PermissionError:
        pytest.skip("making a block device needs root")
    with pytest.raises(ConfigError, match="a block device"):
        output_target(tmp_path / "disk")


def test_files_written_together_are_never_split_over_a_link_into_another_folder(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "e.npy").symlink_to(tmp_path / "elsewhere" / "e.npy")
    files = [AtomicFile(tmp_path / "e.npy"), AtomicFile(tmp_path / "e.txt")]
    for f in files:
        f.write(b"x")
    with pytest.raises(ConfigError, match="must lie in one folder"):
        commit_together(files)


# --- folders: never the user's own, never a finished model replaced silently -----------------

TRAIN = ("train --method mean-centering --pairs {pairs} --src-col de --tgt-col en "
         "--encoder hash:8 --out {out}/m")


def test_train_refuses_a_users_folder_and_a_trained_model_without_overwrite(env, tmp_path,
                                                                           capsys):
    users = tmp_path / "m"
    users.mkdir()
    (users / "config.json").write_text('{"mine": true}')
    code, _, err = run_cli(env.argv(TRAIN, tmp_path), capsys)
    assert code == 2 and "already holds a trained model (config.json)" in err, err
    assert "--overwrite" in err and (users / "config.json").read_text() == '{"mine": true}'
    assert run_cli(env.argv(TRAIN + " --overwrite", tmp_path), capsys)[0] == 0
    trained = json.loads((users / "config.json").read_text())
    assert trained["method"] == "mean-centering"
    code, _, err = run_cli(env.argv(TRAIN, tmp_path), capsys)  # a second run, same --out
    assert code == 2 and "already holds a trained model" in err
    assert json.loads((users / "config.json").read_text()) == trained


@pytest.mark.parametrize("template, option", [
    (TRAIN, "--out"),
    ("bench --encoders hash:8 --methods baseline --tasks sts17 --no-floor --out {out}/m",
     "--out"),
    ("tune --encoder hash:8 --methods lir --out {out}/m", "--out"),
    ("scale --encoder hash:8 --out {out}/m", "--out"),
    ("analyse --methods baseline --encoder hash:8 --tasks sts17 --analyses significance "
     "--out {out}/m", "--out"),
    ("mine {s} {t} --out {out}/x.tsv --encoder hash:8 --run-dir {out}/m", "--run-dir"),
    ("search {s} {t} --out {out}/x.tsv --encoder hash:8 --run-dir {out}/m", "--run-dir"),
    ("calibrate {a} --model {model} --language fr --out {out}/m", "--out"),
], ids=["train", "bench", "tune", "scale", "analyse", "mine", "search", "calibrate"])
def test_every_verb_that_writes_a_folder_refuses_a_users_folder(template, option, env,
                                                                tmp_path, capsys):
    users = tmp_path / "m"
    users.mkdir()
    (users / "thesis.tex").write_text("mine")
    code, _, err = run_cli(env.argv(template, tmp_path), capsys)
    assert code == 2, err
    assert f"{option} {users} is a folder disembed did not write (it holds thesis.tex" in err
    assert sorted(p.name for p in users.iterdir()) == ["thesis.tex"]


def test_a_folder_a_verb_wrote_is_its_own_on_the_next_run(env, tmp_path, capsys):
    argv = env.argv("bench --encoders hash:8 --methods baseline --tasks sts17 --no-floor "
                    "--out {out}/b", tmp_path)
    assert run_cli(argv, capsys)[0] == 0
    assert (tmp_path / "b" / ".disembed.lock").is_file()
    assert run_cli(argv, capsys)[0] == 0  # reused, not refused
    mine = env.argv("mine {s} {t} --out {out}/x.tsv --encoder hash:8", tmp_path)
    assert run_cli(mine, capsys)[0] == 0 and run_cli(mine, capsys)[0] == 0


def test_calibrate_out_refuses_an_existing_model_without_overwrite(env, tmp_path, capsys):
    argv = env.argv("calibrate {a} --model {model} --language fr --out {out}/c", tmp_path)
    assert run_cli(argv, capsys)[0] == 0
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and "already holds a trained model" in err
    assert run_cli(argv + ["--overwrite"], capsys)[0] == 0


def test_two_trains_into_one_folder_take_turns(env, tmp_path):
    """The parent holds --out's lock (as a first train would): a second train waits, or with
    a timeout fails clearly before writing anything."""
    from disembed.util.locks import folder_lock

    out = tmp_path / "m"
    with folder_lock(out):
        done = run_disembed(env.argv(TRAIN, tmp_path), tmp_path / "child",
                            env={"DISEMBED_CACHE_DIR": env.paths["cache"],
                                 "DISEMBED_LOCK_TIMEOUT": "0.2"})
    assert done.code == 2, done.stderr
    assert "still in use by another disembed process after 0.2 s" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [".disembed.lock"]


# --- found by the issue-33 probe of new cases ------------------------------------------------

def test_encode_refuses_a_sentences_file_that_is_a_pipe_before_waiting_on_it(env, tmp_path):
    """``e.txt`` a FIFO: encode opened it (waiting forever for a reader) only to refuse it at
    the commit; both files of the pair are checked before either is opened."""
    os.mkfifo(tmp_path / "e.txt")
    done = run_disembed(env.argv("encode {a} --out {out}/e.npy --encoder hash:8", tmp_path),
                        tmp_path / "child", env={"DISEMBED_CACHE_DIR": env.paths["cache"]},
                        timeout=60)
    assert done.code == 2 and "which is a pipe or a device" in done.stderr, done.stderr
    with pytest.raises(ConfigError, match="renamed together as one step"):
        AtomicFile(tmp_path / "e.txt", stream=False)
    assert not (tmp_path / "e.npy").exists()


def test_two_calibrations_of_one_model_take_turns(env, tmp_path):
    """Each read the model, added its language and saved what it had read: run together,
    one language was lost. Calibrate holds the model folder's lock from read to write."""
    import shutil

    from disembed.util.locks import folder_lock

    model = tmp_path / "m"
    shutil.copytree(env["model"], model)
    with folder_lock(model):
        done = run_disembed(env.argv(f"calibrate {{a}} --model {model} --language fr",
                                     tmp_path), tmp_path / "child",
                            env={"DISEMBED_CACHE_DIR": env.paths["cache"],
                                 "DISEMBED_LOCK_TIMEOUT": "0.2"})
    assert done.code == 2 and "still in use by another disembed process" in done.stderr
    assert json.loads((model / "config.json").read_text()) == \
        json.loads((env["model"] / "config.json").read_text())
