"""Encoding and mining distributed on Ray: shard, encode in parallel, k-NN per shard pair, merge.

Steps (each a Ray task; the driver holds only k-NN lists and candidates):

1. Shard both collections into row ranges of ``shard_rows``.
2. ``encode_shard``: each task reads its rows (by byte offset), encodes them with an
   encoder built from its spec (through the embedding cache, so a rerun or a second
   task on the same text encodes nothing), optionally applies a saved disentangler's
   meaning view, L2-normalises and writes ``<run_dir>/<side>-<i>.npy`` atomically.
   A shard file already present is reused: an interrupted run resumes by shard.
3. ``knn_pair``: for every (source shard, target shard) pair, the exact k-NN of both
   sides against each other (:func:`.knn.knn_both`, one pass of products).
4. The driver merges the partial lists of each row (top-k over the union, indices
   shifted to global rows) and computes margins and candidates as the single-process
   path does, so the result equals :func:`.mine.mine_embeddings` up to ties.

On a real cluster: start Ray on the nodes (``ray start --head`` on one,
``ray start --address=HEAD:6379`` on the others), put the inputs, ``run_dir`` and the
cache on a filesystem every node mounts (NFS, Lustre, a FUSE-mounted bucket), and call
:func:`mine_distributed` with ``address="auto"`` from a driver on the head node.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np

from ..encoders import load_encoder
from ..encoders.cached import cached
from ..exceptions import require
from ..retrieval.knn import knn_both, normalize_rows
from ..retrieval.margin import candidates, select
from ..saved_model import SavedModel
from ..util.files import atomic_write_bytes
from .collection import Collection, _parse
from .mine import MineConfig, Mined

logger = logging.getLogger(__name__)


def _ray():
    return require("ray", "ray", "distributed mining")


def encode_shard(path: str, fmt: str, offsets: np.ndarray, encoder_spec: str,
                 cache_dir: str | None, out: str, model_dir: str | None = None,
                 language: str | None = None, batch_size: int = 64) -> str:
    """Encode the lines at ``offsets`` of ``path`` into ``out`` (``(rows, d) float32`` .npy)."""
    if Path(out).exists():
        return out
    with open(path, "rb") as f:
        texts = []
        for off in offsets.tolist():
            f.seek(off)
            texts.append(_parse(f.readline().rstrip(b"\n"), fmt, path)[1])
    X = cached(load_encoder(encoder_spec), cache_dir).encode(texts, batch_size=batch_size)
    if model_dir:
        X = SavedModel.load(model_dir).disentangler.meaning(X, language)
    buf = io.BytesIO()
    np.save(buf, normalize_rows(X))
    atomic_write_bytes(Path(out), [buf.getvalue()])
    return out


def knn_pair(x_path: str, y_path: str, k: int) -> tuple[np.ndarray, ...]:
    """k-NN lists of one shard pair (local row indices)."""
    x, y = np.load(x_path, mmap_mode="r"), np.load(y_path, mmap_mode="r")
    return knn_both(x, y, min(k, len(x), len(y)))


def merge_lists(parts: list[tuple[np.ndarray, np.ndarray, int]], k: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Merge partial lists ``(D (n, k_i), I (n, k_i), index offset)`` of the same rows."""
    D = np.concatenate([p[0] for p in parts], axis=1)
    I = np.concatenate([p[1] + p[2] for p in parts], axis=1)  # noqa: E741
    order = np.argsort(-D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, order, 1), np.take_along_axis(I, order, 1)


def _shards(n: int, rows: int) -> list[tuple[int, int]]:
    return [(r, min(r + rows, n)) for r in range(0, n, rows)] or [(0, 0)]


def mine_distributed(src: str | Path, tgt: str | Path, encoder_spec: str, *,
                     run_dir: str | Path, config: MineConfig | None = None,
                     shard_rows: int = 100_000, cache_dir: str | None = None,
                     model_dir: str | None = None, src_lang: str | None = None,
                     tgt_lang: str | None = None, format: str = "auto",
                     address: str | None = None) -> tuple[Mined, Collection, Collection]:
    """Mine ``src`` x ``tgt`` on Ray (connects to ``address``, or uses the running
    instance, or starts a local one). Returns the pairs and both collections."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
    cfg = config or MineConfig()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    enc_task = ray.remote(encode_shard)
    cols, paths = [], []
    for side, path, lang in (("src", src, src_lang), ("tgt", tgt, tgt_lang)):
        col = Collection.open(path, format)
        refs = [enc_task.remote(str(col.path), col.format, col.offsets[a:b], encoder_spec,
                                cache_dir, str(run_dir / f"{side}-{i:05d}.npy"), model_dir, lang)
                for i, (a, b) in enumerate(_shards(len(col), shard_rows))]
        cols.append(col)
        paths.append(ray.get(refs))
    k = min(cfg.k, len(cols[0]), len(cols[1]))
    lists = _sharded_knn(ray, paths[0], paths[1], _shards(len(cols[0]), shard_rows),
                         _shards(len(cols[1]), shard_rows), k)
    score, s, t = candidates(*lists, mode=cfg.mode, kind=cfg.margin)
    keep = select(score, threshold=cfg.threshold, top=cfg.top)
    return Mined(score[keep], s[keep], t[keep]), cols[0], cols[1]


def _sharded_knn(ray, x_paths, y_paths, x_rows, y_rows, k):
    task = ray.remote(knn_pair)
    refs = {(i, j): task.remote(xp, yp, k) for i, xp in enumerate(x_paths)
            for j, yp in enumerate(y_paths)}
    done = {key: ray.get(ref) for key, ref in refs.items()}
    fwd = [merge_lists([(done[i, j][0], done[i, j][1], y_rows[j][0])
                        for j in range(len(y_paths))], k) for i in range(len(x_paths))]
    bwd = [merge_lists([(done[i, j][2], done[i, j][3], x_rows[i][0])
                        for i in range(len(x_paths))], k) for j in range(len(y_paths))]
    return (np.concatenate([f[0] for f in fwd]), np.concatenate([f[1] for f in fwd]),
            np.concatenate([b[0] for b in bwd]), np.concatenate([b[1] for b in bwd]))
