"""Is "method A beats method B" more than luck? Paired tests over the test items.

Both tests keep the pairing: item ``i`` was scored by both methods. ``a`` and ``b`` are
``(n, k)`` per-item arrays (``k`` columns an item contributes: two retrieval directions,
or ``(cosine, gold)`` for a correlation task); the statistic maps items to one score:

* ``"mean"``: mean of every entry (retrieval accuracy from per-query credit);
* ``"pearson"`` / ``"spearman"``: correlation of column 0 (system) with column 1 (gold).

``strata`` (one label per item, e.g. the Tatoeba language) makes the score the unweighted
mean of the per-stratum statistic, as the tasks' averages are, and keeps resampling
inside each stratum.

* :func:`paired_bootstrap`: resample items with replacement (Koehn 2004); the one-sided
  p-value is the share of resamples in which the observed winner does not win.
* :func:`seed_bootstrap` / :func:`compare_seeds`: two recipes trained with several seeds;
  resamples the seeds and then the items (paired), so the interval covers both sources of
  variance; :func:`holm` corrects a report's p-values for multiple comparisons.
* :func:`paired_permutation`: swap the two methods' outputs on a random half of the items
  (approximate randomisation, Noreen 1989); two-sided p-value of ``|delta|``. Exact (all
  ``2^n`` swaps) when that is no more than ``n_resamples``. For a correlation the system
  scores are first turned into ranks (Spearman) or z-scores (Pearson) within each stratum,
  so that two methods whose cosines live on different scales can be swapped.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Literal, Sequence

import numpy as np
from scipy.stats import rankdata

from ..evaluation import TASKS
from ..exceptions import ConfigError, ShapeError

Statistic = Literal["mean", "pearson", "spearman"]
_CHUNK = 256  # resamples per vectorised block


@dataclass(frozen=True)
class PairedTest:
    """Result of one paired test; ``delta = score_a - score_b``."""

    score_a: float
    score_b: float
    delta: float
    p_value: float
    ci_low: float  # 95% bootstrap interval of delta (nan for the permutation test)
    ci_high: float
    n_items: int
    n_resamples: int
    exact: bool = False


def _rowwise_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson of each row pair; x, y: (R, m) -> (R,); nan for a constant row."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    denom = np.sqrt((xc * xc).sum(1) * (yc * yc).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (xc * yc).sum(1) / np.where(denom > 0, denom, 1), np.nan)


def batched_statistic(items: np.ndarray, statistic: Statistic) -> np.ndarray:
    """The statistic of each resample; items: (R, m, k) -> (R,)."""
    if statistic == "mean":
        return items.reshape(len(items), -1).mean(axis=1)
    if items.shape[2] < 2:
        raise ShapeError(f"{statistic} needs items with (system, gold) columns; got "
                         f"{items.shape[2]} column(s)")
    x, y = items[:, :, 0], items[:, :, 1]
    if statistic == "spearman":
        x, y = rankdata(x, axis=1), rankdata(y, axis=1)
    elif statistic != "pearson":
        raise ConfigError(f"statistic must be 'mean', 'pearson' or 'spearman'; got {statistic!r}")
    return _rowwise_pearson(x, y)


def _prepare(a, b, strata) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    a, b = (a[:, None] if a.ndim == 1 else a), (b[:, None] if b.ndim == 1 else b)
    if a.shape != b.shape or a.ndim != 2 or len(a) < 2:
        raise ShapeError(f"paired tests need two (n, k) arrays of equal shape with n >= 2; "
                         f"got {a.shape} and {b.shape}")
    labels = np.zeros(len(a), np.int64) if strata is None else np.asarray(strata)
    if labels.shape != (len(a),):
        raise ShapeError(f"strata must hold one label per item ({len(a)}); got {labels.shape}")
    groups = [np.flatnonzero(labels == s) for s in dict.fromkeys(labels.tolist())]
    return a, b, groups


def score(items: np.ndarray, statistic: Statistic = "mean", strata=None) -> float:
    """The (stratified) statistic of one method's items (n, k)."""
    x, _, groups = _prepare(items, items, strata)
    return float(np.mean([batched_statistic(x[g][None], statistic)[0] for g in groups]))


def _delta_of(a, b, groups, idx_per_group, statistic) -> np.ndarray:
    """delta per resample, idx_per_group[j]: (R, n_j) item indices into group j -> (R,)."""
    total = 0.0
    for g, idx in zip(groups, idx_per_group, strict=True):
        rows = g[idx]  # (R, n_j)
        total = total + batched_statistic(a[rows], statistic) - batched_statistic(
            b[rows], statistic)
    return total / len(groups)


def paired_bootstrap(a, b, *, statistic: Statistic = "mean", strata=None,
                     n_resamples: int = 2000, seed: int = 0) -> PairedTest:
    """Paired bootstrap; see the module docstring. a, b: (n,) or (n, k) per-item arrays."""
    a, b, groups = _prepare(a, b, strata)
    sa, sb = score(a, statistic, strata), score(b, statistic, strata)
    delta = sa - sb
    rng = np.random.default_rng(seed)
    deltas = []
    for start in range(0, n_resamples, _CHUNK):
        r = min(_CHUNK, n_resamples - start)
        idx = [rng.integers(0, len(g), size=(r, len(g))) for g in groups]
        deltas.append(_delta_of(a, b, groups, idx, statistic))
    d = np.concatenate(deltas)
    d = d[np.isfinite(d)]
    sign = 1.0 if delta >= 0 else -1.0
    not_winning = int(np.sum(sign * d <= 0))
    # no finite resample, or an undefined score: no p-value either (as seed_bootstrap)
    defined = len(d) > 0 and np.isfinite(delta)
    p = (not_winning + 1) / (len(d) + 1) if defined else np.nan
    low, high = np.percentile(d, [2.5, 97.5]) if len(d) else (np.nan, np.nan)
    return PairedTest(sa, sb, delta, p, float(low), float(high), len(a), len(d))


def _swap_masks(n: int, n_resamples: int, rng) -> tuple[np.ndarray, bool]:
    """(R, n) bool masks of swapped items: all 2^n when that fits in n_resamples."""
    if n <= 20 and 2 ** n <= n_resamples:
        return np.array(list(itertools.product([False, True], repeat=n))), True
    return rng.random((n_resamples, n)) < 0.5, False


def _exchangeable(x: np.ndarray, statistic: Statistic, groups: list[np.ndarray]) -> np.ndarray:
    """For a correlation, put the system column on a common scale inside each stratum
    (ranks for Spearman, z-scores for Pearson), which leaves the statistic unchanged but
    makes swapping two systems' outputs meaningful when their cosines differ in scale."""
    if statistic == "mean":
        return x
    x = x.copy()
    for g in groups:
        col = x[g, 0]
        if statistic == "spearman":
            x[g, 0] = rankdata(col)
        else:  # std > 0: a constant column has an undefined score, not tested
            x[g, 0] = (col - col.mean()) / col.std()
    return x


def paired_permutation(a, b, *, statistic: Statistic = "mean", strata=None,
                       n_resamples: int = 2000, seed: int = 0) -> PairedTest:
    """Paired permutation (swap) test, two-sided; see the module docstring. When a score is
    undefined (nan, e.g. a constant column of a correlation task) the p-value is nan."""
    a, b, groups = _prepare(a, b, strata)
    sa, sb = score(a, statistic, strata), score(b, statistic, strata)
    delta = sa - sb
    if not np.isfinite(delta):  # a score is undefined (constant column): nothing to test
        return PairedTest(sa, sb, delta, np.nan, np.nan, np.nan, len(a), 0)
    a, b = _exchangeable(a, statistic, groups), _exchangeable(b, statistic, groups)
    masks, exact = _swap_masks(len(a), n_resamples, np.random.default_rng(seed))
    extreme, total = 0, 0
    tol = 1e-12 * max(1.0, abs(delta))
    for start in range(0, len(masks), _CHUNK):
        m = masks[start : start + _CHUNK][:, :, None]  # (r, n, 1)
        pa, pb = np.where(m, b[None], a[None]), np.where(m, a[None], b[None])  # (r, n, k)
        d = sum(batched_statistic(pa[:, g], statistic) - batched_statistic(pb[:, g], statistic)
                for g in groups) / len(groups)
        d = d[np.isfinite(d)]
        extreme += int(np.sum(np.abs(d) >= abs(delta) - tol))
        total += len(d)
    p = extreme / total if exact else (extreme + 1) / (total + 1)
    return PairedTest(sa, sb, delta, p, float("nan"), float("nan"), len(a), total, exact)


# --- over evaluation results --------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """Method ``a`` vs ``b`` on one task's main score for one view, with both tests.

    ``higher_is_better`` is False for the language view (less meaning leaked is better).
    """

    task: str
    view: str
    subset: str  # the main subset, e.g. "avg:tatoeba-14"
    metric: str
    a: str
    b: str
    bootstrap: PairedTest
    permutation: PairedTest
    higher_is_better: bool = True

    @property
    def winner(self) -> str:
        better_a = (self.bootstrap.delta > 0) == self.higher_is_better
        return "tie" if self.bootstrap.delta == 0 else (self.a if better_a else self.b)

    def to_dict(self) -> dict:
        return {**asdict(self), "winner": self.winner}

    @classmethod
    def from_dict(cls, d: dict) -> "Comparison":
        """Inverse of :meth:`to_dict` (``winner`` is derived, not read)."""
        fields_ = {k: v for k, v in d.items() if k != "winner"}
        for test in ("bootstrap", "permutation"):
            fields_[test] = PairedTest(**{k: float("nan") if v is None else v
                                          for k, v in d[test].items()})
        return cls(**fields_)


def _members(scores) -> list[str]:
    """Subsets averaged into the main score (all subsets if the task is not registered)."""
    subsets = scores.subsets()
    if scores.task in TASKS.names():
        options = {k: v for k, v in scores.config.items() if k != "task"}
        try:
            groups = TASKS.get(scores.task)(**options).average_groups(subsets)
            members = groups.get(scores.main_subset.removeprefix("avg:"))
            if members:
                return list(members)
        except (TypeError, ConfigError):
            pass
    return subsets


def task_items(scores, view: str, members: list[str] | None = None
               ) -> tuple[np.ndarray, np.ndarray, str]:
    """Per-item arrays of one view over ``members`` (default: the main score's subsets).

    Returns ``items (n, k)``, ``strata (n,)`` subset names and the statistic. Raises when
    ``scores`` has no per-item data (it is in memory only, not in saved JSON).
    """
    members = _members(scores) if members is None else members
    blocks, strata, statistic = [], [], "mean"
    for subset in members:
        keys = sorted(k for k in scores.per_item if k[0] == view and k[1] == subset)
        if not keys:
            raise ConfigError(
                f"{scores.task}: no per-item scores for view {view!r}, subset {subset!r}. "
                "Per-item scores exist only in TaskScores from a fresh evaluate() call (they "
                "are not saved in result JSON); re-run the evaluation in this process")
        named = {k[2]: np.asarray(scores.per_item[k], np.float64) for k in keys}
        if "gold" in named and "cosine" in named:
            cols, statistic = [named["cosine"], named["gold"]], scores.main_metric
        else:
            cols = list(named.values())
        blocks.append(np.stack(cols, axis=1))
        strata += [subset] * len(cols[0])
    if statistic not in ("mean", "pearson", "spearman"):
        raise ConfigError(f"{scores.task}: cannot test metric {statistic!r}")
    return np.concatenate(blocks), np.asarray(strata, dtype=object), statistic


def compare_scores(a, b, *, labels: tuple[str, str] = ("A", "B"), view: str = "meaning",
                   n_resamples: int = 2000, seed: int = 0) -> Comparison:
    """Both paired tests of two ``TaskScores`` of the same task on the same items.

    Both must carry ``per_item`` data: a fresh evaluation, or a saved ``RunResult``'s
    ``task_scores()`` with :func:`~disembed.analysis.items.attach_items` applied.
    """
    if a.task != b.task:
        raise ConfigError(f"cannot compare task {a.task!r} with task {b.task!r}")
    ia, strata, statistic = task_items(a, view)
    ib, strata_b, _ = task_items(b, view)
    if ia.shape != ib.shape or list(strata) != list(strata_b):
        raise ShapeError(f"{a.task} [{view}]: the two results cover different items "
                         f"({ia.shape} vs {ib.shape}); evaluate both with the same task options")
    options = {"statistic": statistic, "strata": strata, "n_resamples": n_resamples,
               "seed": seed}
    return Comparison(a.task, view, a.main_subset, a.main_metric, labels[0], labels[1],
                      paired_bootstrap(ia, ib, **options), paired_permutation(ia, ib, **options),
                      higher_is_better=view != "language")


@dataclass(frozen=True)
class SeedTest:
    """Recipe ``a`` (several training seeds) against ``b`` on one task's main score.

    ``per_seed_a`` / ``per_seed_b``: the main score of each run; ``mean_a`` / ``mean_b``
    their means and ``delta = mean_a - mean_b``. ``ci_low``/``ci_high``: 95% two-level
    bootstrap interval of ``delta`` (seeds of each recipe resampled with replacement, then
    items, the same items for both recipes). ``p_value``: two-sided bootstrap p-value of
    ``delta`` (twice the share of resamples on the other side of 0, capped at 1);
    ``p_adjusted``: after the multiple-comparison correction of a whole report (nan until
    :func:`holm` is applied). ``ensemble_*``: the main score of the per-item average over
    seeds, i.e. of an ensemble of the seeds' models, an extra, not the recipe's score.
    """

    per_seed_a: tuple[float, ...]
    per_seed_b: tuple[float, ...]
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    n_items: int
    n_resamples: int
    ensemble_a: float
    ensemble_b: float
    ensemble_delta: float
    p_adjusted: float = float("nan")


def _stratified(runs: np.ndarray, groups, idx_per_group, statistic) -> np.ndarray:
    """Score of every run on every item resample: runs (S, n, k) -> (S, R)."""
    total = 0.0
    for g, idx in zip(groups, idx_per_group, strict=True):
        rows = g[idx]  # (R, n_j)
        total = total + np.stack([batched_statistic(run[rows], statistic) for run in runs])
    return total / len(groups)


def seed_bootstrap(a: Sequence, b: Sequence, *, statistic: Statistic = "mean", strata=None,
                   n_resamples: int = 2000, seed: int = 0) -> SeedTest:
    """Two-level paired bootstrap of (mean over seeds of A) - (mean over seeds of B).

    ``a``, ``b``: one ``(n, k)`` (or ``(n,)``) per-item array per seed, all on the same
    items (a recipe without a seed is one array). Each resample draws each recipe's seeds
    with replacement (as many as it has), then the items with replacement inside each
    stratum, the same items for ``a`` and ``b``; its delta is the mean of the drawn seeds'
    scores of ``a`` minus that of ``b``. So the interval widens when the seeds disagree and
    when the items do.
    """
    if not len(a) or not len(b):
        raise ShapeError("seed_bootstrap needs at least one run on each side")
    prepared = [_prepare(x, x, strata) for x in list(a) + list(b)]
    shapes = {x[0].shape for x in prepared}
    if len(shapes) != 1:
        raise ShapeError(f"the runs cover different items ({sorted(shapes)}); evaluate all of "
                         "them with the same task options")
    groups = prepared[0][2]
    runs_a = np.stack([x[0] for x in prepared[: len(a)]])
    runs_b = np.stack([x[0] for x in prepared[len(a):]])
    per_a = tuple(score(x, statistic, strata) for x in runs_a)
    per_b = tuple(score(x, statistic, strata) for x in runs_b)
    mean_a, mean_b = float(np.mean(per_a)), float(np.mean(per_b))
    delta = mean_a - mean_b
    ens_a = score(runs_a.mean(axis=0), statistic, strata)
    ens_b = score(runs_b.mean(axis=0), statistic, strata)
    rng = np.random.default_rng(seed)
    deltas = []
    for start in range(0, n_resamples, _CHUNK):
        r = min(_CHUNK, n_resamples - start)
        pick_a = rng.integers(0, len(runs_a), size=(r, len(runs_a)))
        pick_b = rng.integers(0, len(runs_b), size=(r, len(runs_b)))
        idx = [rng.integers(0, len(g), size=(r, len(g))) for g in groups]
        stat_a = _stratified(runs_a, groups, idx, statistic)  # (S_a, r)
        stat_b = _stratified(runs_b, groups, idx, statistic)
        cols = np.arange(r)[:, None]
        deltas.append(stat_a[pick_a, cols].mean(axis=1) - stat_b[pick_b, cols].mean(axis=1))
    d = np.concatenate(deltas)
    d = d[np.isfinite(d)]
    if len(d):
        sign = 1.0 if delta >= 0 else -1.0
        p = min(1.0, 2 * (int(np.sum(sign * d <= 0)) + 1) / (len(d) + 1))
        low, high = np.percentile(d, [2.5, 97.5])
    else:
        p, low, high = float("nan"), float("nan"), float("nan")
    return SeedTest(per_a, per_b, mean_a, mean_b, delta, float(low), float(high), float(p),
                    runs_a.shape[1], len(d), ens_a, ens_b, ens_a - ens_b)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error), in the input order.

    Sorted ascending, the ``j``-th smallest (0-based) of ``m`` becomes
    ``max over i <= j of min(1, (m - i) * p_(i))``; nan p-values are left out of ``m`` and
    stay nan.
    """
    p = np.asarray(p_values, np.float64)
    out = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    order = finite[np.argsort(p[finite])]  # tied p-values get equal adjusted ones
    m, running = len(order), 0.0
    for i, k in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[k]))
        out[k] = running
    return out


def compare_seeds(a: Sequence, b: Sequence, *, view: str = "meaning",
                  n_resamples: int = 2000, seed: int = 0, view_b: str | None = None
                  ) -> SeedTest:
    """:func:`seed_bootstrap` of two recipes on one task; ``a``, ``b``: ``TaskScores`` of the
    same task on the same items, one per training seed, with ``per_item``. ``view_b``: the
    view read from ``b`` where it differs from ``a``'s (default ``view``), e.g. a recipe's
    untagged view against the gold-tag view of one that uses no language (its output is
    the same with or without a tag)."""
    items_a = [task_items(s, view) for s in a]
    items_b = [task_items(s, view_b or view) for s in b]
    shapes = {x[0].shape for x in items_a + items_b}
    if len(shapes) != 1:
        raise ShapeError(f"{a[0].task} [{view}]: the runs cover different items ({shapes}); "
                         "evaluate all of them with the same task options")
    _, strata, statistic = items_a[0]
    return seed_bootstrap([x[0] for x in items_a], [x[0] for x in items_b],
                          statistic=statistic, strata=strata, n_resamples=n_resamples,
                          seed=seed)


def compare_averaged(a: Sequence, b: Sequence, *, view: str = "meaning",
                     n_resamples: int = 2000, seed: int = 0) -> PairedTest:
    """Paired item bootstrap of the *seed ensembles* of two recipes (an extra, not the
    recipe's score: use :func:`compare_seeds` for that).

    Per-item scores are averaged over the seeds of each recipe, which scores an ensemble of
    the seeds' models, then resampled over items only: the interval ignores the
    seed-to-seed variance.
    """
    items_a = [task_items(s, view) for s in a]
    items_b = [task_items(s, view) for s in b]
    shapes = {x[0].shape for x in items_a + items_b}
    if len(shapes) != 1:
        raise ShapeError(f"{a[0].task} [{view}]: the runs cover different items ({shapes}); "
                         "evaluate all of them with the same task options")
    _, strata, statistic = items_a[0]
    mean_a = np.mean([x[0] for x in items_a], axis=0)
    mean_b = np.mean([x[0] for x in items_b], axis=0)
    return paired_bootstrap(mean_a, mean_b, statistic=statistic, strata=strata,
                            n_resamples=n_resamples, seed=seed)


def compare_all(results: dict[str, list], *, views: tuple[str, ...] = ("meaning", "language"),
                n_resamples: int = 2000, seed: int = 0) -> list[Comparison]:
    """Every pair of methods on every shared task and view; ``results``: label -> TaskScores."""
    out = []
    labels = list(results)
    for i, la in enumerate(labels):
        for lb in labels[i + 1 :]:
            by_task = {s.task: s for s in results[lb]}
            for sa in results[la]:
                sb = by_task.get(sa.task)
                if sb is None or not (sa.per_item and sb.per_item):
                    continue  # not both evaluated here, or a task without per-item scores
                for view in views:
                    if view not in sa.views() or view not in sb.views():
                        continue
                    if not (np.isfinite(sa.main_score(view)) and np.isfinite(sb.main_score(view))):
                        continue  # e.g. a constant language part: its correlation is undefined
                    out.append(compare_scores(sa, sb, labels=(la, lb), view=view,
                                              n_resamples=n_resamples, seed=seed))
    return out
