"""Results in MTEB's result format, so disembed's scores sit beside MTEB leaderboards' runs.

One JSON file per (run, task), laid out as MTEB writes them::

    <out>/<model>/<revision>/<TaskName>.json
    {"dataset_revision": ..., "task_name": ..., "mteb_version": null,
     "scores": {"test": [{"hf_subset": "de", "languages": [...], "main_score": ..., ...}]},
     "evaluation_time": ..., "kg_co2_emissions": null}

plus ``model_meta.json`` per model. ``<model>`` is the run's label made path-safe (the
encoder and the recipe: ``e5-small__seed-centered``), ``<revision>`` the git commit of
disembed that computed it. Scores are the meaning part's, as fractions (MTEB's scale, not
x100). STS17 and Tatoeba keep MTEB's task names; WMT20 QE and BUCC have no MTEB task of the
same protocol and keep disembed's (``WMT20QE``, ``BUCCdisembed``): a reader must not
compare them with MTEB's BUCC (which reports F1 on another split). ``mteb_version`` is null:
these files were not written by MTEB.
"""

from __future__ import annotations

from pathlib import Path

from ..results import ExperimentResult, RunResult
from ..util.files import atomic_write_text
from ..util.jsonsafe import dumps_json

#: disembed task -> (MTEB task name, the data's revision as disembed pins it)
MTEB_NAMES = {"sts17": "STS17", "tatoeba": "Tatoeba", "wmt20-qe": "WMT20QE",
              "bucc": "BUCCdisembed"}


def _path_safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in text).strip("_")


def _subset_entry(scores, subset: str, view: str) -> dict:
    metrics = {r.metric: r.value for r in scores.rows if r.subset == subset and r.view == view}
    main = metrics.get(scores.main_metric, float("nan"))
    return {"hf_subset": subset, "languages": subset.split("-"), "main_score": main,
            "n_items": scores.data_sizes.get(subset), **metrics}


def task_result(run: RunResult, scores, revision: str, view: str = "meaning") -> dict:
    """One run's scores on one task as an MTEB ``TaskResult`` dictionary."""
    entries = [_subset_entry(scores, s, view) for s in scores.subsets()]
    average = {"hf_subset": scores.main_subset, "languages": [], "main_score":
               scores.get(view, scores.main_subset, scores.main_metric),
               "note": "disembed's declared main average over these subsets"}
    return {"dataset_revision": revision, "task_name": MTEB_NAMES.get(scores.task, scores.task),
            "mteb_version": None, "scores": {"test": [*entries, average]},
            "evaluation_time": scores.seconds, "kg_co2_emissions": None,
            "disembed": {"run": run.label, "view": view, "task": scores.task,
                         "options": scores.config, "main_metric": scores.main_metric}}


def write_mteb_results(result: ExperimentResult, out: str | Path) -> list[Path]:
    """Write every run's task results under ``out`` (module docstring); returns the files."""
    out = Path(out)
    revision = str(result.environment.get("git_commit") or "unknown")
    written = []
    for run in result.runs:
        folder = out / _path_safe(run.label.replace(" / ", "__")) / _path_safe(revision)
        meta = {"name": run.label, "revision": revision, "framework": ["disembed"],
                "method": run.method, "encoder": run.spec.get("encoder")}
        written.append(atomic_write_text(folder / "model_meta.json", dumps_json(meta) + "\n"))
        for scores in run.scores:
            name = MTEB_NAMES.get(scores.task, scores.task)
            written.append(atomic_write_text(folder / f"{name}.json",
                                             dumps_json(task_result(run, scores, revision))
                                             + "\n"))
    return written
