"""Property tests of the strict readers: any bytes in -> a result or a DataError naming the
file, never another exception, and every result keeps the readers' promises."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from strategies import bounded, text_file, tsv_file

from disembed.data.io import read_aligned, read_lines, read_tsv
from disembed.exceptions import DataError

SETTINGS = bounded(150)
_DIR = Path(tempfile.mkdtemp(prefix="disembed-readers-"))


def _file(name: str, data: bytes) -> Path:
    path = _DIR / name
    path.write_bytes(data)
    return path


@SETTINGS
@given(text_file())
def test_read_lines(data):
    path = _file("lines.txt", data)
    try:
        lines = read_lines(path)
    except DataError as exc:
        assert str(path) in str(exc)
        return
    text = data.decode("utf-8").removeprefix("\ufeff")  # accepted, so it is UTF-8
    assert len(lines) == text.count("\n") + (not text.endswith("\n") and text != "")
    for line, raw in zip(lines, text.split("\n"), strict=False):  # one CR of CRLF goes
        assert "\n" not in line and line in (raw, raw.removesuffix("\r"))


@SETTINGS
@given(tsv_file(), st.booleans(), st.sampled_from([["a", "b"], ["a"], ["b", "a"]]))
def test_read_tsv(data, skip_bad, columns):
    path = _file("table.tsv", data)
    try:
        rows, report = read_tsv(path, columns, skip_bad=skip_bad)
    except DataError as exc:
        assert str(path) in str(exc)
        return
    assert report.kept == len(rows)
    for row in rows:
        assert list(row) == columns
        assert all(cell.strip() and "\t" not in cell and "\n" not in cell
                   for cell in row.values())
    if not skip_bad:
        assert report.skipped == 0


@SETTINGS
@given(text_file(), text_file(), st.booleans())
def test_read_aligned(src, tgt, skip_bad):
    a, b = _file("a.txt", src), _file("b.txt", tgt)
    try:
        left, right, report = read_aligned(a, b, skip_bad=skip_bad)
    except DataError as exc:
        assert str(a) in str(exc) or str(b) in str(exc)
        return
    assert len(left) == len(right) == report.kept
    assert all(s.strip() and t.strip() for s, t in zip(left, right, strict=True))
