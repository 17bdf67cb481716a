"""Filter a bitext: stream it in chunks, score each, keep the pairs that pass.

:func:`filter_bitext` reads the input (:func:`~disembed.data.bitext.read_bitext`: a TSV
with or without a header, two line-aligned files, ``.gz``, ``-``) one chunk at a time,
scores each chunk (:class:`~.scoring.PairScorer`: rules, both sides' languages, the
calibrated meaning score) and writes its rows to a part file of the run folder, then
writes the two outputs from the parts:

* ``out``: the kept pairs, ``src<TAB>tgt`` per line, in input order (no header);
* ``scores_out``: every pair, with the header ``line score cosine src_lang tgt_lang
  reason src tgt``: the input line, the calibrated score, the meaning cosine, the language
  each side was identified as, and the reason it was dropped (empty when kept).

A pair is kept when no rule drops it and its score is at least the threshold; with
``keep_top`` (a fraction of all pairs) the threshold is also raised to the score of the
last of the best ``keep_top`` share (ties at that score kept).

**Memory.** One chunk (its texts and vectors) at a time, plus, for ``keep_top``, one float
per pair.

**Resuming.** Each part is written under a temporary name and renamed when whole
(:func:`~disembed.util.files.atomic_write_bytes`), so after a crash (``kill -9``) every part
present is complete; the run folder's ``manifest.json`` records the input's content hash
and everything that changes a score (encoder, model, settings), and a run that finds a
matching manifest scores only the missing chunks. A chunk's rows depend only on the chunk,
so the outputs of a resumed run are byte for byte those of an uninterrupted one. A short
last chunk (under half ``chunk_size``) is scored with the chunk before it, so no pair's
margin is taken among a handful of neighbours.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..data.bitext import BitextChunk, read_bitext
from ..exceptions import ConfigError, DataError
from ..methods.base import config_digest
from ..util.files import AtomicFile, atomic_write_bytes, atomic_write_text, sha256_file
from .cluster import score_chunk_task
from .rules import LOW_MEANING, RuleConfig
from .scoring import ChunkScores, PairScorer, majority_language
from .thresholds import DEFAULT_THRESHOLD

logger = logging.getLogger(__name__)

SCORES_HEADER = "line\tscore\tcosine\tsrc_lang\ttgt_lang\treason\tsrc\ttgt\n"


@dataclass(frozen=True)
class FilterConfig:
    """How pairs are read and judged. ``threshold``: the score cutoff (``None``: the
    default, :data:`~.thresholds.DEFAULT_THRESHOLD`); ``keep_top``: keep at most this
    fraction of all pairs (module docstring); ``src_lang``/``tgt_lang``: the expected
    languages (``None``: the languages most of the first chunk's sides are identified as);
    ``header``/``src_col``/``tgt_col``/``skip_bad``: how the input is read
    (:func:`~disembed.data.bitext.read_bitext`)."""

    threshold: float | None = None
    keep_top: float | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    chunk_size: int = 10000
    k: int = 4
    rules: RuleConfig = field(default_factory=RuleConfig)
    header: str = "auto"
    src_col: str = "src"
    tgt_col: str = "tgt"
    skip_bad: bool = False

    def __post_init__(self) -> None:
        if self.keep_top is not None and not 0.0 < self.keep_top <= 1.0:
            raise ConfigError(f"keep_top is a fraction of the pairs in (0, 1], e.g. 0.6; got "
                              f"{self.keep_top}")
        if self.threshold is not None and not np.isfinite(self.threshold):
            raise ConfigError(f"threshold must be a finite number, got {self.threshold}")
        if self.chunk_size < 2 or self.k < 1:
            raise ConfigError(f"chunk_size must be at least 2 and k at least 1, got "
                              f"{self.chunk_size} and {self.k}")

    @property
    def cutoff(self) -> float:
        return DEFAULT_THRESHOLD if self.threshold is None else self.threshold


@dataclass
class FilterReport:
    """What a run did: ``pairs`` read, ``kept``, ``reasons`` (count per drop reason), the
    ``threshold`` applied, the expected ``languages`` and how many chunks were ``resumed``
    (found done) and ``scored``."""

    pairs: int = 0
    kept: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    threshold: float = DEFAULT_THRESHOLD
    languages: tuple[str | None, str | None] = (None, None)
    resumed: int = 0
    scored: int = 0


def merged_tail(chunks: Iterator[BitextChunk], chunk_size: int) -> Iterator[BitextChunk]:
    """``chunks`` with a last chunk under half ``chunk_size`` joined to the one before (only
    the last chunk of :func:`~disembed.data.bitext.read_bitext` can be short)."""
    previous = None
    for chunk in chunks:
        if previous is not None and len(chunk) < chunk_size // 2:
            previous.lines += chunk.lines
            previous.src += chunk.src
            previous.tgt += chunk.tgt
            break
        if previous is not None:
            yield previous
        previous = chunk
    if previous is not None:
        yield previous


def _fingerprint(inputs: Sequence[str | Path]) -> list[str] | None:
    if any(str(p) == "-" for p in inputs):
        return None  # standard input is read once: nothing to resume from
    return [sha256_file(p) for p in inputs]


def _manifest(scorer: PairScorer, config: FilterConfig, inputs: Sequence[str | Path]) -> dict:
    encoder = getattr(scorer.encoder, "identity", None)
    model = scorer.model
    return {"inputs": _fingerprint(inputs), "config": asdict(config),
            "encoder": encoder.to_dict() if encoder is not None else scorer.encoder.name,
            "model": None if model is None else {"name": model.name,
                                                 "params": model.get_params(),
                                                 "state": _state_digest(model)},
            "check": getattr(scorer.check, "name", None)}


def _state_digest(model) -> str:
    state, learned = model.saved_state()
    h = hashlib.sha256(json.dumps(learned, sort_keys=True, default=str).encode())
    for key in sorted(state):
        h.update(key.encode())
        h.update(np.ascontiguousarray(state[key]).tobytes())
    return h.hexdigest()[:16]


def _open_run(run_dir: Path, manifest: dict) -> dict:
    """The run folder's manifest: the one found if it matches ``manifest`` (resume), else
    ``manifest`` written into a cleared folder."""
    path = run_dir / "manifest.json"
    digest = config_digest(manifest)
    if path.is_file() and manifest["inputs"] is not None:
        found = json.loads(path.read_text(encoding="utf-8"))
        if found.get("digest") == digest:
            return found
        logger.info("%s: the input or settings changed since the last run; starting over",
                    run_dir)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    found = {**manifest, "digest": digest, "languages": None}
    atomic_write_text(path, json.dumps(found, indent=1, default=str))
    return found


def _part_rows(chunk: BitextChunk, s: ChunkScores) -> list[bytes]:
    return [(f"{line}\t{s.score[i]:.6f}\t{s.cosine[i]:.6f}\t{s.src_code[i]}\t"
             f"{s.tgt_code[i]}\t{s.reason[i]}\t{chunk.src[i]}\t{chunk.tgt[i]}\n"
             ).encode("utf-8") for i, line in enumerate(chunk.lines)]


def _languages(found: dict, run_dir: Path, scores: ChunkScores, config: FilterConfig
               ) -> tuple[str | None, str | None]:
    if found.get("languages") is not None:
        return tuple(found["languages"])
    langs = (config.src_lang or majority_language(scores.src_code.tolist()),
             config.tgt_lang or majority_language(scores.tgt_code.tolist()))
    if not (config.src_lang and config.tgt_lang):
        logger.info("expected languages (most of the first chunk): source %s, target %s; "
                    "name them with src_lang/tgt_lang to fix them", *langs)
    found["languages"] = list(langs)
    atomic_write_text(run_dir / "manifest.json", json.dumps(found, indent=1, default=str))
    return langs


def score_parts(inputs: Sequence[str | Path], scorer: PairScorer, config: FilterConfig,
                run_dir: Path, report: FilterReport, cluster: tuple | None = None
                ) -> list[Path]:
    """Score every chunk not already in ``run_dir``; the part files, in input order.
    ``cluster``: ``(executor, spec, window)`` to score the chunks as tasks
    (:mod:`.cluster`); the first chunk of a run that must infer the expected languages is
    scored here."""
    found = _open_run(run_dir, _manifest(scorer, config, inputs))
    parts, pending = [], []
    chunks = read_bitext(inputs, header=config.header, src_col=config.src_col,
                         tgt_col=config.tgt_col, chunk_size=config.chunk_size,
                         skip_bad=config.skip_bad)
    for chunk in merged_tail(chunks, config.chunk_size):
        part = run_dir / f"part-{chunk.index:08d}.tsv"
        parts.append(part)
        report.pairs += len(chunk)
        if part.is_file() and found.get("languages") is not None:
            report.resumed += 1
            continue
        report.scored += 1
        if cluster is not None and found.get("languages") is not None:
            executor, spec, window = cluster
            pending.append(executor.submit(score_chunk_task, spec, chunk,
                                           tuple(found["languages"]), str(part), _part_rows))
            if len(pending) >= window:
                executor.gather(pending, lambda: None)
                pending = []
            continue
        scores = scorer.score(chunk.src, chunk.tgt)
        langs = _languages(found, run_dir, scores, config)
        if scorer.check is not None:
            scores = scorer.judge(scores, chunk.src, chunk.tgt, *langs)
        atomic_write_bytes(part, _part_rows(chunk, scores))
    if pending:
        cluster[0].gather(pending, lambda: None)
    report.languages = tuple(found.get("languages") or (None, None))
    return parts


def _rows(parts: list[Path]) -> Iterator[list[str]]:
    for part in parts:
        with open(part, encoding="utf-8", newline="\n") as f:
            for line in f:
                yield line.rstrip("\n").split("\t", 7)


def _top_cutoff(parts: list[Path], fraction: float, pairs: int) -> float:
    scores = np.array([float(r[1]) for r in _rows(parts) if not r[5]], np.float64)
    keep = int(np.floor(fraction * pairs))
    if keep <= 0 or not len(scores):
        return np.inf
    return float(np.sort(scores)[::-1][min(keep, len(scores)) - 1])


def write_outputs(parts: list[Path], out: str | Path, scores_out: str | Path | None,
                  threshold: float, report: FilterReport) -> None:
    """The kept pairs and the scores file from the parts (module docstring)."""
    reasons: Counter = Counter()
    with AtomicFile(out) as kept, (AtomicFile(scores_out) if scores_out else _Null()) as sc:
        sc.write(SCORES_HEADER.encode())
        for row in _rows(parts):
            if not row[5] and float(row[1]) < threshold:
                row[5] = LOW_MEANING
            if row[5]:
                reasons[row[5]] += 1
            else:
                kept.write(f"{row[6]}\t{row[7]}\n".encode("utf-8"))
                report.kept += 1
            sc.write(("\t".join(row) + "\n").encode("utf-8"))
    report.reasons = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def write(self, data: bytes) -> None:
        pass


def filter_bitext(inputs: str | Path | Sequence[str | Path], out: str | Path, scorer: PairScorer,
                  config: FilterConfig = FilterConfig(), *, scores_out: str | Path | None = None,
                  run_dir: str | Path | None = None, executor=None, spec=None,
                  window: int = 8) -> FilterReport:
    """Filter the bitext ``inputs`` into ``out`` (kept pairs) and ``scores_out`` (every
    pair's scores and reason); see the module docstring. ``run_dir`` (default
    ``<out>.run``) holds the parts a killed run resumes from. ``executor`` (an executor of
    :mod:`disembed.mining.distributed`) with ``spec`` (a :class:`~.cluster.ScorerSpec` that
    rebuilds ``scorer`` on a worker): the chunks are scored as tasks, at most ``window`` in
    flight (:mod:`.cluster`); the outputs are the same bytes."""
    if executor is not None and spec is None:
        raise ConfigError("scoring on a cluster needs the spec its workers rebuild the "
                          "scorer from (spec=ScorerSpec(model=..., ...))")
    names = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    run_dir = Path(run_dir) if run_dir else Path(f"{out}.run")
    report = FilterReport()
    cluster = None if executor is None else (executor, spec, max(int(window), 1))
    parts = score_parts(names, scorer, config, run_dir, report, cluster)
    if not report.pairs:
        raise DataError(f"{', '.join(map(str, names))}: no pairs to filter; give one pair per "
                        "line (a TSV, or two line-aligned files)")
    threshold = config.cutoff
    if config.keep_top is not None:
        threshold = max(threshold if config.threshold is not None else -np.inf,
                        _top_cutoff(parts, config.keep_top, report.pairs))
    report.threshold = float(threshold)
    write_outputs(parts, out, scores_out, threshold, report)
    logger.info("kept %d of %d pairs (threshold %.4f); dropped: %s", report.kept, report.pairs,
                threshold, report.reasons)
    return report
