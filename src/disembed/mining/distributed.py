"""Mining on a cluster: shard, encode in parallel, k-NN per shard pair, merge on the driver.

Steps (each a task; the driver holds only k-NN lists and candidates):

1. Gather the inputs (several files, gzip: :mod:`.inputs`) and shard both collections into
   row ranges of ``shard_rows``.
2. ``encode_shard``: each task reads its rows (by byte offset), encodes them through the
   embedding cache (a rerun, or a task retried after its worker died, encodes nothing
   twice), optionally applies a saved disentangler's meaning view (an untagged sentence
   routed by its script, as :func:`.mine.mine_files` does), L2-normalises and
   writes ``<run_dir>/<side>-<key>-<i>.npy`` atomically. The key hashes the input's bytes,
   the encoder, the view and the row range: a shard already there is reused (the run
   resumes by shard), a changed input gets new shards.
3. Search (:mod:`.shard_search`), by the backend
   :func:`~disembed.retrieval.search.resolve_backend` picks for ``n x m`` (``auto``: exact
   up to 200k x 200k, approximate above; on a cluster this is not measured per run as on
   one machine, :mod:`~disembed.retrieval.auto`): exact, one task per shard pair, both
   directions from one pass of products; approximate, one IVF index per shard.
4. The driver merges the partial lists of each row (top-k of the union, indices shifted
   to global rows) and computes margins and candidates as the single-process path does:
   with the exact backend the mined pairs equal :func:`.mine.mine_files`'s.

:func:`mine_embeddings_distributed` runs steps 3 and 4 on embeddings computed elsewhere
(``.npy`` files, GPU nodes for instance): ``slice_shard`` tasks cut them into unit-row
shards in the run folder (resumable the same way), and the mined pairs equal
:func:`.mine.mine_embeddings`'s on the normalised rows.

Tasks run on an executor: :class:`RayExecutor` (``connect("local:4")``, ``"auto"``,
``"ray://host:10001"``) or :class:`InProcess` (the same steps in this process: tests,
and a machine without Ray). Ray re-runs a task whose worker died (``max_retries``); every
task writes its output atomically and is idempotent, so a retried task gives the same
bytes. One progress bar counts the tasks done over the whole job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..data.languages import normalize_tag
from ..encoders import load_encoder
from ..encoders.cached import cached
from ..exceptions import ConfigError, DataError, NonFiniteError, require
from ..methods.text_path import meaning_of_texts
from ..retrieval.knn import normalize_rows
from ..retrieval.margin import candidates, select
from ..saved_model import SavedModel
from ..util.files import sha256_file
from ..util.locks import folder_lock
from .collection import Collection, _parse
from .embed import collection_distinct
from .inputs import gather_inputs
from .mine import MineConfig, Mined, open_collection
from .shard_search import (  # noqa: F401  (knn_pair, merge_lists: the tasks' public names)
    ShardJob,
    job_bar,
    knn_pair,
    merge_lists,
    save_npy,
    search_shards,
    shard_ranges,
)

logger = logging.getLogger(__name__)

_LOCAL = re.compile(r"^local(?::(\d+))?$")


class InProcess:
    """Runs every task at once in this process (same steps, no cluster)."""

    def submit(self, fn: Callable, *args) -> Any:
        return fn(*args)

    def gather(self, handles: list, on_done: Callable[[], None]) -> list:
        for _ in handles:
            on_done()
        return list(handles)


class RayExecutor:
    """Tasks on a Ray cluster; a task whose worker dies is run again (``max_retries``)."""

    def __init__(self, ray, max_retries: int = 3) -> None:
        self.ray, self.max_retries, self._remote = ray, max_retries, {}

    def submit(self, fn: Callable, *args) -> Any:
        if fn not in self._remote:
            self._remote[fn] = self.ray.remote(max_retries=self.max_retries)(fn)
        return self._remote[fn].remote(*args)

    def gather(self, handles: list, on_done: Callable[[], None]) -> list:
        pending = list(handles)
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            for _ in done:
                on_done()
        return self.ray.get(list(handles))


def connect(address: str) -> RayExecutor:
    """A :class:`RayExecutor` on ``address``: ``local`` (a local cluster with one worker slot
    per CPU), ``local:N`` (N worker slots), ``auto`` (the cluster this node belongs to),
    ``ray://host:port`` or ``host:port``."""
    ray = require("ray", "ray", "mining on a cluster (--cluster)")
    match = _LOCAL.match(address)
    if not (match or address == "auto" or address.startswith("ray://")
            or re.match(r"^[\w.-]+:\d+$", address)):
        raise ConfigError(f"cluster address {address!r} not understood; expected local, "
                          "local:N, auto, ray://host:port or host:port")
    if ray.is_initialized():
        logger.warning("Ray is already running in this process: its cluster is used, not "
                       "%s (call ray.shutdown() first to connect elsewhere)", address)
        return RayExecutor(ray)
    if match:
        cpus = int(match.group(1) or os.cpu_count() or 1)
        if cpus < 1:
            raise ConfigError(f"local:N needs N >= 1 worker slots, got {address!r}")
        ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
    else:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    return RayExecutor(ray)


# --------------------------------------------------------------------------- tasks


def encode_shard(path: str, fmt: str, offsets: np.ndarray, encoder: dict, out: str,
                 model_dir: str | None = None, language: str | None = None,
                 batch_size: int = 64) -> str:
    """Encode the lines at ``offsets`` of ``path`` into ``out`` (``(rows, d) float32`` .npy);
    ``encoder``: ``{"spec", "options", "cache_dir", "cache_dtype"}``."""
    if Path(out).exists():
        return out
    with open(path, "rb") as f:
        texts = []
        for off in offsets.tolist():
            f.seek(off)
            texts.append(_parse(f.readline().rstrip(b"\n"), fmt, path)[1])
    enc = cached(load_encoder(encoder["spec"], **encoder.get("options", {})),
                 encoder.get("cache_dir"), encoder.get("cache_dtype", "float32"))
    X = enc.encode(texts, batch_size=batch_size)
    if model_dir:  # the texts are here: an untagged one is routed by its script, as locally
        X = meaning_of_texts(SavedModel.load(model_dir).disentangler, X, texts, language)
    save_npy(out, normalize_rows(X))
    return out


# --------------------------------------------------------------------------- driver


def _shard_key(col: Collection, encoder: dict, model_dir, language, shard_rows: int) -> str:
    h = hashlib.blake2b(digest_size=6)
    model = _model_digest(model_dir)
    h.update(json.dumps([col.fingerprint(), encoder["spec"], encoder.get("options", {}),
                         encoder.get("cache_dtype"), model,
                         # untagged: routed by script (a shard from before that is not reused)
                         language or ("script" if model_dir else None), shard_rows]
                        + ["distinct"],  # shards of every line (before issue 48): not reused
                        sort_keys=True, default=str).encode())
    return h.hexdigest()


def _model_digest(model_dir) -> str | None:
    if not model_dir:
        return None
    h = hashlib.blake2b(digest_size=8)
    for p in sorted(Path(model_dir).rglob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def mine_distributed(src, tgt, encoder_spec: str, *, run_dir: str | Path,
                     config: MineConfig | None = None, shard_rows: int = 100_000,
                     cache_dir: str | None = None, cache_dtype: str = "float32",
                     encoder_options: dict | None = None, model_dir: str | None = None,
                     src_lang: str | None = None, tgt_lang: str | None = None,
                     format: str = "auto", skip_bad: bool = False, batch_size: int = 64,
                     executor=None, address: str | None = None
                     ) -> tuple[Mined, Collection, Collection]:
    """Mine ``src`` x ``tgt`` (files, lists or globs, plain or gzip) with tasks on
    ``executor`` (default: :func:`connect` to ``address``, else ``local``). Returns the
    pairs and both collections (for :func:`~.mine.write_pairs`)."""
    if shard_rows < 1:
        raise ConfigError(f"shard_rows must be >= 1, got {shard_rows}")
    cfg = config or MineConfig()
    executor = executor or connect(address or "local")
    run_dir = Path(run_dir)
    encoder = {"spec": encoder_spec, "options": encoder_options or {}, "cache_dir": cache_dir,
               "cache_dtype": cache_dtype}
    t0 = time.perf_counter()
    with folder_lock(run_dir), job_bar() as bar:
        job = ShardJob(executor, run_dir, bar)
        cols, paths, firsts = [], [], []
        for side, spec, lang in (("src", src, normalize_tag(src_lang)),
                                 ("tgt", tgt, normalize_tag(tgt_lang))):
            col = open_collection(*gather_inputs(spec, run_dir, side, format, skip_bad), skip_bad,
                                  "source" if side == "src" else "target")
            # each distinct sentence is encoded and searched once (its first line's offset)
            firsts.append(collection_distinct(col).first)
            offsets = col.offsets[firsts[-1]]
            key = _shard_key(col, encoder, model_dir, lang, shard_rows)
            calls = [(str(col.path), col.format, offsets[a:b], encoder,
                      str(run_dir / f"{side}-{key}-{i:05d}.npy"), model_dir, lang, batch_size)
                     for i, (a, b) in enumerate(shard_ranges(len(offsets), shard_rows))]
            cols.append(col)
            paths.append(job.run(encode_shard, calls))
        embed_s = time.perf_counter() - t0
        mined = _search_and_score(job, tuple(paths), len(firsts[0]), len(firsts[1]),
                                  shard_rows, cfg, t0, {"embed": embed_s})
    # pairs name the first line of each text, as mine_files' do
    mined.src, mined.tgt = firsts[0][mined.src], firsts[1][mined.tgt]
    return mined, cols[0], cols[1]


def _search_and_score(job: ShardJob, paths, n: int, m: int, shard_rows: int,
                      cfg: MineConfig, t0: float, seconds: dict[str, float]) -> Mined:
    """Steps 3 and 4: the sharded search, then margins, candidates and the kept pairs."""
    k = min(cfg.k, n, m)
    t_search = time.perf_counter()
    lists, backend = search_shards(job, paths, n, m, shard_rows, k, cfg.backend,
                                   cfg.backend_options)
    t1 = time.perf_counter()
    score, s, t = candidates(*lists, mode=cfg.mode, kind=cfg.margin)
    keep = select(score, threshold=cfg.threshold, top=cfg.top)
    seconds = {**seconds, "knn": t1 - t_search, "margin": time.perf_counter() - t1}
    logger.info("cluster mining: %d x %d, %s, %d pairs kept in %.1fs", n, m, backend,
                int(keep.sum()), time.perf_counter() - t0)
    return Mined(score[keep], s[keep], t[keep], seconds, k=k, backend=backend)


# --------------------------------------------------------------------------- embeddings


def slice_shard(path: str, start: int, stop: int, out: str) -> str:
    """Rows ``start:stop`` of the ``.npy`` matrix at ``path``, L2-normalised, into ``out``."""
    if Path(out).exists():
        return out
    rows = np.asarray(np.load(path, mmap_mode="r")[start:stop], dtype=np.float32)
    finite = np.isfinite(rows).all(axis=1)
    if not finite.all():  # a NaN similarity is never a neighbour: pairs would silently vanish
        raise NonFiniteError(f"{path} row {start + int(np.argmin(finite))} holds NaN or "
                             "infinite values; every embedding must be finite: drop or "
                             "re-encode those rows")
    save_npy(out, normalize_rows(rows))
    return out


def _embedding_shape(path: Path, side: str) -> tuple[int, int]:
    """``(n, d)`` of a 2-d float ``.npy`` matrix, or a :class:`DataError` naming the file."""
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"the {side} embeddings must be the path of a .npy file (every "
                          f"worker reads it), got a {type(path).__name__}; save an array "
                          "with numpy.save, or mine it in this process with mine_embeddings")
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{side} embeddings {path}: no such file; expected an (n, d) .npy "
                        "matrix on storage every worker can read")
    try:
        M = np.load(path, mmap_mode="r")  # noqa: N806
    except (ValueError, OSError) as exc:
        raise DataError(f"{side} embeddings {path}: not a readable .npy file ({exc}); write "
                        "it with numpy.save") from exc
    if M.ndim != 2 or M.shape[0] < 1 or not np.issubdtype(M.dtype, np.floating):
        raise DataError(f"{side} embeddings {path}: shape {M.shape}, dtype {M.dtype}; expected "
                        "a non-empty (n, d) matrix of floats, one row per sentence")
    return int(M.shape[0]), int(M.shape[1])


def mine_embeddings_distributed(x: str | Path, y: str | Path, *, run_dir: str | Path,
                                config: MineConfig | None = None, shard_rows: int = 100_000,
                                executor=None, address: str | None = None) -> Mined:
    """Mine embeddings computed elsewhere: ``x (n, d)`` sources and ``y (m, d)`` targets as
    ``.npy`` files every worker can read, searched as shard tasks on ``executor`` (default:
    :func:`connect` to ``address``, else ``local``). Rows are L2-normalised; the pairs (row
    indices) equal :func:`.mine.mine_embeddings`'s on the normalised rows with the exact
    backend. Shards go to ``run_dir`` under a key of the file's bytes and ``shard_rows``: a
    rerun reuses them, a changed file gets new ones."""
    if shard_rows < 1:
        raise ConfigError(f"shard_rows must be >= 1, got {shard_rows}")
    (n, d), (m, d_y) = _embedding_shape(x, "source"), _embedding_shape(y, "target")
    if d != d_y:
        raise DataError(f"source embeddings have {d} dimensions and target embeddings {d_y}; "
                        "both sides must come from the same encoder (and view)")
    cfg = config or MineConfig()
    executor = executor or connect(address or "local")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with folder_lock(run_dir), job_bar() as bar:
        job = ShardJob(executor, run_dir, bar)
        paths = []
        for side, path, rows in (("src", Path(x), n), ("tgt", Path(y), m)):
            key = hashlib.blake2b(json.dumps([sha256_file(path, length=32), shard_rows])
                                  .encode(), digest_size=6).hexdigest()
            calls = [(str(path), a, b, str(run_dir / f"{side}-emb-{key}-{i:05d}.npy"))
                     for i, (a, b) in enumerate(shard_ranges(rows, shard_rows))]
            paths.append(job.run(slice_shard, calls))
        seconds = {"shard": time.perf_counter() - t0}
        return _search_and_score(job, tuple(paths), n, m, shard_rows, cfg, t0, seconds)
