"""One streaming reader of bitexts, in every form a crawl arrives in.

``read_bitext(inputs)`` yields :class:`BitextChunk` s of at most ``chunk_size`` pairs, in
file order, holding one chunk in memory:

* one file: a TSV, with a header row naming the two sentence columns or without one
  (``header="auto"``: a header when its first row holds both column names; a column given
  as a number, ``"1"``, is the 1-based column of a file without a header);
* two files, line-aligned (line i of the first translates line i of the second); files of
  different lengths are an error naming the file and the first line without a partner;
* any of them gzip-compressed (recognised by its first bytes, so also on standard input),
  and ``-`` for standard input.

Every pair keeps its input line number (1-based, counting a header row), so what a job
writes about a pair points back to its line. A line that is not UTF-8, and a TSV row too
short for the columns, is an error naming its file and line (``skip_bad``: skipped and
logged); UTF-16/32 text is refused with the ``iconv`` that converts it, and a UTF-8
byte-order mark is dropped.
"""

from __future__ import annotations

import gzip
import io
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, Sequence

from ..exceptions import ConfigError, DataError
from .io import sniff_wide_encoding

logger = logging.getLogger(__name__)

HEADERS = ("auto", "yes", "no")
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class BitextChunk:
    """Pairs ``start .. start + len - 1`` of a bitext: ``lines`` (the 1-based input line of
    each pair), ``src`` and ``tgt``; ``index`` is the chunk's number from 0. With
    ``keep_rows``: ``rows``, every column of each pair's TSV row (``[src, tgt]`` for two
    files), and ``header``, the TSV's header row (``None``: none)."""

    index: int
    start: int
    lines: list[int] = field(default_factory=list)
    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    header: list[str] | None = None

    def __len__(self) -> int:
        return len(self.src)


def _open_binary(name: str | Path) -> IO[bytes]:
    """A binary stream of ``name`` (``-``: standard input), decompressed when gzip."""
    if str(name) == "-":
        raw: IO[bytes] = io.BufferedReader(sys.stdin.buffer.raw) \
            if hasattr(sys.stdin.buffer, "raw") else sys.stdin.buffer
    else:
        path = Path(name)
        if not path.is_file():
            raise DataError(f"{path}: no such file; check the path")
        raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    stream = gzip.GzipFile(fileobj=raw, mode="rb") if head == _GZIP_MAGIC else raw
    return stream if hasattr(stream, "peek") else io.BufferedReader(stream)


def _check_encoding(stream, where: str) -> None:
    """Refuse UTF-16/32 text (naming the iconv that converts it); disembed reads UTF-8."""
    try:
        head = stream.peek(4096)[:4096]
    except (OSError, EOFError) as exc:
        raise DataError(f"{where}: cannot be read ({exc}); is it a complete file?") from None
    wide = sniff_wide_encoding(head)
    if wide:
        raise DataError(f"{where} is {wide} text, not UTF-8; convert it first: "
                        f"iconv -f {wide} -t UTF-8")


def _lines(name: str | Path, skip_bad: bool) -> Iterator[tuple[int, str | None]]:
    """``(line number, text)`` of each line, ``text`` None for a skipped undecodable one."""
    where = "standard input" if str(name) == "-" else str(name)
    stream = _open_binary(name)
    try:
        _check_encoding(stream, where)
        for number, raw in enumerate(stream, start=1):
            raw = raw.rstrip(b"\n").removesuffix(b"\r")
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                msg = (f"{where}:{number}: not UTF-8 ({exc.reason} at byte {exc.start}); "
                       "convert the file (iconv -f LATIN1 -t UTF-8) or skip such lines")
                if not skip_bad:
                    raise DataError(msg) from None
                logger.warning("skipped %s", msg)
                yield number, None
    except (OSError, EOFError) as exc:  # a truncated or corrupt .gz
        raise DataError(f"{where}: cannot be read ({exc}); is it a complete file?") from None
    finally:
        if str(name) != "-":
            stream.close()


def _column(name: str, fields: list[str] | None, where: str, first: list[str]) -> int:
    if name.isdigit():
        if int(name) < 1:
            raise ConfigError(f"column numbers start at 1, got {name}")
        return int(name) - 1
    if fields is None or name not in fields:
        found = (f"no header row: the first row {first} does not hold both column names"
                 if fields is None else f"the header row {fields}")
        raise DataError(f"{where}: no column named {name!r} ({found}); name the sentence "
                        "columns (--src-col/--tgt-col), or give their numbers for a file "
                        "without a header (--src-col 1 --tgt-col 2)")
    return fields.index(name)


def _has_header(first: list[str], header: str, src_col: str, tgt_col: str) -> bool:
    if header != "auto":
        return header == "yes"
    return src_col in first and tgt_col in first


def _tsv_pairs(name: str | Path, header: str, src_col: str, tgt_col: str, skip_bad: bool,
               meta: dict) -> Iterator[tuple[int, str, str, list[str]]]:
    where = "standard input" if str(name) == "-" else str(name)
    lines = _lines(name, skip_bad)
    first = next(lines, None)
    if first is None:
        return
    fields = first[1].split("\t") if first[1] is not None else []
    named = header == "yes" or _has_header(fields, header, src_col, tgt_col)
    if not named and (src_col, tgt_col) == ("src", "tgt"):
        src_col, tgt_col = "1", "2"  # the default names, no header row: the first two
    s = _column(src_col, fields if named else None, where, fields[:8])
    t = _column(tgt_col, fields if named else None, where, fields[:8])
    meta["header"] = fields if named else None
    rows = lines if named else _chain(first, lines)
    for number, text in rows:
        if text is None:
            continue
        cols = text.split("\t")
        if len(cols) <= max(s, t):
            msg = (f"{where}:{number}: {len(cols)} column(s), but the sentences are in "
                   f"columns {s + 1} and {t + 1}; fix the row or skip such lines")
            if not skip_bad:
                raise DataError(msg)
            logger.warning("skipped %s", msg)
            continue
        yield number, cols[s], cols[t], cols


def _chain(first, rest):
    yield first
    yield from rest


def _aligned_pairs(src_name: str | Path, tgt_name: str | Path, skip_bad: bool
                   ) -> Iterator[tuple[int, str, str, list[str]]]:
    if str(src_name) == "-" and str(tgt_name) == "-":
        raise ConfigError("standard input can be only one of the two files")
    a, b = _lines(src_name, skip_bad), _lines(tgt_name, skip_bad)
    while True:  # until one file ends
        x, y = next(a, None), next(b, None)
        if x is None or y is None:
            if x is not None or y is not None:
                short, other = (tgt_name, src_name) if x is not None else (src_name, tgt_name)
                raise DataError(
                    f"{short} has {(x or y)[0] - 1} lines but {other} has more: the two "
                    f"files must be line-aligned (line i of one translates line i of the "
                    f"other); {other}:{(x or y)[0]} has no partner")
            return
        if x[1] is None or y[1] is None:
            continue
        if "\t" in x[1] or "\t" in y[1]:
            bad = src_name if "\t" in x[1] else tgt_name
            msg = (f"{bad}:{x[0]}: a tab inside a "
                   "sentence (a pair is written as one tab-separated row); replace it or "
                   "skip such lines")
            if not skip_bad:
                raise DataError(msg)
            logger.warning("skipped %s", msg)
            continue
        yield x[0], x[1], y[1], [x[1], y[1]]


def read_bitext(inputs: str | Path | Sequence[str | Path], *, header: str = "auto",
                src_col: str = "src", tgt_col: str = "tgt", chunk_size: int = 10000,
                skip_bad: bool = False, keep_rows: bool = False) -> Iterator[BitextChunk]:
    """The pairs of ``inputs`` (one TSV, or two line-aligned files; module docstring) as
    chunks of at most ``chunk_size`` pairs (``keep_rows``: with every column of each row
    and the header row, for a job that writes the input's columns back)."""
    if header not in HEADERS:
        raise ConfigError(f"header must be one of {HEADERS}, got {header!r}")
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be at least 1, got {chunk_size}")
    names = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    meta: dict = {"header": None}
    if len(names) == 1:
        pairs = _tsv_pairs(names[0], header, str(src_col), str(tgt_col), skip_bad, meta)
    elif len(names) == 2:
        pairs = _aligned_pairs(names[0], names[1], skip_bad)
    else:
        raise ConfigError(f"a bitext is one TSV or two line-aligned files, got {len(names)} "
                          "inputs")
    chunk = BitextChunk(0, 0)
    for number, s, t, cols in pairs:
        chunk.lines.append(number)
        chunk.src.append(s)
        chunk.tgt.append(t)
        if keep_rows:
            chunk.rows.append(cols)
            chunk.header = meta["header"]
        if len(chunk) == chunk_size:
            yield chunk
            chunk = BitextChunk(chunk.index + 1, chunk.start + chunk_size)
    if len(chunk):
        yield chunk
