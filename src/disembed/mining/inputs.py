"""Several input files per side, plain or gzip, gathered into one indexed file.

:class:`~.collection.Collection` reads sentences back by byte offset, which a gzip stream
cannot do and which needs one file. :func:`gather_inputs` therefore returns a single file
unchanged (the common case) and otherwise streams every file (``.gz`` decompressed) into
``<run_dir>/<side>.input.tsv`` as ``id<TAB>sentence`` lines, written atomically: the ids
are the files' own (``tsv``) or ``<file name>:<line>`` (``text``), so a mined pair still
names the file and line it came from. The gathered file is rewritten on every run (a
streaming copy, cheap beside encoding); its content hash is what resumes the embeddings,
so unchanged inputs resume and changed ones start over.
"""

from __future__ import annotations

import glob
import gzip
import logging
from pathlib import Path
from typing import Sequence

from ..exceptions import DataError
from ..util.files import AtomicFile
from .collection import _detect_bytes, _parse

logger = logging.getLogger(__name__)


def expand_inputs(spec: str | Path | Sequence[str | Path]) -> list[Path]:
    """Paths from a path, a comma-separated list, shell globs (``'de-*.txt.gz'``) or a
    sequence of those, in the order given (each glob sorted); an entry that matches no file
    is an error naming it. A name that is an existing file is that file, read literally
    (``data[1].txt`` is not the glob matching ``data1.txt``, ``a,b.txt`` is not two files),
    as every other verb reads its inputs."""
    items = [spec] if isinstance(spec, (str, Path)) else list(spec)
    paths: list[Path] = []
    for item in items:
        if Path(item).is_file():
            paths.append(Path(item))
            continue
        for part in str(item).split(",") if isinstance(item, str) else [str(item)]:
            if Path(part).is_file():
                paths.append(Path(part))
                continue
            if not part:
                continue
            if any(ch in part for ch in "*?["):
                found = sorted(glob.glob(part))
                if not found:
                    raise DataError(f"{part}: no file matches this pattern; check the path")
                paths.extend(Path(p) for p in found)
            else:
                paths.append(Path(part))
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path}: no such file; check the path")
    if not paths:
        raise DataError(f"no input file in {spec!r}")
    return paths


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def gather_inputs(spec: str | Path | Sequence[str | Path], run_dir: str | Path, side: str,
                  format: str = "auto", skip_bad: bool = False) -> tuple[Path, str]:
    """One file holding every sentence of ``spec`` and its format (see module docstring).
    A ``text`` line that its ``id<TAB>`` prefix would make malformed (it holds a tab or a
    carriage return) is an error naming its file and line, or skipped with ``skip_bad``."""
    paths = expand_inputs(spec)
    if len(paths) == 1 and paths[0].suffix != ".gz":
        return paths[0], format
    out = Path(run_dir) / f"{side}.input.tsv"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = 0
    with AtomicFile(out) as dst:
        for path in paths:
            try:
                lines += _copy(path, dst, format, skip_bad)
            except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
                raise DataError(f"{path}: cannot be read as gzip ({exc}); is it a complete "
                                ".gz file?" if path.suffix == ".gz" else
                                f"{path}: cannot be read ({exc})") from None
    logger.info("gathered %d lines of %d file(s) into %s", lines, len(paths), out)
    return out, "tsv"


def _copy(path: Path, dst: AtomicFile, format: str, skip_bad: bool = False) -> int:
    """Append ``path``'s lines to ``dst`` as ``id<TAB>sentence``; returns the line count."""
    lines = 0
    with _open(path) as src:
        first = src.readline()
        fmt = _detect_bytes(first) if format == "auto" else format
        name = path.name.removesuffix(".gz")
        for lineno, raw in enumerate(_chain(first, src), start=1):
            raw = raw.rstrip(b"\n").removesuffix(b"\r")
            if fmt == "text":
                if b"\t" in raw or b"\r" in raw:
                    try:
                        _parse(raw, "text", f"{path}:{lineno}")
                    except DataError as exc:
                        if not skip_bad:
                            raise DataError(f"{exc}; fix the line or pass --skip-bad-lines"
                                            ) from None
                        logger.warning("skipped %s", exc)
                        continue
                raw = f"{name}:{lineno}\t".encode() + raw
            dst.write(raw + b"\n")
            lines += 1
    return lines


def _chain(first: bytes, rest):
    if first:
        yield first
    yield from rest
