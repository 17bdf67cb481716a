"""The scaling study's report: ``scaling.md``, ``report.html``, one plot per task."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from ..exceptions import MissingDependencyError
from ..results import ExperimentResult
from .html import write_report
from .plots import pyplot, save_png
from .tables import task_options_text

logger = logging.getLogger(__name__)

#: (metric key, title, higher is better); ``{tatoeba}`` is the study's Tatoeba language set
COLUMNS = (("tatoeba", "Tatoeba ({tatoeba}) acc (meaning, gold tags)", True),
           ("tatoeba_notag", "Tatoeba ({tatoeba}) acc (meaning, no tag: the model identifies "
            "the language)", True),
           ("tatoeba_seen", "Tatoeba ({tatoeba}), the training languages", True),
           ("tatoeba_unseen", "Tatoeba ({tatoeba}), languages not trained on (inductive: the "
            "model's fallback, nothing from the test set)", True),
           ("tatoeba_unseen_notag", "Tatoeba ({tatoeba}), languages not trained on, no tag "
            "(inductive)", True),
           ("sts17", "STS17 cross-lingual ρ (meaning, gold tags)", True),
           ("sts17_notag", "STS17 cross-lingual ρ (meaning, no tag)", True),
           ("sts17_mono", "STS17 monolingual ρ (meaning)", True),
           ("wmt20-qe", "WMT20 QE r (meaning, gold tags, avg of 6)", True),
           ("wmt20-qe_notag", "WMT20 QE r (meaning, no tag, avg of 6)", True),
           ("leakage_tatoeba", "Tatoeba acc of the language part (leakage)", False))
PLOTTED = (("tatoeba", "Tatoeba ({tatoeba})"), ("sts17", "STS17 cross-lingual"),
           ("wmt20-qe", "WMT20 QE"))
ALPHA = 0.05
#: how the comparison table names each compared view
TAGS = {"meaning": "gold", "untagged": "none"}


def _titled(title: str, config: dict) -> str:
    """``title`` with the study's Tatoeba language set filled in."""
    languages = (config.get("task_options") or {}).get("tatoeba", {}).get("languages")
    return title.format(tatoeba=",".join(languages) if isinstance(languages, list)
                        else languages or config.get("tatoeba_languages", "tatoeba"))


def _num(x: float | None) -> float:
    """A number read back from JSON (where nan is null) as a float."""
    return float("nan") if x is None else float(x)


def _cell(row: dict, key: str) -> str:
    mean, low, high = (_num(row.get(k)) for k in (key, key + "_min", key + "_max"))
    if math.isnan(mean):
        return "-"
    if row["seeds"] > 1:
        return f"{100 * mean:.1f} [{100 * low:.1f}, {100 * high:.1f}]"
    return f"{100 * mean:.1f}"


def _metric_tables(result: ExperimentResult) -> list[str]:
    rows = result.extras["points"]
    sizes = list(dict.fromkeys(r["size"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = []
    for key, title, higher in COLUMNS:
        title = _titled(title, result.config)
        if all(math.isnan(_num(r.get(key))) for r in rows):
            continue
        lines += [f"### {title} {'↑' if higher else '↓'}", "",
                  "| method | " + " | ".join(f"{s} pairs/lang" for s in sizes) + " |",
                  "|---|" + "---:|" * len(sizes)]
        for method in methods:
            cells = [next((_cell(r, key) for r in rows if r["method"] == method
                           and r["size"] == s), "") for s in sizes]
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _seeds(values) -> str:
    return ", ".join(f"{100 * _num(v):.1f}" for v in values)


def _comparisons(result: ExperimentResult) -> list[str]:
    if not result.comparisons:
        return []
    first = result.comparisons[0]
    ref = first["reference"]
    if "per_seed_a" not in first:  # a study written before the two-level bootstrap
        return [f"## Each method against {ref}", "",
                "(written by an older version: re-render with `disembed scale "
                "--finished-only` for the per-seed table)", ""]
    correction = {"holm": "Holm"}.get(first.get("correction", ""), "no")
    lines = [f"## Each method against {ref}", "",
             "Per-seed main scores of each method, their mean, and Δ = (mean over seeds) - "
             f"({ref}'s mean), x100, with gold language tags and with none (the model's "
             "untagged meaning: its language identifier's posterior mixture of the language "
             "routes; compared with the reference's untagged scores; a recipe that uses no "
             "language scores the same either way). 95% interval: two-level paired bootstrap "
             "that resamples "
             "each method's seeds with replacement and then the test items (the same items "
             f"for both). p: two-sided bootstrap p-value; p ({correction}): {correction}-"
             f"corrected over all {len(result.comparisons)} comparisons of this report "
             f"(family-wise error). **Bold**: significant at {ALPHA} after the {correction} "
             "correction. Extra, not the recipe's score: Δ ens., the difference of the seed "
             "ensembles (per-item scores averaged over the seeds, i.e. an ensemble of the "
             "seeds' models), whose interval would ignore seed variance.", "",
             f"| pairs/lang | task | tags | method | per seed | mean | {ref} | Δ | 95% CI "
             f"(seeds+items) | p | p ({correction}) | Δ ens. (extra) |",
             "|---|---|---|---|---|---:|---:|---:|---|---:|---:|---:|"]
    for c in result.comparisons:
        padj = _num(c.get("p_adjusted"))
        sig = not math.isnan(padj) and padj < ALPHA
        delta = f"{100 * c['delta']:+.2f}"
        tags = TAGS.get(c.get("view", "meaning"), c.get("view"))  # older: gold tags only
        lines.append(f"| {c['size']} | {c['task']} | {tags} | {c['method']} | "
                     f"{_seeds(c['per_seed_a'])} | "
                     f"{100 * c['mean_a']:.1f} | {100 * c['mean_b']:.1f} | "
                     f"{f'**{delta}**' if sig else delta} | "
                     f"[{100 * c['ci_low']:+.2f}, {100 * c['ci_high']:+.2f}] | "
                     f"{c['p_value']:.3f} | {padj:.3f} | {100 * c['ensemble_delta']:+.2f} |")
    return lines + [""]


def render_scaling(result: ExperimentResult) -> str:
    cfg, rows = result.config, result.extras["points"]
    sizes = {r["size"]: r["train_pairs"] for r in rows if r["train_pairs"]}
    lines = ["# disembed scaling study", "",
             f"Encoder `{cfg['encoder']}`; training languages {', '.join(cfg['languages'])} "
             f"(each with English); {cfg['holdout_per_language']} pairs per language held out "
             "at every size; training sets are nested prefixes of one seeded order. Total "
             "training pairs per size: "
             + ", ".join(f"{s}: {n}" for s, n in sizes.items()) + ". Seeds "
             f"{cfg['seeds']} for trained recipes (cells: mean [min, max] over seeds). "
             f"Evaluation: {', '.join(cfg['tasks'])}, "
             f"{'every item' if cfg['max_eval_items'] is None else cfg['max_eval_items']} "
             f"per subset; {task_options_text(cfg.get('task_options'))}Scores x100.", ""]
    for key, title in PLOTTED:
        title = _titled(title, cfg)
        name = f"scaling-{key}.png"
        if result.extras.get("figures", {}).get(key):
            lines += [f"![{title}]({name})", ""]
    not_run = result.extras.get("not_run") or []
    if not_run:
        lines += [f"Not run (left out of every table): {'; '.join(not_run)}.", ""]
    lines += ["## Scores by training size", "", *_metric_tables(result), *_comparisons(result)]
    return "\n".join(lines) + "\n"


def plot_task(rows: list[dict], key: str, title: str, path: Path) -> Path:
    """Score vs total training pairs (log x) per method, seed range as error bars, and the
    language part's Tatoeba accuracy (leakage) beside it."""
    plt = pyplot("the scaling plots")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric, label in ((axes[0], key, f"{title} (meaning) x100"),
                              (axes[1], "leakage_tatoeba",
                               "language part: Tatoeba acc x100 (lower: less leaked)")):
        for i, method in enumerate(dict.fromkeys(r["method"] for r in rows)):
            own = sorted((r for r in rows if r["method"] == method and r["train_pairs"]
                          and not math.isnan(_num(r[metric]))), key=lambda r: r["train_pairs"])
            flat = [r for r in rows if r["method"] == method and not r["train_pairs"]]
            if own:
                x = [r["train_pairs"] for r in own]
                y = [100 * r[metric] for r in own]
                # the mean of equal seeds can land an ulp outside [min, max]: clip at 0
                err = [[max(0.0, 100 * (r[metric] - r[metric + "_min"])) for r in own],
                       [max(0.0, 100 * (r[metric + "_max"] - r[metric])) for r in own]]
                ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=method,
                            color=f"C{i % 10}")
            elif flat and not math.isnan(_num(flat[0][metric])):
                ax.axhline(100 * flat[0][metric], linestyle="--", color=f"C{i % 10}",
                           label=f"{method} (no training)")
        ax.set_xscale("log")
        ax.set_xlabel("training pairs (all languages, log scale)")
        ax.set_ylabel(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))  # room for the title above both panels
    return save_png(fig, path)


def write_scaling(result: ExperimentResult, out: Path) -> Path:
    """``scaling.json``, the plots, ``scaling.md`` and the self-contained ``report.html``."""
    out.mkdir(parents=True, exist_ok=True)
    figures = {}
    try:
        for key, title in PLOTTED:
            title = _titled(title, result.config)
            if any(not math.isnan(_num(r[key])) for r in result.extras["points"]):
                plot_task(result.extras["points"], key, title, out / f"scaling-{key}.png")
                figures[key] = f"scaling-{key}.png"
    except MissingDependencyError as exc:
        logger.warning("no plots: %s", exc)
    result.extras["figures"] = figures
    return write_report(result, out, json_name="scaling.json", markdown_name="scaling.md",
                        render=render_scaling, title="disembed scaling study")


__all__ = ["plot_task", "render_scaling", "write_scaling"]
