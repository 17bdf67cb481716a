"""Plots of result tables (needs ``pip install "disembed[plot]"``)."""

from __future__ import annotations

import io
import logging
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ..evaluation.task_scores import TaskScores
from ..exceptions import MissingDependencyError, require
from ..results import RunResult
from ..util.files import atomic_write_bytes

logger = logging.getLogger(__name__)


def pyplot(purpose: str):
    """``matplotlib.pyplot`` on the headless Agg backend; without matplotlib, an install hint."""
    require("matplotlib", "plot", purpose)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: str | Path) -> Path:
    """Write ``fig`` as a PNG atomically (a temporary file, then a rename) and close it."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, dpi=110, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
    return atomic_write_bytes(path, [buffer.getvalue()])


def plot_summary(results: Sequence[tuple[str, TaskScores]], path: str | Path) -> Path:
    """One panel per task: the main score of the meaning and language parts for each label.

    Bars: meaning (filled) and language (hatched), x100. Saved as PNG at ``path``.
    """
    plt = pyplot("Plotting results")
    tasks = list(dict.fromkeys(s.task for _, s in results))
    labels = list(dict.fromkeys(label for label, _ in results))
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 0.5 * len(labels) + 2.2),
                             squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=False):
        by_label = {label: s for label, s in results if s.task == task}
        title = None
        for i, label in enumerate(labels):
            s = by_label.get(label)
            if s is None:
                continue
            title = f"{task}\n{s.main_metric} ({s.main_subset})"
            for offset, view, style in ((-0.2, "meaning", {}), (0.2, "language", {"hatch": "//"})):
                value = s.main_score(view) if view in s.views() else float("nan")
                if not math.isnan(value):
                    bars = ax.barh(i + offset, 100 * value, height=0.38,
                                   color="C0" if view == "meaning" else "C1",
                                   label=view if i == 0 else None, **style)
                    ax.bar_label(bars, fmt="%.1f", padding=2, fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.6)
        _room_for_labels(ax)
        ax.set_title(title or task, fontsize=9)
        ax.set_xlabel("score x100")
    handles = [plt.Rectangle((0, 0), 1, 1, color="C0"),
               plt.Rectangle((0, 0), 1, 1, color="C1", hatch="//")]
    fig.legend(handles, ["meaning (higher is better)", "language (lower = less meaning leaked)"],
               loc="lower center", ncol=2, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return save_png(fig, path)


def _room_for_labels(ax) -> None:
    """x limits with room on both sides for value labels outside the bars' ends (a label
    of 100.0, or of a negative bar, is never cut off or drawn over the axis)."""
    ends = [v for c in ax.containers for v in (r.get_x() + r.get_width() for r in c)] or [0]
    low, high = min(0.0, *ends), max(0.0, *ends)
    pad = 0.18 * max(high - low, 1.0)
    ax.set_xlim(low - (pad if low < 0 else 0.02 * pad), high + pad)


def plot_differences(comparisons: Sequence[dict], path: str | Path) -> Path:
    """One panel per task: each method's difference to the reference (x100) as a point with
    its 95% interval, and the zero line; differences of a few tenths stay visible (no bars
    from zero on a 0-100 scale)."""
    plt = pyplot("Plotting differences")
    tasks = list(dict.fromkeys(c["task"] for c in comparisons))
    methods = list(dict.fromkeys(c["a"] for c in comparisons))
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.8 * len(tasks), 0.45 * len(methods) + 1.8),
                             squeeze=False, sharey=True)
    for ax, task in zip(axes[0], tasks, strict=True):
        for c in (c for c in comparisons if c["task"] == task):
            b, y = c["bootstrap"], methods.index(c["a"])
            delta, low, high = (100 * b[k] for k in ("delta", "ci_low", "ci_high"))
            ax.errorbar(delta, y, xerr=[[delta - low], [high - delta]], fmt="o", capsize=3,
                        color="C0" if low > 0 else ("C3" if high < 0 else "C7"))
            ax.annotate(f"{delta:+.2f}", (delta, y), xytext=(0, 6),
                        textcoords="offset points", ha="center", fontsize=7)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(methods)), methods, fontsize=8)
        ax.set_ylim(len(methods) - 0.5, -0.7)
        ax.set_title(f"{task} ({comparisons[0]['view']})", fontsize=9)
        ax.set_xlabel(f"minus {comparisons[0]['b'].split(' / ')[-1]} (x100)")
    fig.tight_layout()
    return save_png(fig, path)


def write_difference_plot(comparisons: Sequence[dict], path: str | Path) -> Path | None:
    """:func:`plot_differences` of the meaning-part comparisons, or ``None`` (none to draw,
    or no matplotlib)."""
    meaning = [c for c in comparisons if c["view"] == "meaning"]
    if not meaning:
        return None
    try:
        return plot_differences(meaning, path)
    except MissingDependencyError as exc:
        logger.info("no difference plot (%s)", exc)
        return None


def write_summary_plot(runs: Sequence[RunResult], path: str | Path) -> Path | None:
    """:func:`plot_summary` of every run's scores, or ``None`` (logged) without matplotlib."""
    try:
        path = plot_summary([(r.label, s) for r in runs for s in r.scores], path)
    except MissingDependencyError as exc:
        logger.info("no summary plot (%s)", exc)
        return None
    logger.info("summary plot: %s", path)
    return path


def plot_score_histogram(runs: dict[str, tuple[np.ndarray, np.ndarray, float]],
                         path: str | Path, bins: int = 60) -> Path:
    """One panel per run: candidate scores, gold vs non-gold, with the chosen threshold.

    ``runs`` maps a title to ``(score (p,), is_gold (p,), threshold)``.
    """
    plt = pyplot("the score histogram")

    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.2), squeeze=False)
    for ax, (title, (score, is_gold, thr)) in zip(axes[0], runs.items(), strict=True):
        edges = np.linspace(np.percentile(score, 0.5), score.max(), bins)
        ax.hist(score[~is_gold], bins=edges, alpha=0.6, label="not in gold", log=True)
        ax.hist(score[is_gold], bins=edges, alpha=0.6, label="gold", log=True)
        ax.axvline(thr, color="k", linestyle="--", linewidth=1, label=f"best F1 at {thr:.3f}")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("margin score")
    axes[0][0].set_ylabel("candidates (log)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return save_png(fig, path)
