"""The analyses' report: ``analysis.md``, ``report.html`` and the figures, all rendered from
one :class:`~disembed.results.ExperimentResult` (``analysis.json``)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from ..analysis.significance import Comparison
from ..exceptions import MissingDependencyError
from ..results import ExperimentResult, RunResult
from ..util.text import slug
from . import analysis_plots as ap
from .html import write_report

logger = logging.getLogger(__name__)

ALPHA = 0.05
CODESWITCH_TASK = "tatoeba-codeswitch"


def _f(x, scale: float = 100, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else (
        f"{scale * x:.{digits}f}")


def _p(p: float | None) -> str:
    return "-" if p is None or math.isnan(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(r) + " |" for r in rows], ""]


def _figure(result: ExperimentResult, key: str, alt: str) -> list[str]:
    name = result.extras.get("figures", {}).get(key)
    return [f"![{alt}]({name})", ""] if name else []


def _codeswitch_scores(run: RunResult):
    return next((s for s in run.scores if s.task == CODESWITCH_TASK), None)


def _header(result: ExperimentResult) -> list[str]:
    cfg, ex = result.config, result.extras
    lines = ["# disembed analyses", "",
             f"Encoder `{ex.get('encoder_spec')}` ({ex.get('encoder', {}).get('dim')}-d). "
             "Methods: " + ", ".join(f"`{r.label}`" for r in result.runs) + ".", ""]
    training = ex.get("training")
    if training:
        per = ", ".join(f"{x.get('language')} {x.get('used')}"
                        for x in training.get("languages", []))
        lines += [f"Training set: {training.get('total_pairs')} pairs "
                  f"({cfg['pairs_per_language']} per language requested; used: {per}), each "
                  "language paired with English; pairs that overlap "
                  f"{', '.join(training.get('eval_sets', []))} removed.", ""]
    lines += [f"Held-out sample: {ex.get('sample_pairs')} Tatoeba pairs over "
              f"{len(set(ex.get('sample_languages', [])))} languages (geometry, projection); "
              f"probe: {ex.get('probe_sentences')} Tatoeba sentences in "
              f"{len(ex.get('probe_languages', []))} languages. Tasks: "
              f"{', '.join(cfg['tasks'])}. Seed {cfg['seed']}. "
              f"Took {ex.get('seconds', float('nan')):.0f} s.", ""]
    return lines


def _summary(result: ExperimentResult) -> list[str]:
    header = ["method", "Tatoeba acc (meaning) ↑", "Tatoeba acc (language) ↓",
              "STS17 ρ (meaning) ↑", "STS17 ρ (language) ↓", "LID probe on meaning ↓",
              "LID probe on language ↑", "code-switched acc ↑", "align ↓", "uniform ↓"]
    rows = []
    for r in result.runs:
        probe = r.measurements.get("probe", {})
        cs = _codeswitch_scores(r)
        g = r.measurements.get("geometry", {}).get("meaning", {})
        rows.append([r.label, _f(r.score("tatoeba")), _f(r.score("tatoeba", "language")),
                     _f(r.score("sts17")), _f(r.score("sts17", "language")),
                     _f(probe.get("meaning", {}).get("accuracy")),
                     _f(probe.get("language", {}).get("accuracy")),
                     _f(cs.get("meaning", "avg:code-switched", "acc_mean") if cs else None),
                     _f(g.get("alignment"), 1, 3), _f(g.get("uniformity"), 1, 3)])
    return ["## Summary", "", "Scores x100 (alignment/uniformity raw). ↑ higher is better, "
            "↓ lower is better. `-`: the method has no such part.", "",
            *_table(header, rows)]


def _leakage(result: ExperimentResult) -> list[str]:
    rows = [[r.label, view, _f(res["accuracy"]), _f(res["chance"]), str(res["n_train"]),
             str(res["n_test"])]
            for r in result.runs for view, res in r.measurements.get("probe", {}).items()]
    if not rows:
        return []
    return ["## Semantic leakage", "",
            "A multinomial logistic-regression probe is trained to name the language of a "
            "sentence from its embedding (70/30 stratified split, seeded). On the meaning "
            "part its accuracy is leakage (chance = majority share); on the language part it "
            "should be high. Retrieval and STS on the language part (summary table) measure "
            "the other direction: meaning left in the language part.", "",
            *_table(["method", "view", "probe acc", "chance", "train", "test"], rows),
            *_figure(result, "tradeoff", "meaning accuracy vs leakage")]


def _codeswitch(result: ExperimentResult) -> list[str]:
    runs = [(r, _codeswitch_scores(r)) for r in result.runs if _codeswitch_scores(r)]
    if not runs:
        return []
    rows = []
    for r, cs in runs:
        a = cs.get("meaning", "avg:original", "acc_mean")
        b = cs.get("meaning", "avg:code-switched", "acc_mean")
        test = r.measurements.get("codeswitch_test", {})
        rows.append([r.label, _f(a), _f(b), _f(b - a),
                     _p(test.get("permutation", {}).get("p_value"))])
    stats = result.extras.get("codeswitch_stats", {})
    counts = ", ".join(f"{k} {v['switched']}/{v['items']} (skipped "
                       f"{v['skipped_no_dictionary_word']}, {v['mean_substitutions']:.1f} words)"
                       for k, v in stats.items())
    rate = result.config.get("codeswitch_rate")
    return ["## Code-switching robustness", "",
            f"Non-English Tatoeba sentences with {rate:.0%} of their MUSE-dictionary words "
            "(at least one) replaced by an English translation, then xx<->en retrieval on "
            "the meaning part, on the same items before and after switching. Sentences with "
            f"no dictionary word are skipped. Per language (switched/items): {counts}.", "",
            *_table(["method", "original", "code-switched", "change", "p (permutation)"],
                    rows),
            *_figure(result, "codeswitch", "code-switching")]


def _geometry(result: ExperimentResult) -> list[str]:
    rows = []
    for r in result.runs:
        for view, g in r.measurements.get("geometry", {}).items():
            if view != "raw" or r is result.runs[0]:
                rows.append([r.label if view != "raw" else "(raw encoder)", view,
                             f"{g['alignment']:.3f}", f"{g['uniformity']:.3f}"])
    if not rows:
        return []
    return ["## Geometry (Wang & Isola 2020)", "",
            "Alignment = mean squared distance between a sentence and its translation (unit "
            "vectors); uniformity = log mean exp(-2 squared distance) over all pairs. Both on "
            "the held-out Tatoeba sample; lower is better for both. Trained methods are also "
            "measured after every epoch (the head at that epoch, before early-stopping "
            "restores the best one).", "",
            *_table(["method", "view", "alignment", "uniformity"], rows),
            *_figure(result, "geometry", "alignment and uniformity")]


def render_comparisons(comparisons: list[Comparison]) -> list[str]:
    """The significance section: one row per (task, part, A, B) with both p-values."""
    if not comparisons:
        return []
    rows = []
    for c in comparisons:
        b = c.bootstrap
        if c.winner == "tie":
            verdict = "tie"
        else:
            loser = c.b if c.winner == c.a else c.a
            sig = b.p_value < ALPHA and c.permutation.p_value < ALPHA
            verdict = f"**{c.winner} beats {loser}**" if sig else (
                f"{c.winner} > {loser}, not significant")
        rows.append([c.task, c.view, c.a, c.b, _f(b.score_a), _f(b.score_b), _f(b.delta),
                     f"[{_f(b.ci_low)}, {_f(b.ci_high)}]", _p(b.p_value),
                     _p(c.permutation.p_value), verdict])
    n = comparisons[0].bootstrap.n_resamples
    return ["## Significance", "",
            f"Every pair of methods on each task's main score, for each part. Paired "
            f"bootstrap over the test items ({n} resamples, stratified by language/track; "
            "one-sided p that the winner does not win; 95% interval of the difference) and a "
            "paired permutation test (two-sided). A claim is bold when both p < "
            f"{ALPHA}. On the language part lower is better.", "",
            *_table(["task", "part", "A", "B", "A", "B", "A-B", "95% CI", "p boot", "p perm",
                     "verdict"], rows)]


def _significance(result: ExperimentResult) -> list[str]:
    return render_comparisons([Comparison.from_dict(c) for c in result.comparisons])


def _truncation(result: ExperimentResult) -> list[str]:
    sweep = result.extras.get("truncation") or []
    if not sweep:
        return []
    rows = [[str(r["k"]), r["method"], r["task"], _f(r["meaning"]), _f(r["language"])]
            for r in sweep]
    lines = ["## Embedding dimensionality", "",
             "Each method trained and evaluated on the first k encoder dimensions only.", "",
             *_table(["k", "method", "task", "meaning ↑", "language ↓"], rows)]
    for key in result.extras.get("figures", {}):
        if key.startswith("truncation:"):
            lines += _figure(result, key, key)
    return lines


def _projections(result: ExperimentResult) -> list[str]:
    keys = [k for k in result.extras.get("figures", {}) if k.startswith("projection:")]
    if not keys:
        return []
    lines = ["## 2-D projections", "",
             "PCA of the meaning and language parts of the held-out sample, coloured by "
             "language; the joint panel projects both parts together (marker = part). A good "
             "meaning part mixes the languages; a good language part separates them.", ""]
    for key in keys:
        lines += _figure(result, key, key)
    return lines


def render_analysis(result: ExperimentResult) -> str:
    """The whole report as markdown; figures are referenced by file name (same folder)."""
    parts = [_header, _summary, _leakage, _significance, _geometry, _codeswitch, _truncation,
             _projections]
    return "\n".join(line for part in parts for line in part(result)) + "\n"


def write_analysis(result: ExperimentResult, out: Path, *, plots: bool = True) -> Path:
    """The figures (if ``plots`` and matplotlib is installed), ``analysis.json``,
    ``analysis.md`` and the self-contained ``report.html``; returns the markdown's path."""
    out.mkdir(parents=True, exist_ok=True)
    if plots:
        try:
            result.extras["figures"] = make_figures(result, out)
        except MissingDependencyError as exc:
            logger.warning("no figures: %s", exc)
    return write_report(result, out, json_name="analysis.json", markdown_name="analysis.md",
                        render=render_analysis, title="disembed analyses")


def make_figures(result: ExperimentResult, out: Path) -> dict[str, str]:
    """Every figure the result has data for; returns name -> file name (in ``out``)."""
    figs: dict[str, str] = {}
    langs = result.extras.get("sample_languages", [])
    for i, run in enumerate(result.runs):
        panels = run.measurements.get("projection")
        if panels:
            name = f"projection-{i}-{slug(run.label, 40)}.png"
            ap.plot_projection(panels, langs, out / name,
                               title=f"{run.label}: PCA of {len(langs)} Tatoeba sentences "
                               f"({result.extras.get('encoder_spec')})")
            figs[f"projection:{run.label}"] = name
    panels = _tradeoff_panels(result)
    if panels:
        ap.plot_tradeoff(panels, out / "tradeoff.png",
                         ylabel="Tatoeba retrieval accuracy of the meaning part x100")
        figs["tradeoff"] = "tradeoff.png"
    if any(r.measurements.get("geometry") for r in result.runs):
        ap.plot_geometry({r.label: r.measurements.get("trajectory", []) for r in result.runs},
                         {r.label: r.measurements.get("geometry", {}) for r in result.runs},
                         out / "geometry.png")
        figs["geometry"] = "geometry.png"
    cs = [(r.label, s.get("meaning", "avg:original", "acc_mean"),
           s.get("meaning", "avg:code-switched", "acc_mean"))
          for r in result.runs if (s := _codeswitch_scores(r)) is not None]
    if cs:
        ap.plot_paired_bars(cs, out / "codeswitch.png", names=("original", "code-switched"),
                            ylabel="Tatoeba retrieval accuracy x100 (meaning part)",
                            title="code-switching robustness")
        figs["codeswitch"] = "codeswitch.png"
    figs.update(_truncation_figures(result, out))
    return figs


def _truncation_figures(result: ExperimentResult, out: Path) -> dict[str, str]:
    sweep = result.extras.get("truncation") or []
    figs = {}
    for task in dict.fromkeys(r["task"] for r in sweep):
        rows = [r for r in sweep if r["task"] == task and r["meaning"] is not None
                and not math.isnan(r["meaning"])]
        ap.plot_lines(rows, "k", "meaning", "method", out / f"truncation-{task}.png",
                      xlabel="first k dimensions kept", logx=True,
                      ylabel=f"{task} {rows[0]['metric']} x100 (meaning part)",
                      title=f"{task}: meaning score vs embedding dimensions")
        figs[f"truncation:{task}"] = f"truncation-{task}.png"
    return figs


def _tradeoff_panels(result: ExperimentResult) -> list[dict]:
    """Meaning accuracy vs (a) the LID probe on meaning, (b) retrieval on the language part."""
    panels = []
    probed = [r for r in result.runs if "meaning" in r.measurements.get("probe", {})]
    if probed:
        panels.append({"points": [(r.label, r.measurements["probe"]["meaning"]["accuracy"],
                                   r.score("tatoeba")) for r in probed],
                       "chance": probed[0].measurements["probe"]["meaning"]["chance"],
                       "xlabel": "language-ID probe accuracy on the meaning part x100\n"
                                 "(language left in meaning; lower is better)"})
    lang = [(r.label, r.score("tatoeba", "language"), r.score("tatoeba"))
            for r in result.runs]
    if any(not math.isnan(x) for _, x, _ in lang):
        panels.append({"points": lang, "chance": None,
                       "xlabel": "Tatoeba retrieval accuracy of the language part x100\n"
                                 "(meaning left in language; lower is better)"})
    return panels


__all__ = ["make_figures", "render_analysis", "render_comparisons", "write_analysis"]
