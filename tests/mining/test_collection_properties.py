"""Property tests of mining's sentence files: any bytes in -> a Collection or a DataError;
every kept row reads back, chunks agree with rows, and the content hash follows the bytes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from strategies import bounded, text_file

from disembed.exceptions import DataError
from disembed.mining import Collection

SETTINGS = bounded(150)
_DIR = Path(tempfile.mkdtemp(prefix="disembed-collection-"))


@SETTINGS
@given(text_file(), st.sampled_from(["auto", "text", "tsv"]), st.booleans())
def test_any_bytes_open_or_fail_clearly(data, fmt, skip_bad):
    path = _DIR / "sentences.txt"
    path.write_bytes(data)
    try:
        col = Collection.open(path, fmt, skip_bad)
    except DataError as exc:
        assert str(path) in str(exc)
        return
    rows = col.rows(range(len(col)))
    assert len(rows) == len(col) == col.report.kept
    assert all(text.strip() and ident for ident, text in rows)
    assert [t for _, chunk in col.chunks(3) for t in chunk] == [t for _, t in rows]
    assert list(col.lines) == sorted(set(col.lines.tolist()))
    again = Collection.open(path, fmt, skip_bad)
    assert again.fingerprint() == col.fingerprint()
    path.write_bytes(data + b"x\n")
    try:
        assert Collection.open(path, fmt, True).digest != col.digest
    except DataError:
        pass
