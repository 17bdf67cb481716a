"""Strict readers for UTF-8 TSV and line-aligned text files.

Every problem is an error that names the file and the 1-based line: undecodable
bytes, ragged rows, missing columns, empty sentences, mismatched line counts.
With ``skip_bad=True`` bad rows are skipped instead and counted in the returned
:class:`ReadReport`, never silently.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..exceptions import DataError
from ..util.text import bare_carriage_return, is_blank

logger = logging.getLogger(__name__)


@dataclass
class ReadReport:
    """What a reader kept and skipped (with the first few reasons)."""

    path: str
    kept: int = 0
    skipped: int = 0
    reasons: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped += 1
        if len(self.reasons) < 5:
            self.reasons.append(reason)


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32LE"), (b"\x00\x00\xfe\xff", "UTF-32BE"),
         (b"\xff\xfe", "UTF-16LE"), (b"\xfe\xff", "UTF-16BE"))


def sniff_wide_encoding(head: bytes) -> str | None:
    """``"UTF-16LE"``, ``"UTF-16BE"``, ``"UTF-32LE"`` or ``"UTF-32BE"`` when the first bytes
    of a file (a few KB) are text in that encoding (with or without a byte-order mark),
    else ``None``. Without a mark: NUL bytes, which UTF-8 text does not hold, in the places
    a wide encoding of mostly ASCII text puts them."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name[:6]  # iconv reads the mark and drops it: -f UTF-16 / UTF-32
    n = len(head) // 4 * 4
    if n < 4 or head.count(0) < n // 4:
        return None
    cols = [head[i:n:4].count(0) / (n // 4) for i in range(4)]
    if cols[1] > 0.9 and cols[2] > 0.9 and cols[3] > 0.9:
        return "UTF-32LE"
    if cols[0] > 0.9 and cols[1] > 0.9 and cols[2] > 0.9:
        return "UTF-32BE"
    even, odd = (cols[0] + cols[2]) / 2, (cols[1] + cols[3]) / 2
    if odd > 0.6 and even < 0.2:
        return "UTF-16LE"
    if even > 0.6 and odd < 0.2:
        return "UTF-16BE"
    return None


def _iconv_hint(data: bytes) -> str:
    """The ``iconv -f`` for bytes that are not UTF-8: UTF-16 text without NULs (CJK) when it
    decodes as such into printable lines, else the common LATIN1."""
    for name in ("UTF-16LE", "UTF-16BE"):
        if len(data) % 2:
            continue
        try:
            text = data.decode(name.lower().replace("utf-16", "utf-16-"))
        except UnicodeDecodeError:
            continue
        if text and sum(ch.isprintable() or ch in "\r\n\t" for ch in text) > 0.98 * len(text):
            return name
    return "LATIN1"


def check_utf8_file(path: str | Path, head: bytes | None = None) -> None:
    """Refuse a file in UTF-16/32 (with or without a byte-order mark) with the ``iconv``
    that converts it; disembed reads UTF-8."""
    if head is None:
        with open(path, "rb") as f:
            head = f.read(4096)
    wide = sniff_wide_encoding(head)
    if wide:
        raise DataError(f"{path} is {wide} text, not UTF-8; convert it first: "
                        f"iconv -f {wide} -t UTF-8 {path} > {Path(path).stem}.utf8"
                        f"{Path(path).suffix}")


def _read_lines(path: Path) -> list[str]:
    data = Path(path).read_bytes()
    check_utf8_file(path, data[:4096])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line}: bytes {data[exc.start:exc.end]!r} are not valid UTF-8; "
            f"re-encode the file as UTF-8 (e.g. iconv -f {_iconv_hint(data[:65536])} -t UTF-8)"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    _check_line_ends(path, text)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _check_line_ends(path: Path, text: str) -> None:
    """Lines end in LF or CRLF; a carriage return (CR) anywhere else is an error naming its
    line (a CR-only file, classic Mac OS, would otherwise be read as one long sentence)."""
    at = bare_carriage_return(text)
    if at < 0:
        return
    line = text.count("\n", 0, at) + 1
    if "\n" not in text:
        raise DataError(f"{path} ends its lines with a carriage return (CR) only (classic Mac "
                        "OS), so it would be read as one line; disembed reads LF or CRLF line "
                        f"ends: convert it first, e.g. tr '\\r' '\\n' < {path} > "
                        f"{Path(path).stem}.lf{Path(path).suffix}")
    raise DataError(f"{path}:{line}: a carriage return (CR) inside the line (lines end in LF "
                    "or CRLF); remove it or make it a line end, e.g. tr '\\r' '\\n' for a file "
                    "of CR line ends")


def read_tsv(
    path: str | Path,
    columns: Sequence[str],
    *,
    skip_bad: bool = False,
    required_nonempty: Sequence[str] | None = None,
) -> tuple[list[dict[str, str]], ReadReport]:
    """Read a TSV with a header row (no quoting) and return the named columns.

    Args:
        path: the file.
        columns: header names to return; a missing one is an error listing the header.
        skip_bad: skip ragged rows and empty required cells (counted) instead of raising.
        required_nonempty: columns whose cells must hold non-whitespace text
            (default: all of ``columns``).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    lines = _read_lines(path)
    if not lines:
        raise DataError(f"{path}: the file is empty; expected a header row naming {list(columns)}")
    header = lines[0].split("\t")
    missing = [c for c in columns if c not in header]
    if missing:
        raise DataError(
            f"{path}:1: header has no column(s) {missing}; header is {header}. "
            "Name the columns that hold the sentences."
        )
    index = {c: header.index(c) for c in columns}
    required = list(required_nonempty if required_nonempty is not None else columns)
    report = ReadReport(str(path))
    rows: list[dict[str, str]] = []
    for lineno, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        problem = None
        if len(cells) != len(header):
            problem = f"{path}:{lineno}: has {len(cells)} fields, the header has {len(header)}"
        else:
            empty = [c for c in required if is_blank(cells[index[c]])]
            if empty:
                problem = f"{path}:{lineno}: empty sentence in column(s) {empty}"
        if problem:
            if not skip_bad:
                raise DataError(problem + "; fix the row or pass skip_bad=True / --skip-bad-lines")
            report.skip(problem)
            continue
        rows.append({c: cells[i] for c, i in index.items()})
    report.kept = len(rows)
    if report.skipped:
        logger.warning("%s: skipped %d bad row(s), e.g. %s", path, report.skipped,
                       report.reasons[0])
    return rows, report


def read_aligned(
    source: str | Path, target: str | Path, *, skip_bad: bool = False
) -> tuple[list[str], list[str], ReadReport]:
    """Read two line-aligned files; unequal line counts are always an error."""
    src, tgt = _read_lines(Path(source)), _read_lines(Path(target))
    if len(src) != len(tgt):
        raise DataError(
            f"{source} has {len(src)} lines but {target} has {len(tgt)}; line-aligned files "
            "must have equal line counts (line i of one translates line i of the other)"
        )
    report = ReadReport(f"{source} + {target}")
    keep_src, keep_tgt = [], []
    for lineno, (s, t) in enumerate(zip(src, tgt, strict=True), start=1):
        if is_blank(s) or is_blank(t):
            which = source if is_blank(s) else target
            problem = f"{which}:{lineno}: empty sentence"
            if not skip_bad:
                raise DataError(problem + "; fix the line or pass skip_bad=True / --skip-bad-lines")
            report.skip(problem)
            continue
        keep_src.append(s)
        keep_tgt.append(t)
    report.kept = len(keep_src)
    return keep_src, keep_tgt, report


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 file (errors name the line of any bad byte)."""
    return _read_lines(Path(path))
