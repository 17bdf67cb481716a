"""``tune.md``: every candidate's validation scores and training length, the choice marked."""

from __future__ import annotations

from ..results import ExperimentResult


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def _leak(v: dict, limit: float) -> str:
    leaked = v.get("language_retrieval")
    if leaked is None:
        return "-"
    return f"{100 * leaked:.2f}" + (" ✗" if leaked > limit else "")


def _default_line(ex: dict) -> str:
    d = ex.get("default")
    if not d:
        return "**No candidate keeps its language part under the leakage limit.**"
    settings = ", ".join(f"{k}={v}" for k, v in d["params"].items()) or "its defaults"
    return (f"**Default recipe: `{d['method']}` with {settings}** (criterion "
            f"{100 * d[ex['criterion']]:.2f}, the best of all candidates within the limit, "
            "ties to the cheaper).")


def render_tune(result: ExperimentResult) -> str:
    """The table of candidates per method, best first, the chosen one in bold."""
    cfg, ex = result.config, result.extras
    data = cfg.get("data") or cfg  # a tune.json before TuneConfig held its TrainingData
    lines = ["# disembed tune", "",
             f"Encoder `{cfg['encoder']}`; training pairs per language: "
             f"{data['pairs_per_language'] or 'all'}; held-out validation pairs: "
             f"{ex['validation_pairs']} ({data['holdout_per_language']} per language, never "
             "trained on, disjoint from every evaluation set). Criterion: "
             f"`{ex['criterion']}`, the mean of xx↔en retrieval (each held-out sentence must "
             "find its translation among the held-out sentences of its language pair: the "
             "Tatoeba protocol, stands for Tatoeba and mining) and WMT20 QE **dev** Pearson "
             "(graded cross-lingual similarity: stands for STS17 and QE; the dev split, never "
             "the test), on the meaning part. Pooled retrieval (against all held-out "
             "sentences of all languages) is shown, not chosen on. Epochs: early stopping on "
             "the trainer's own validation split. "
             "A candidate is chosen only if its language part retrieves at most "
             f"{100 * ex['leakage_limit']:.0f}% of the held-out translations (else marked ✗; a "
             "method with no such candidate keeps its best one). Candidates within "
             f"{100 * ex.get('tie_tolerance', 0):.1f} points of the best are tied, and the "
             "one with the fewest training steps wins.", "",
             _default_line(ex), "",
             "| method | settings | criterion ↑ | xx↔en retrieval ↑ | WMT20 QE dev ↑ "
             "| pooled retrieval | language part retrieval ↓ | epochs | stopped by | fit (s) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    runs = sorted(result.runs, key=lambda r: (r.spec["method"],
                                              -r.measurements["validation"][ex["criterion"]]))
    for r in runs:
        method, params = r.spec["method"], r.spec["params"]
        v = r.measurements["validation"]
        history = (r.training or {}).get("history") or {}
        settings = ", ".join(f"{k}={val}" for k, val in params.items()) or "-"
        if ex["chosen"].get(method) == params:
            settings = f"**{settings}** (chosen)"
        lines.append(f"| {method} | {settings} | {_pct(v[ex['criterion']])} | "
                     f"{_pct(v['bitext_retrieval'])} | {_pct(v['qe_dev'])} | "
                     f"{_pct(v['pooled_retrieval'])} | {_leak(v, ex['leakage_limit'])} | "
                     f"{len(history.get('epochs', [])) or '-'} | "
                     f"{history.get('stop_reason', '-')} | "
                     f"{r.timings.get('train_seconds', 0):.1f} |")
    return "\n".join(lines) + "\n"
