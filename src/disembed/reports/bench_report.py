"""The markdown report of a ``disembed bench`` run."""

from __future__ import annotations

from ..results import ExperimentResult, RunResult
from .tables import detail_table, summary_table, task_options_text


def _label(run: RunResult) -> str:
    return run.label


def _training_table(runs) -> str:
    data = next((r.training.get("data") for r in runs if r.training.get("data")), None)
    if not data:
        return ""
    lines = ["| language | pairs used | available after filtering | removed (overlap with eval) "
             "| removed (duplicates) |", "|---|---:|---:|---|---:|"]
    for rep in data["languages"]:
        removed = ", ".join(f"{k} {v}" for k, v in rep["removed_overlap"].items() if v) or "0"
        lines.append(f"| {rep['language']}-en | {rep['used']} | {rep['available']} | {removed} | "
                     f"{rep['removed_duplicates']} |")
    lines.append(f"| **total** | **{data['total_pairs']}** | | | |")
    missing = data.get("missing_languages") or []
    if missing:
        lines.append(f"\nLeft out, no training pairs in the data folder: {', '.join(missing)} "
                     "(`disembed data list` says how to get their sets).")
    return "\n".join(lines)


def _timing_table(result: ExperimentResult) -> str:
    lines = ["| run | fit (s) | evaluate (s) | encoding (s) | epochs | train pairs/s |",
             "|---|---:|---:|---:|---:|---:|"]
    for run in result.runs:
        t = run.timings
        hist = (run.training or {}).get("history") or {}
        epochs = len(hist.get("epochs", [])) or ""
        rate = ""
        if hist.get("epochs"):
            done = sum(e["train_pairs"] for e in hist["epochs"])
            spent = sum(e["train_seconds"] for e in hist["epochs"])
            rate = f"{done / spent:,.0f}" if spent else ""
        lines.append(f"| {_label(run)} | {t.get('fit_seconds', 0):.1f} | "
                     f"{t.get('evaluate_seconds', 0):.1f} | {t.get('encode_seconds', 0):.1f} | "
                     f"{epochs} | {rate} |")
    tt = result.timings
    lines.append(f"\nTotal {tt['total_seconds']:.0f} s, of which {tt['encode_seconds']:.0f} s "
                 f"({100 * tt['encode_fraction']:.1f}%) in encoding and cache reads; "
                 f"{tt['sentences_encoded']} sentences newly encoded.")
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _diagnostics_tables(runs) -> list[str]:
    """The diagnostics table each recipe recorded of its fit (``Disentangler.fit_record``),
    one section per title, a row per run and row; ``[]`` where no run has one."""
    sections: dict[str, list[str]] = {}
    for run in runs:
        table = (run.training or {}).get("diagnostics")
        if not isinstance(table, dict) or "columns" not in table:
            continue  # none, or a result file from before recipes recorded tables
        head = sections.setdefault(table["title"], [
            "| run | " + " | ".join(table["columns"]) + " |",
            "|---|" + "---|" * len(table["columns"])])
        head += [f"| {_label(run)} | " + " | ".join(_cell(c) for c in row) + " |"
                 for row in table["rows"]]
    return [part for title, lines in sections.items()
            for part in ("", f"## {title}", "", "\n".join(lines))]


SUMMARY_PNG = "summary.png"
DIFFERENCES_PNG = "differences.png"


def _x100(value: float) -> str:
    return f"{100 * value:+.2f}"


def _comparison_section(result: ExperimentResult, figure: bool) -> list[str]:
    """Each method against the reference: the difference of the main score with its paired
    bootstrap interval over the test items, and how many items it rests on."""
    if not result.comparisons:
        return []
    rows = []
    for c in result.comparisons:
        b = c["bootstrap"]
        excludes = b["ci_low"] > 0 or b["ci_high"] < 0
        interval = f"[{_x100(b['ci_low'])}, {_x100(b['ci_high'])}]"
        rows.append(f"| {c['task']} | {c['view']} | {c['a']} | {100 * b['score_a']:.1f} | "
                    f"{100 * b['score_b']:.1f} | {_x100(b['delta'])} | "
                    f"{'**' + interval + '**' if excludes else interval} | {b['n_items']} |")
    ref = result.comparisons[0]["b"]
    n = result.comparisons[0]["bootstrap"]["n_resamples"]
    return ["## Against " + ref, "",
            f"Each method minus {ref} on each task's main score (x100), with the 95% interval "
            f"of a paired bootstrap over the test items ({n} resamples, stratified by "
            "language, track or pair; one seed per method: the interval covers the test items, "
            "not training seeds). Bold: the interval excludes 0 (no correction for the number "
            "of comparisons).", "",
            *([f"![differences against {ref}]({DIFFERENCES_PNG})", ""] if figure else []),
            "| task | part | method | score | " + ref + " | difference | 95% interval | "
            "items |", "|---|---|---|---:|---:|---:|---|---:|", *rows, ""]


def _items_table(runs) -> list[str]:
    """How many test items each task's scores rest on (the same for every run)."""
    seen: dict[str, object] = {}
    for r in runs:
        for s in r.scores:
            seen.setdefault(s.task, s)
    if not seen:
        return []
    rows = [f"| {task} | {len(s.data_sizes)} | "
            f"{sum(s.data_sizes.values()):,} | "
            f"{min(s.data_sizes.values(), default=0)}-{max(s.data_sizes.values(), default=0)} |"
            for task, s in seen.items()]
    return ["## Test items", "",
            "What each task evaluated, the same for every run: subsets (languages, tracks or "
            "pairs) and items (translation pairs or sentence pairs) after the seeded "
            "subsample. A main score averages some of these subsets; the items it rests on "
            "are in the last column of the comparison above.", "",
            "| task | subsets | items | items per subset |",
            "|---|---:|---:|---|", *rows, ""]


def _provenance(result: ExperimentResult) -> list[str]:
    env = result.environment
    rows = [("command", f"`{env.get('command')}`"), ("disembed", env.get("disembed_version")),
            ("git commit", env.get("git_commit")), ("python / torch",
                                                    f"{env.get('python')} / {env.get('torch')}"),
            ("CPUs / torch threads", f"{env.get('cpu_count')} / {env.get('torch_threads')}"),
            ("created (UTC)", env.get("created_utc"))]
    encoders = {r.label.split(" / ")[0]: r.encoder for r in result.runs}
    rows += [(f"encoder {name}", ", ".join(f"{k}={v}" for k, v in identity.items() if v))
             for name, identity in encoders.items()]
    return ["## Provenance", "", "| | |", "|---|---|",
            *[f"| {k} | {v} |" for k, v in rows]]


def render_bench(result: ExperimentResult, *, figure: bool = False,
                 differences: bool = False) -> str:
    """The report as markdown; ``figure`` / ``differences``: reference ``summary.png`` /
    ``differences.png`` (same folder)."""
    cfg, env = result.config, result.environment
    flat = [(_label(r), s) for r in result.runs for s in r.scores]
    parts = [
        "# disembed bench",
        "",
        f"Encoders: {', '.join(cfg['encoders'])}; methods: {', '.join(cfg['methods'])}; "
        f"tasks: {', '.join(cfg['tasks'])} ({task_options_text(cfg.get('task_options'))}"
        f"max items per subset: {cfg['max_eval_items'] or 'all'}); seed {cfg['seed']}.",
        f"disembed {env.get('disembed_version')} at {env.get('git_commit')}, torch "
        f"{env.get('torch')}, {env.get('cpu_count')} CPUs, {env.get('created_utc')}.",
        "",
        *([f"Settings: {'; '.join(cfg['notes'])}.", ""] if cfg.get("notes") else []),
        "Scores x100. **meaning**: higher is better (each sentence's gold language tag given; "
        "a language the model never saw gets its inductive fallback, nothing from the test "
        "set). **untagged**: the same with no tag, the model identifying each sentence's "
        "language from its embedding ('-': the recipe uses no language). **language**: the "
        "language part on the same task; lower means less meaning leaked into it. The hash "
        "row is a random encoder: chance level.",
        "",
        *([f"![scores of every run]({SUMMARY_PNG})", ""] if figure else []),
        "## Summary",
        "",
        summary_table(flat),
        "",
        *_comparison_section(result, differences),
        *_items_table(result.runs),
        "## Training data",
        "",
        _training_table(result.runs),
        "",
        "## Time",
        "",
        _timing_table(result),
    ]
    parts += _diagnostics_tables(result.runs)
    for task in dict.fromkeys(s.task for _, s in flat):
        parts += ["", f"## {task}", "", detail_table(flat, task)]
    parts += ["", *_provenance(result)]
    return "\n".join(parts) + "\n"
