"""``tune.md``: every candidate's validation scores and training length, the choice marked."""

from __future__ import annotations

import json

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
             "one with the fewest training steps wins. With several training seeds "
             f"({', '.join(str(x) for x in cfg.get('seeds') or []) or 'one'} here), a "
             "candidate's scores are means over them (each seed's criterion in brackets), "
             "its epochs one count per seed and its fit time their sum.", "",
             _default_line(ex), "",
             "| method | settings | criterion ↑ | xx↔en retrieval ↑ | WMT20 QE dev ↑ "
             "| pooled retrieval | language part retrieval ↓ | epochs | stopped by | fit (s) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for group in _candidates(result.runs, ex["criterion"]):
        r = group[0]
        method, params = r.spec["method"], r.spec["params"]
        values = [g.measurements["validation"] for g in group]
        v = {k: _mean([x.get(k) for x in values]) for k in values[0]}
        history = (r.training or {}).get("history") or {}
        settings = ", ".join(f"{k}={val}" for k, val in params.items()) or "-"
        if ex["chosen"].get(method) == params:
            settings = f"**{settings}** (chosen)"
        epochs = [len(((g.training or {}).get("history") or {}).get("epochs", [])) for g in group]
        fit = sum(g.timings.get("train_seconds", 0) for g in group)
        lines.append(f"| {method} | {settings} | {_criterion(v, values, ex['criterion'])} | "
                     f"{_pct(v['bitext_retrieval'])} | {_pct(v['qe_dev'])} | "
                     f"{_pct(v['pooled_retrieval'])} | {_leak(v, ex['leakage_limit'])} | "
                     f"{'/'.join(str(e) for e in epochs if e) or '-'} | "
                     f"{history.get('stop_reason', '-')} | {fit:.1f} |")
    return "\n".join(lines) + "\n"


def _mean(values: list):
    """The mean of the numbers among ``values`` (``None`` when there are none; the first
    value when they are not numbers)."""
    numbers = [x for x in values if isinstance(x, (int, float)) and not isinstance(x, bool)]
    if not numbers:
        return values[0] if values and not isinstance(values[0], (int, float)) else None
    return sum(numbers) / len(numbers)


def _criterion(v: dict, values: list[dict], criterion: str) -> str:
    """The mean criterion, and each seed's when there are several."""
    text = _pct(v[criterion])
    if len(values) > 1:
        text += " (" + ", ".join(_pct(x[criterion]) for x in values) + ")"
    return text


def _candidates(runs: list, criterion: str) -> list[list]:
    """Runs grouped by candidate (one per seed), by method, then best mean criterion first."""
    groups: dict[tuple[str, str], list] = {}
    for r in runs:
        key = (r.spec["method"], json.dumps(r.spec["params"], sort_keys=True, default=str))
        groups.setdefault(key, []).append(r)

    def mean(group):
        return sum(g.measurements["validation"][criterion] for g in group) / len(group)

    return sorted(groups.values(), key=lambda g: (g[0].spec["method"], -mean(g)))
