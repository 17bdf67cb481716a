"""Large sentence files read by line offset, never held in memory whole.

A collection is a UTF-8 file with one sentence per line (``text``) or
``id<TAB>sentence`` per line (``tsv``; ``auto`` picks ``tsv`` when the first line
has a tab). Indexing scans the file once, hashes its bytes (blake2b: the key for
resuming an embedding) and keeps, per kept line, its byte offset and 1-based line
number: ``(n,) int64`` each, 16 bytes a line (16 MB for a million lines). Sentences
and ids are read back on demand, in chunks for encoding and by row for the mined
pairs. Bad lines (undecodable bytes, empty sentences, a missing tab) are errors
naming file and line, or with ``skip_bad=True`` skipped and counted.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal, Sequence

import numpy as np

from ..data.io import ReadReport, check_utf8_file
from ..exceptions import ConfigError, DataError
from ..util.text import is_blank

logger = logging.getLogger(__name__)

Format = Literal["auto", "text", "tsv"]


def _detect(path: Path) -> str:
    with open(path, "rb") as f:
        return _detect_bytes(f.readline())


def _detect_bytes(first_line: bytes) -> str:
    """``tsv`` when the first line has a tab, else ``text``."""
    return "tsv" if b"\t" in first_line else "text"


def _parse(raw: bytes, fmt: str, where: str) -> tuple[str, str]:
    """``(id, sentence)`` of one raw line (without its newline); raises DataError."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{where}: bytes are not valid UTF-8; re-encode the file as UTF-8 "
                        "(e.g. iconv -f LATIN1 -t UTF-8)") from None
    line = line.removesuffix("\r").lstrip("\ufeff")
    if "\r" in line:  # a CR-only file is one such "line": never one long sentence
        raise DataError(f"{where}: a carriage return (CR) inside the line (lines end in LF "
                        "or CRLF; a file of CR-only line ends, classic Mac OS, converts with "
                        "tr '\\r' '\\n')")
    if fmt == "tsv":
        ident, tab, text = line.partition("\t")
        if not tab:
            raise DataError(f"{where}: no tab; expected 'id<TAB>sentence' "
                            "(or pass format='text' / --input-format text)")
        if "\t" in text:  # it would come back as a malformed row of the output TSV
            raise DataError(f"{where}: {line.count(chr(9)) + 1} tab-separated fields; expected "
                            "two, 'id<TAB>sentence' (keep two columns, e.g. cut -f1,2, or "
                            "pass --skip-bad-lines to skip such lines)")
    else:
        ident, text = "", line
        if "\t" in text:  # it would come back as extra fields of the output TSV
            raise DataError(f"{where}: holds a tab, but the file is read as one sentence per "
                            "line (its first line has no tab, or --format text); if it is "
                            "'id<TAB>sentence', pass --format tsv, else remove the tabs")
    if is_blank(text):
        raise DataError(f"{where}: empty sentence (or only invisible characters)")
    return ident, text


@dataclass
class Collection:
    """An indexed sentence file. Build it with :meth:`open`."""

    path: Path
    format: str
    offsets: np.ndarray  # (n,) int64 byte offset of each kept line
    lines: np.ndarray  # (n,) int64 1-based line number of each kept line
    report: ReadReport = field(default_factory=lambda: ReadReport(""))
    digest: str = ""  # blake2b of the file's bytes when indexed (the resume key)

    @classmethod
    def open(cls, path: str | Path, format: Format = "auto", skip_bad: bool = False
             ) -> "Collection":
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: no such file")
        if format not in ("auto", "text", "tsv"):
            raise ConfigError(f"format must be auto, text or tsv, got {format!r}")
        check_utf8_file(path)  # UTF-16/32: refused with the right iconv, never embedded
        fmt = _detect(path) if format == "auto" else format
        offsets, lines, report = [], [], ReadReport(str(path))
        content = hashlib.blake2b(digest_size=16)
        with open(path, "rb") as f:
            pos = 0
            for lineno, raw in enumerate(f, start=1):
                content.update(raw)
                try:
                    _parse(raw.rstrip(b"\n"), fmt, f"{path}:{lineno}")
                except DataError as exc:
                    if not skip_bad:
                        raise DataError(f"{exc}; fix the line or pass skip_bad=True / "
                                        "--skip-bad-lines") from None
                    report.skip(str(exc))
                else:
                    offsets.append(pos)
                    lines.append(lineno)
                pos += len(raw)
        report.kept = len(offsets)
        if report.skipped:
            logger.warning("%s: skipped %d bad line(s), e.g. %s", path, report.skipped,
                           report.reasons[0])
        return cls(path, fmt, np.asarray(offsets, dtype=np.int64),
                   np.asarray(lines, dtype=np.int64), report, content.hexdigest())

    def __len__(self) -> int:
        return len(self.offsets)

    def rows(self, rows: Sequence[int]) -> list[tuple[str, str]]:
        """``(id, sentence)`` of each row; the id of a ``text`` line is its line number."""
        out = []
        with open(self.path, "rb") as f:
            for r in rows:
                f.seek(int(self.offsets[r]))
                ident, text = _parse(f.readline().rstrip(b"\n"), self.format, str(self.path))
                out.append((ident or str(int(self.lines[r])), text))
        return out

    def chunks(self, size: int, start: int = 0) -> Iterator[tuple[int, list[str]]]:
        """``(first_row, sentences)`` for consecutive chunks of ``size`` rows from ``start``."""
        with open(self.path, "rb") as f:
            for r0 in range(start, len(self), size):
                rows = range(r0, min(r0 + size, len(self)))
                f.seek(int(self.offsets[r0]))
                texts = []
                for r in rows:
                    f.seek(int(self.offsets[r]))
                    texts.append(_parse(f.readline().rstrip(b"\n"), self.format, "")[1])
                yield r0, texts

    def fingerprint(self) -> dict:
        """What identifies the file's content for resuming: a hash of its bytes (taken while
        indexing, so an edit that keeps size and modification time is still seen), the
        kept rows and the format."""
        return {"blake2b": self.digest, "rows": len(self), "format": self.format,
                "skipped": self.report.skipped}
