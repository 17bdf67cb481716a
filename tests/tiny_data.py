"""A tiny data directory in the real layout (shared by the tests' conftest files)."""

TATOEBA = {
    # code: (source lines, english lines)
    "deu": (["Hallo.", "Danke.", "Ja.", "Nein.", "Gut."],) * 2,
    "cmn": (["你好。", "谢谢。", "是。", "不。"], ["你好。", "谢谢。", "Yes.", "No."]),
    "nld": (["Hoi.", "Dank.", "Ja!"], ["Hoi.", "Dank.", "Ja!"]),
}
STS_ROWS = [
    ("A man plays.", "Ein Mann spielt.", 4.0),
    ("A dog runs.", "Ein Hund rennt.", 3.5),
    ("It rains.", "Es regnet.", 1.0),
    ("A cat sleeps.", "Eine Katze schläft.", 0.5),
    ("Cars are fast.", "Autos sind schnell.", 2.2),
    ("I read books.", "Ich lese Bücher.", 5.0),
]
QE_ROWS = [
    ("The house is red.", "Das Haus ist rot.", 0.8),
    ("It is late.", "Es ist spät.", -0.3),
    ("We eat now.", "Wir essen jetzt.", 1.1),
    ("Open the door.", "Öffne die Tür.", -1.5),
    ("She sings.", "Sie singt.", 0.2),
]


def _write_sts(path, rows):
    lines = ["sentence1\tsentence2\tscore"] + [f"{a}\t{b}\t{s}" for a, b, s in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_qe(path, rows, wmt21=False):
    if wmt21:
        lines = ["index\toriginal\ttranslation\tz_mean"]
        lines += [f"{i}\t{a}\t{b}\t{z}" for i, (a, b, z) in enumerate(rows)]
    else:
        lines = ["index\toriginal\ttranslation\tscores\tmean\tz_scores\tz_mean\tmodel_scores"]
        lines += [f"{i}\t{a}\t{b}\t[1, 2]\t1.5\t[0.1, 0.2]\t{z}\t-0.3"
                  for i, (a, b, z) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_tiny_data(tmp_path):
    """Tatoeba, STS17 and WMT20 QE in their real layout, a few rows each, under tmp_path."""
    tat = tmp_path / "tatoeba"
    tat.mkdir()
    for code, (src, eng) in TATOEBA.items():
        (tat / f"tatoeba.{code}-eng.{code}").write_text("\n".join(src) + "\n", encoding="utf-8")
        (tat / f"tatoeba.{code}-eng.eng").write_text("\n".join(eng) + "\n", encoding="utf-8")
    sts = tmp_path / "sts17"
    sts.mkdir()
    _write_sts(sts / "en-de.tsv", STS_ROWS)
    _write_sts(sts / "en-en.tsv", [(a, a if s > 3 else b, s) for a, b, s in STS_ROWS])
    for split in ("test", "test21", "dev"):
        (tmp_path / "wmt20_mlqe" / split).mkdir(parents=True)
    _write_qe(tmp_path / "wmt20_mlqe" / "test" / "en-de.tsv", QE_ROWS)
    _write_qe(tmp_path / "wmt20_mlqe" / "test" / "ru-en.tsv", [(b, a, z) for a, b, z in QE_ROWS])
    _write_qe(tmp_path / "wmt20_mlqe" / "test21" / "en-cs.tsv", QE_ROWS[:4], wmt21=True)
    _write_qe(tmp_path / "wmt20_mlqe" / "dev" / "en-de.tsv",
              [(a, b, -z) for a, b, z in QE_ROWS])  # the validation split of tune
    return tmp_path


PARALLEL_DE = [(f"Satz Nummer {i} ist hier.", f"Sentence number {i} is here.") for i in range(40)]
PARALLEL_ZH = [(f"第{i}句话在这里。", f"Line {i} is right here.") for i in range(40)]


def add_full_data(data_dir):
    """Add all ten STS17 tracks and de-en, zh-en training pairs to a tiny data directory."""
    folder = data_dir / "parallel" / "wmt_newstest"
    folder.mkdir(parents=True)
    for lang, rows in (("de", PARALLEL_DE), ("zh", PARALLEL_ZH)):
        lines = [f"testset\ten\t{lang}"] + [f"nt\t{en}\t{x}" for x, en in rows]
        (folder / f"en-{lang}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    sts = data_dir / "sts17"
    for track in ("en-ar", "en-tr", "es-en", "fr-en", "it-en", "nl-en", "ar-ar", "es-es"):
        (sts / f"{track}.tsv").write_text((sts / "en-de.tsv").read_text(encoding="utf-8"),
                                          encoding="utf-8")
    return data_dir
