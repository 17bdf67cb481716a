"""Turn downloaded upstream files into the files the loaders read (stdlib only).

A catalog entry says how each data-directory file is built from verified upstream
files ("sources"). Every builder is a pure function ``(spec, sources) -> bytes`` over the
local paths of the sources, so the pinned SHA-256 of its output can be checked before
anything is moved into the data directory. Kinds:

``copy``      the source's bytes as they are
``member``    one member of a tar (gz/bz2) or zip archive, as it is
``columns``   line-aligned text files side by side as a TSV with a header row
              (each cell: tabs -> spaces, surrounding whitespace stripped; optional
              0-based ``index`` column first)
``sts``       SemEval STS: sentence pairs from an input file + gold scores (from a
              separate gold file, or the input's third column), scores written ``%g``;
              an input longer than its gold file keeps its first ``len(gold)`` rows
              (STS 2017 track 6 ships 500 input rows for 250 scored ones)
``bucc-gold`` the BUCC gold id pairs with both sentences looked up in the two pools
              (sentences as they are: no stripping, the pools keep no-break spaces)

A *ref* names the bytes a builder reads: ``{"source": ID}`` (with ``"gunzip": true`` for a
gzipped text file) or ``{"source": ID, "member": "path/in/archive"}``.
"""

from __future__ import annotations

import gzip
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Callable, Mapping

from ..exceptions import DataError

Sources = Mapping[str, Path]  # source id -> local path of the verified download


def read_ref(ref: Mapping[str, Any], sources: Sources) -> bytes:
    """The bytes a ref names (see the module docstring)."""
    path = sources[ref["source"]]
    member = ref.get("member")
    if member is None:
        data = path.read_bytes()
        return gzip.decompress(data) if ref.get("gunzip") else data
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            try:
                return archive.read(member)
            except KeyError:
                raise DataError(f"{path}: the zip archive has no member {member!r}; "
                                "was the right file downloaded?") from None
    with tarfile.open(path, "r:*") as archive:
        try:
            handle = archive.extractfile(member)
        except KeyError:
            handle = None
        if handle is None:
            raise DataError(f"{path}: the tar archive has no file member {member!r}; "
                            "was the right file downloaded?")
        return handle.read()


def _lines(ref: Mapping[str, Any], sources: Sources) -> list[str]:
    text = read_ref(ref, sources).decode("utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _cell(text: str) -> str:
    return text.replace("\t", " ").strip()


def _tsv(header: list[str], rows: list[list[str]]) -> bytes:
    return "".join("\t".join(r) + "\n" for r in [header, *rows]).encode("utf-8")


def build_copy(spec: Mapping[str, Any], sources: Sources) -> bytes:
    return sources[spec["source"]].read_bytes()


def build_member(spec: Mapping[str, Any], sources: Sources) -> bytes:
    return read_ref(spec, sources)


def build_columns(spec: Mapping[str, Any], sources: Sources) -> bytes:
    columns = [_lines(ref, sources) for ref in spec["columns"]]
    lengths = {len(c) for c in columns}
    if len(lengths) != 1:
        raise DataError(f"columns {spec['header']}: the line-aligned files have "
                        f"{[len(c) for c in columns]} lines; expected equal counts")
    rows = [[_cell(x) for x in row] for row in zip(*columns, strict=True)]
    header = list(spec["header"])
    if spec.get("index"):
        rows = [[str(i), *row] for i, row in enumerate(rows)]
    return _tsv(header, rows)


def build_sts(spec: Mapping[str, Any], sources: Sources) -> bytes:
    pairs = [line.split("\t") for line in _lines(spec["input"], sources)]
    if spec.get("gold"):
        scores = _lines(spec["gold"], sources)
    else:
        scores = [p[2] if len(p) > 2 else "" for p in pairs]
    if len(pairs) < len(scores) or any(len(p) < 2 for p in pairs):
        raise DataError(f"STS input {spec['input']}: {len(pairs)} rows for {len(scores)} "
                        "scores, or a row without two tab-separated sentences")
    try:
        rows = [[a.strip(), b.strip(), f"{float(s):g}"]
                for (a, b, *_), s in zip(pairs[: len(scores)], scores, strict=True)]
    except ValueError as exc:
        raise DataError(f"STS gold scores of {spec['input']}: {exc}") from None
    return _tsv(["sentence1", "sentence2", "score"], rows)


def build_bucc_gold(spec: Mapping[str, Any], sources: Sources) -> bytes:
    def pool(ref) -> dict[str, str]:
        return dict(line.split("\t", 1) for line in _lines(ref, sources))

    src, tgt = pool(spec["src"]), pool(spec["tgt"])
    rows = []
    for line in _lines(spec["gold"], sources):
        a, b = line.split("\t")
        if a not in src or b not in tgt:
            raise DataError(f"BUCC gold pair {a}-{b} is missing from the sentence pools")
        rows.append([a, b, src[a].replace("\t", " "), tgt[b].replace("\t", " ")])
    return _tsv(list(spec["header"]), rows)


BUILDERS: dict[str, Callable[[Mapping[str, Any], Sources], bytes]] = {
    "copy": build_copy, "member": build_member, "columns": build_columns, "sts": build_sts,
    "bucc-gold": build_bucc_gold,
}


def refs_of(spec: Mapping[str, Any]) -> set[str]:
    """Source ids a build spec reads."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            if "source" in node:
                found.add(node["source"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return found


def build(spec: Mapping[str, Any], sources: Sources) -> bytes:
    """The bytes of one output file from its build spec."""
    kind = spec.get("kind")
    if kind not in BUILDERS:
        raise DataError(f"unknown build kind {kind!r}; expected one of {sorted(BUILDERS)}")
    return BUILDERS[kind](spec, sources)
