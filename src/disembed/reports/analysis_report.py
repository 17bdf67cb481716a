"""``analysis.md``: the analyses as markdown tables with the PNGs embedded."""

from __future__ import annotations

import math

ALPHA = 0.05


def _f(x, scale: float = 100, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else (
        f"{scale * x:.{digits}f}")


def _p(p: float) -> str:
    return "-" if math.isnan(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(r) + " |" for r in rows], ""]


def _figure(report, key: str, alt: str) -> list[str]:
    name = report.figures.get(key)
    return [f"![{alt}]({name})", ""] if name else []


def _header(report) -> list[str]:
    cfg = report.config
    lines = ["# disembed analyses", "",
             f"Encoder `{report.encoder_spec}` ({report.encoder.get('dim')}-d). Methods: "
             + ", ".join(f"`{r.label}`" for r in report.runs) + ".", ""]
    if report.training:
        per = report.training.get("languages", [])
        lines += [f"Training set: {report.training.get('total_pairs')} pairs "
                  f"({cfg['pairs_per_language']} per language requested; used: "
                  f"{_training_size(per)}), each language paired with English; pairs that "
                  f"overlap {', '.join(report.training.get('eval_sets', []))} removed.", ""]
    lines += [f"Held-out sample: {len(report.sample)} Tatoeba pairs over "
              f"{len(set(report.sample.src_lang))} languages (geometry, projection); probe: "
              f"{len(report.lid[0])} Tatoeba sentences in {len(set(report.lid[1]))} languages. "
              f"Tasks: {', '.join(cfg['tasks'])}. Seed {cfg['seed']}. "
              f"Took {report.seconds:.0f} s.", ""]
    return lines


def _training_size(per: list[dict]) -> str:
    return ", ".join(f"{x.get('language')} {x.get('used')}" for x in per)


def _summary(report) -> list[str]:
    header = ["method", "Tatoeba acc (meaning) ↑", "Tatoeba acc (language) ↓",
              "STS17 ρ (meaning) ↑", "STS17 ρ (language) ↓", "LID probe on meaning ↓",
              "LID probe on language ↑", "code-switched acc ↑", "align ↓", "uniform ↓"]
    rows = []
    for r in report.runs:
        probe = r.probe
        cs = r.codeswitch.get("meaning", "avg:code-switched", "acc_mean") if r.codeswitch else None
        g = r.geometry.get("meaning", {})
        rows.append([r.label, _f(report.main(r, "tatoeba", "meaning")),
                     _f(report.main(r, "tatoeba", "language")),
                     _f(report.main(r, "sts17", "meaning")),
                     _f(report.main(r, "sts17", "language")),
                     _f(probe["meaning"].accuracy) if "meaning" in probe else "-",
                     _f(probe["language"].accuracy) if "language" in probe else "-",
                     _f(cs), _f(g.get("alignment"), 1, 3), _f(g.get("uniformity"), 1, 3)])
    return ["## Summary", "", "Scores x100 (alignment/uniformity raw). ↑ higher is better, "
            "↓ lower is better. `-`: the method has no such part.", "",
            *_table(header, rows)]


def _leakage(report) -> list[str]:
    rows = []
    for r in report.runs:
        for view, res in r.probe.items():
            rows.append([r.label, view, _f(res.accuracy), _f(res.chance), str(res.n_train),
                         str(res.n_test)])
    if not rows:
        return []
    return ["## Semantic leakage", "",
            "A multinomial logistic-regression probe is trained to name the language of a "
            "sentence from its embedding (70/30 stratified split, seeded). On the meaning "
            "part its accuracy is leakage (chance = majority share); on the language part it "
            "should be high. Retrieval and STS on the language part (summary table) measure "
            "the other direction: meaning left in the language part.", "",
            *_table(["method", "view", "probe acc", "chance", "train", "test"], rows),
            *_figure(report, "tradeoff", "meaning accuracy vs leakage")]


def _codeswitch(report) -> list[str]:
    runs = [r for r in report.runs if r.codeswitch is not None]
    if not runs:
        return []
    rows = []
    for r in runs:
        a = r.codeswitch.get("meaning", "avg:original", "acc_mean")
        b = r.codeswitch.get("meaning", "avg:code-switched", "acc_mean")
        t = report.codeswitch_tests.get(r.label, {})
        p = t["permutation"].p_value if t else float("nan")
        rows.append([r.label, _f(a), _f(b), _f(b - a), _p(p)])
    stats = runs[0].codeswitch_stats
    counts = ", ".join(f"{k} {v['switched']}/{v['items']} (skipped {v['skipped_no_dictionary_word']}, "
                       f"{v['mean_substitutions']:.1f} words)" for k, v in stats.items())
    rate = report.config.get("codeswitch_rate")
    return ["## Code-switching robustness", "",
            f"Non-English Tatoeba sentences with {rate:.0%} of their MUSE-dictionary words "
            "(at least one) replaced by an English translation, then xx<->en retrieval on "
            "the meaning part, on the same items before and after switching. Sentences with "
            f"no dictionary word are skipped. Per language (switched/items): {counts}.", "",
            *_table(["method", "original", "code-switched", "change", "p (permutation)"],
                    rows),
            *_figure(report, "codeswitch", "code-switching")]


def _geometry(report) -> list[str]:
    rows = []
    for r in report.runs:
        for view, g in r.geometry.items():
            if view != "raw" or r is report.runs[0]:
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
            *_figure(report, "geometry", "alignment and uniformity")]


def render_comparisons(comparisons: list) -> list[str]:
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


def _significance(report) -> list[str]:
    return render_comparisons(report.comparisons)


def _truncation(report) -> list[str]:
    if not report.truncation:
        return []
    rows = [[str(r["k"]), r["method"], r["task"], _f(r["meaning"]), _f(r["language"])]
            for r in report.truncation]
    lines = ["## Embedding dimensionality", "",
             "Each method trained and evaluated on the first k encoder dimensions only.", "",
             *_table(["k", "method", "task", "meaning ↑", "language ↓"], rows)]
    for key in report.figures:
        if key.startswith("truncation:"):
            lines += _figure(report, key, key)
    return lines


def _projections(report) -> list[str]:
    keys = [k for k in report.figures if k.startswith("projection:")]
    if not keys:
        return []
    lines = ["## 2-D projections", "",
             "PCA of the meaning and language parts of the held-out sample, coloured by "
             "language; the joint panel projects both parts together (marker = part). A good "
             "meaning part mixes the languages; a good language part separates them.", ""]
    for key in keys:
        lines += _figure(report, key, key)
    return lines


def render_analysis(report) -> str:
    """The whole report as markdown; figures are referenced by file name (same folder)."""
    parts = [_header, _summary, _leakage, _significance, _geometry, _codeswitch, _truncation,
             _projections]
    return "\n".join(line for part in parts for line in part(report)) + "\n"


def markdown_to_html(text: str, title: str = "disembed analyses") -> str:
    """A standalone HTML page for the markdown this module writes (headings, paragraphs,
    tables, images, ``code`` and **bold**); not a general markdown converter."""
    import html
    import re

    def inline(s: str) -> str:
        s = html.escape(s, quote=False)
        s = re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", r'<img src="\2" alt="\1">', s)
        s = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", s)
        return re.sub(r"`([^`]+)`", r"<code>\1</code>", s)

    out, table = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            if not set(line) <= set("|-: "):
                table.append([c.strip() for c in line.strip("|").split("|")])
            continue
        if table:
            head, *body = table
            out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row)
                                 + "</tr>" for row in body) + "</table>")
            table = []
        level = len(line) - len(line.lstrip("#"))
        if level and line[level:level + 1] == " ":
            out.append(f"<h{level}>{inline(line[level + 1:])}</h{level}>")
        elif line.strip():
            out.append(f"<p>{inline(line)}</p>")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:"
             "collapse;font-size:90%}td,th{border:1px solid #ccc;padding:2px 6px}"
             "img{max-width:100%}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body>\n" + "\n".join(out)
            + "\n</body></html>\n")
