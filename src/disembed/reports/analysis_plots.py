"""Figures of the analyses (needs ``pip install "disembed[plot]"``); each writes one PNG."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .plots import pyplot, save_png

MARKERS = "osD^vP*Xh<>p"


def _plt():
    return pyplot("Plotting analyses")


def plot_projection(panels: Sequence[dict], languages: Sequence[str], path: str | Path,
                    title: str = "") -> Path:
    """Precomputed 2-D projections (one axis each), coloured by language, marker = part.

    ``panels``: ``[{"label", "points": {part: (n, 2)}}]`` as made by
    :func:`disembed.analysis.geometry.projection_panels`; ``languages``: the n rows' codes.
    """
    plt = _plt()
    langs = np.asarray(list(languages), dtype=object)
    order = sorted(set(langs.tolist()))
    palette = [plt.get_cmap(name)(i) for name, k in (("tab10", 10), ("Dark2", 8), ("Set1", 9))
               for i in range(k) if (name, i) not in (("tab10", 7), ("Set1", 8))]  # no greys
    colours = {x: palette[i % len(palette)] for i, x in enumerate(order)}
    names = list(dict.fromkeys(n for panel in panels for n in panel["points"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for name, points in panel["points"].items():
            xy = np.asarray(points, dtype=np.float64)  # (n, 2)
            marker = MARKERS[names.index(name) % len(MARKERS)]
            for lang in order:
                sel = langs == lang
                ax.scatter(xy[sel, 0], xy[sel, 1], s=9, alpha=0.6, marker=marker,
                           color=colours[lang], linewidths=0)
        ax.set_title(panel["label"], fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    lang_handles = [plt.Line2D([], [], marker="o", linestyle="", color=colours[x], label=x)
                    for x in order]
    kind_handles = [plt.Line2D([], [], marker=MARKERS[i % len(MARKERS)], linestyle="",
                               color="black", label=f"{n} part") for i, n in enumerate(names)]
    fig.legend(handles=lang_handles + kind_handles, loc="center left", bbox_to_anchor=(1, 0.5),
               fontsize=7, title="language / kind", title_fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)


def plot_tradeoff(panels: Sequence[dict], path: str | Path, *, ylabel: str) -> Path:
    """Meaning score (y) against a leakage measure (x, lower is better), one point per method
    and one panel per measure: ``{"points": [(label, x, y)], "xlabel", "chance"}``."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), 4.4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        for i, (label, x, y) in enumerate(panel["points"]):
            if math.isnan(x) or math.isnan(y):
                continue
            ax.scatter([100 * x], [100 * y], s=45, marker=MARKERS[i % len(MARKERS)],
                       color=f"C{i % 10}", zorder=3)
            ax.annotate(label, (100 * x, 100 * y), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)
        chance = panel.get("chance")
        if chance is not None:
            ax.axvline(100 * chance, color="grey", linestyle=":", linewidth=1)
            ax.annotate("chance", (100 * chance, 0.02), xycoords=("data", "axes fraction"),
                        fontsize=7, color="grey", xytext=(3, 0), textcoords="offset points")
        ax.set_xlabel(panel["xlabel"], fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_title("upper left is best", fontsize=10)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_png(fig, path)


def plot_geometry(trajectories: Mapping[str, Sequence[dict]], finals: Mapping[str, dict],
                  path: str | Path, view: str = "meaning") -> Path:
    """Alignment vs uniformity of one view per method (a point per final model, a line
    through the epochs of a trained one, epoch 1 hollow), and both against the epoch."""
    plt = _plt()
    fig, (ax, ax_al, ax_un) = plt.subplots(1, 3, figsize=(14, 4.2))
    labels = list(dict.fromkeys(list(finals) + list(trajectories)))
    for i, label in enumerate(labels):
        colour = f"C{i % 10}"
        traj = [r for r in trajectories.get(label, []) if view in r]
        if traj:
            xs = [r[view]["uniformity"] for r in traj]
            ys = [r[view]["alignment"] for r in traj]
            ax.plot(xs, ys, "-", color=colour, linewidth=1, alpha=0.7)
            ax.scatter(xs[0], ys[0], facecolors="none", edgecolors=colour, s=40)
            epochs = [r["epoch"] for r in traj]
            ax_al.plot(epochs, ys, marker=".", color=colour, label=label)
            ax_un.plot(epochs, xs, marker=".", color=colour, label=label)
        if label in finals and view in finals[label]:
            g = finals[label][view]
            ax.scatter(g["uniformity"], g["alignment"], color=colour, s=50,
                       marker=MARKERS[i % len(MARKERS)], label=label, zorder=3)
    ax.set_xlabel("uniformity  (lower = more spread out)")
    ax.set_ylabel("alignment  (lower = translations closer)")
    ax.set_title(f"{view} part, final models: lower left is best", fontsize=9)
    ax.legend(fontsize=7)
    for a, name in ((ax_al, "alignment"), (ax_un, "uniformity")):
        a.set_xlabel("epoch")
        a.set_ylabel(name)
        a.set_title(f"{name} of the {view} part per epoch (held-out pairs)", fontsize=9)
        if a.lines:
            a.legend(fontsize=7)
    for a in (ax, ax_al, ax_un):
        a.grid(alpha=0.3)
    fig.tight_layout()
    return save_png(fig, path)


def plot_lines(rows: Sequence[dict], x: str, y: str, group: str, path: str | Path, *,
               xlabel: str, ylabel: str, title: str = "", logx: bool = False) -> Path:
    """A line of ``row[y]`` against ``row[x]`` per value of ``row[group]`` (x100 on y)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    for i, name in enumerate(dict.fromkeys(r[group] for r in rows)):
        sel = sorted((r[x], r[y]) for r in rows if r[group] == name)
        ax.plot([a for a, _ in sel], [100 * b for _, b in sel], marker=MARKERS[i % len(MARKERS)],
                label=str(name))
    if logx:
        from matplotlib.ticker import ScalarFormatter

        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xticks(sorted({r[x] for r in rows}))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_png(fig, path)


def plot_paired_bars(rows: Sequence[tuple[str, float, float]], path: str | Path, *,
                     names: tuple[str, str], ylabel: str, title: str = "") -> Path:
    """Two bars per label (e.g. original vs code-switched accuracy), x100."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(1.3 * len(rows) + 2.5, 4.0))
    idx = np.arange(len(rows))
    for offset, col, name, colour in ((-0.2, 1, names[0], "C0"), (0.2, 2, names[1], "C3")):
        values = [100 * r[col] for r in rows]
        bars = ax.bar(idx + offset, values, 0.38, label=name, color=colour)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    low = min(100 * min(r[1], r[2]) for r in rows)
    ax.set_ylim(max(0.0, low - 5), None)  # zoomed: the differences are what matters
    ax.set_xticks(idx, [r[0] for r in rows], fontsize=8, rotation=15)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return save_png(fig, path)
