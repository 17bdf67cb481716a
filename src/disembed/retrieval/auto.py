"""``auto``: the approximate path only where it is measured cheaper than the exact one.

Below :data:`~.search.EXACT_UP_TO` products ``auto`` searches exactly without measuring
(building and calibrating an index costs more than the whole exact search there). Above
it, the first direction's index is built and calibrated as ``approx`` would (train, fill,
choose ``nprobe`` for the recall target on a sample of queries); the calibration times the
sample's search both through the index and exactly, on this machine, with this data. The
two whole runs are projected from those rates, the index builds and calibrations included:

* exact: one pass of products serves both directions, so ``n x`` (exact seconds per query);
* approximate: ``n x`` (approximate seconds per query) for the first direction (its index
  is already built), plus a second build and calibration (taken as long as the first)
  and ``m x`` the same per-query cost for the way back.

The cheaper one runs; the index already built is used when ``approx`` wins and dropped
when ``exact`` does (the log says what was measured either way). Real sentence
embeddings differ a lot here: at 1M x 1M use-m3 a 0.98 recall needs 18-40% of the cells,
and the exact path wins (docs/mining.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from .approximate import (
    ApproximateOptions,
    Calibration,
    approximate_knn,
    choose_nprobe,
    fill_index,
    search_index,
    train_index,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Projection:
    """Projected seconds of the whole search on each path, from measured rates."""

    exact: float
    approximate: float

    @property
    def approximate_wins(self) -> bool:
        return self.approximate < self.exact


def project(n: int, m: int, cal: Calibration, build_seconds: float,
            calibrate_seconds: float) -> Projection:
    """Whole-run seconds of exact (one pass, both ways) and approximate search of ``n`` x
    ``m`` rows, from the calibration's timed sample (``cal.queries`` queries of the ``n``
    side) and the first index's measured build and calibration."""
    per_query_exact = cal.exact_seconds / cal.queries
    per_query_approx = cal.approx_seconds / cal.queries
    approximate = (n * per_query_approx + build_seconds + calibrate_seconds
                   + m * per_query_approx)
    return Projection(exact=n * per_query_exact, approximate=approximate)


def measured_both(x: np.ndarray, y: np.ndarray, k: int, options: ApproximateOptions,
                  exact_both) -> tuple[tuple[np.ndarray, ...], str]:
    """k-NN lists both ways by whichever path the measurement projects cheaper, and its name.

    ``exact_both(x, y, k)`` is the exact search (one pass, both directions)."""
    t0 = time.perf_counter()
    index = fill_index(train_index(y, options), y, options.block)
    t1 = time.perf_counter()
    cal = choose_nprobe(index, x, y, k, options)
    t2 = time.perf_counter()
    if options.nprobe is not None:  # a hand-set nprobe: no timed sample, the user chose
        logger.info("backend auto: nprobe %d set by hand, searching approximately",
                    options.nprobe)
        chosen = "approx"
    else:
        proj = project(len(x), len(y), cal, t1 - t0, t2 - t1)
        chosen = "approx" if proj.approximate_wins else "exact"
        logger.info("backend auto: %s for %d x %d (projected from %d timed queries: exact "
                    "%.0fs, approximate %.0fs with nprobe %d of %d cells for recall %.2f; "
                    "index built in %.0fs, calibrated in %.0fs)", chosen, len(x), len(y),
                    cal.queries, proj.exact, proj.approximate, cal.nprobe, index.nlist,
                    cal.target, t1 - t0, t2 - t1)
    if chosen == "exact":
        del index
        return exact_both(x, y, k), "exact"
    D_xy, I_xy = search_index(index, x, y, k, cal.nprobe, options)  # noqa: N806
    del index
    D_yx, I_yx, _ = approximate_knn(y, x, k, options)  # noqa: N806
    return (D_xy, I_xy, D_yx, I_yx), "approx"


def measured_one(queries: np.ndarray, database: np.ndarray, k: int,
                 options: ApproximateOptions, exact_one) -> tuple[np.ndarray, np.ndarray]:
    """One direction's k-NN lists by the path measured cheaper (``exact_one(q, d, k)``)."""
    t0 = time.perf_counter()
    index = fill_index(train_index(database, options), database, options.block)
    cal = choose_nprobe(index, queries, database, k, options)
    per_query = (cal.approx_seconds / cal.queries, cal.exact_seconds / cal.queries)
    wins = options.nprobe is not None or per_query[0] < per_query[1]
    logger.info("backend auto: %s for %d x %d (per query: approximate %.2e s with nprobe %d, "
                "exact %.2e s; index built and calibrated in %.0fs)",
                "approx" if wins else "exact", len(queries), len(database), *per_query[:1],
                cal.nprobe, per_query[1], time.perf_counter() - t0)
    if not wins:
        return exact_one(queries, database, k)
    return search_index(index, queries, database, k, cal.nprobe, options)
