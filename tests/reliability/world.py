"""A small world of good and bad files for the reliability tests, and a CLI runner."""

import json
import shutil
from pathlib import Path

import numpy as np
from tiny_data import add_full_data, write_tiny_data

LINES = ["hello", "world", "foo bar", "baz", "qux"]
SRC = [f"s{i}\tSatz {i}" for i in range(12)]
TGT = [f"t{i}\tSatz {i}" for i in range(4, 16)]


class World:
    """Paths by name (``w["a"]``) for argv templates such as ``"encode {a} --out {out}/e.npy"``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, str] = {}

    def __getitem__(self, name: str) -> Path:
        return Path(self.paths[name])

    def add(self, name: str, path: Path) -> Path:
        self.paths[name] = str(path)
        return path

    def text(self, name: str, content: str | bytes) -> Path:
        path = self.root / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return self.add(name.split(".")[0], path)

    def argv(self, template: str, out: Path) -> list[str]:
        return template.format(**self.paths, out=out).split()


def _npy_pair(world: World, name: str, matrix, lines=LINES) -> None:
    path = world.root / "in" / f"{name}.npy"
    np.save(path, matrix, allow_pickle=True)
    (world.root / "in" / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    world.add(name, path)


def build_world(root: Path) -> World:
    from disembed.cli import main

    w = World(root)
    w.add("data", add_full_data(write_tiny_data(_mkdir(root / "data"))))
    w.add("cache", _mkdir(root / "cache"))
    w.text("a.txt", "\n".join(LINES) + "\n")
    w.text("words.txt", "x\n\ny\r\n")
    w.text("empty.txt", "")
    w.text("badutf8.txt", b"ab\xff\xfe\n")
    w.text("s.tsv", "\n".join(SRC) + "\n")
    w.text("t.tsv", "\n".join(TGT) + "\n")
    w.text("pairs.tsv", "de\ten\n" + "".join(f"Satz {i}\tSentence {i}\n" for i in range(30)))
    w.text("st.tsv", "src\ttgt\n" + "".join(f"Satz {i}\tSentence {i}\n" for i in range(6)))
    w.text("garbage.npy", bytes(range(256)) * 2)
    (root / "in" / "garbage.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    _npy_pair(w, "objects", np.array([object()] * 5))
    _npy_pair(w, "cube", np.zeros((5, 2, 2), np.float32))
    _npy_pair(w, "short", np.zeros((3, 4), np.float32))
    w.add("wordsnpy", root / "in" / "words.npy")
    w.add("afile", w["a"])
    w.add("adir", _mkdir(root / "in" / "adir"))
    w.add("missing", root / "in" / "no-such-file.txt")
    w.add("nodir", root / "in" / "no-such-dir")
    code = main(["train", "--method", "mean-centering", "--encoder", "hash:16", "--pairs",
                 str(w["pairs"]), "--src-col", "de", "--tgt-col", "en", "--out",
                 str(root / "model"), "--cache-dir", str(w["cache"]), "--data-dir",
                 str(w["data"]), "-q"])
    assert code == 0
    w.add("model", root / "model")
    flipped = w.add("flipped", root / "flipped")
    shutil.copytree(root / "model", flipped)
    blob = bytearray((flipped / "model.safetensors").read_bytes())
    blob[-3] ^= 0x40
    (flipped / "model.safetensors").write_bytes(bytes(blob))
    assert json.loads((root / "model" / "config.json").read_text())["weights_sha256"]
    _issue_22_files(w, root)
    _issue_33_files(w)
    return w


def _issue_33_files(w: World) -> None:
    """The files of issue 33's cases (text at the reading edge)."""
    w.text("cronly.txt", "eins\rzwei\rdrei\r")
    w.text("strayCR.txt", "eins\nzw\rei\ndrei\n")
    w.text("zerowidth.txt", "eins\n\u200b\u200d\nzwei\n")
    w.text("zwtsv.tsv", "s1\tSatz eins\ns2\t\u2060\ufeff\n")
    w.text("texttab.txt", "erste Zeile ohne Tab\nzweite\tZeile\tmit Tabs\n")


def _issue_22_files(w: World, root: Path) -> None:
    """The files of issue 22's cases."""
    reordered = w.add("reordered", root / "reordered")
    shutil.copytree(root / "model", reordered)
    config = json.loads((reordered / "config.json").read_text())
    config["learned"]["languages"] = config["learned"]["languages"][::-1]
    (reordered / "config.json").write_text(json.dumps(config))
    w.add("root", root)
    users = w.add("userdir", _mkdir(root / "in" / "userdir"))
    (users / "thesis.tex").write_text("mine", encoding="utf-8")
    text = "\n".join(LINES) + "\n"
    w.text("u16.txt", text.encode("utf-16-le"))
    w.text("u16bom.txt", text.encode("utf-16"))
    w.text("tabs.tsv", "s1\tSatz eins\tmehr\ns2\tSatz zwei\n")
    w.text("hdr.tsv", "de\ten\n")
    w.text("badrows.tsv", "de\ten\n\tx\ny\t\n")
    w.text("hdrst.tsv", "src\ttgt\n")
    w.text("sedp.json", '{"sed": {"lr": 0.1}}')
    w.text("fastp.json", '{"seed": {"lr": "fast"}}')
    w.text("lirp.json", '{"lir": {"rank": -3}}')


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """``disembed.cli.main(argv)`` -> ``(exit code, stdout, stderr)``; argparse exits too."""
    from disembed.cli import main

    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
