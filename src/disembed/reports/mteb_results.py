"""Results in MTEB's result format, so disembed's scores sit beside MTEB leaderboards' runs.

One JSON file per (run, task), laid out as MTEB's ``ResultCache`` reads them::

    <out>/<model>/<revision>/<TaskName>.json
    {"dataset_revision": ..., "task_name": ..., "mteb_version": null, "evaluation_time": ...,
     "scores": {"test": [{"hf_subset": "deu-eng", "languages": ["deu-Latn", "eng-Latn"],
                          "main_score": ..., "f1": ..., ...}]}}

plus ``model_meta.json`` (MTEB's ``ModelMeta``) per model. Everything MTEB needs comes from
the task's :class:`~disembed.evaluation.TaskMetadata`: the task name (``mteb_name``), the
Hub data set's revision, the split, each subset's name and language-script codes
(``Task.hub_subset``), the main score and every metric under MTEB's name. One entry per
evaluated subset and nothing else (an average entry would shift MTEB's ``get_score``, the
mean of the entries' ``main_score``). ``<model>`` is ``disembed/<encoder>_<recipe>`` made
path-safe, ``<revision>`` the git commit of disembed that computed it. Scores are the
meaning part's, as fractions (MTEB's scale). A task MTEB has no task of the same protocol
for (WMT20 QE, BUCC's sample split) is written under ``disembed-<name>``, which no MTEB
task answers to. ``mteb_version`` is null: MTEB did not write these files.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from ..data.languages import language_script
from ..evaluation import TASKS, Task, TaskScores
from ..results import ExperimentResult, RunResult
from ..util.files import atomic_write_text
from ..util.jsonsafe import dumps_json

logger = logging.getLogger(__name__)


def _path_safe(text: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in text)
    return re.sub("_+", "_", safe).strip("_")  # no "__": MTEB reads it as "/"


def model_name(run: RunResult) -> str:
    """The run as an MTEB model name, ``organisation/model``: ``disembed/e5-small_seed``."""
    return "disembed/" + _path_safe(run.label)


def task_file_name(task: type[Task]) -> str:
    """MTEB's name for the task, or ``disembed-<name>`` where MTEB has none of its protocol."""
    return task.metadata.mteb_name or f"disembed-{task.metadata.name}"


def _entry(task: type[Task], scores: TaskScores, subset: str, view: str) -> dict[str, Any]:
    meta, hub = task.metadata, task.hub_subset(subset)
    values = {meta.metric_names[r.metric].mteb: r.value for r in scores.rows
              if r.subset == subset and r.view == view and r.metric in meta.metric_names}
    if meta.main_score not in values:
        logger.warning("%s %s: no %s score (a result from before disembed computed it); "
                       "main_score is null", meta.name, subset, meta.main_score)
    return {"hf_subset": hub.name, "languages": list(hub.languages),
            "main_score": values.get(meta.main_score, float("nan")), **values}


def task_result(run: RunResult, scores: TaskScores, view: str = "meaning") -> dict[str, Any]:
    """One run's scores on one task as an MTEB ``TaskResult`` dictionary."""
    task = TASKS.get(scores.task)
    meta = task.metadata
    revision = meta.dataset.revision if meta.dataset and meta.dataset.revision else "not-pinned"
    return {"dataset_revision": revision, "task_name": task_file_name(task),
            "mteb_version": None, "evaluation_time": scores.seconds, "kg_co2_emissions": None,
            "scores": {meta.eval_splits[0]: [_entry(task, scores, s, view)
                                             for s in scores.subsets()]},
            "disembed": {"run": run.label, "view": view, "task": scores.task,
                         "options": scores.config, "items": scores.data_sizes}}


def model_meta(run: RunResult, revision: str) -> dict[str, Any]:
    """The run as MTEB's ``ModelMeta`` (what disembed does not know is ``None``)."""
    languages = (run.spec.get("data") or {}).get("languages") or []
    return {
        "name": model_name(run), "revision": revision, "release_date": None,
        "languages": sorted({language_script(x) for x in [*languages, "en"]})
        if languages else None,
        "n_parameters": None, "memory_usage_mb": None, "max_tokens": None,
        "embed_dim": run.encoder.get("dim") if run.encoder.get("dim") else None,
        "license": None, "open_weights": None, "public_training_code": None,
        "public_training_data": None, "framework": ["PyTorch", "NumPy"],
        "similarity_fn_name": "cosine", "use_instructions": False, "training_datasets": None,
        "loader": None, "adapted_from": run.encoder.get("model") or None,
        "modalities": ["text"], "model_type": ["dense"],
        "experiment_kwargs": None,
    }


def write_mteb_results(result: ExperimentResult, out: str | Path) -> list[Path]:
    """Write every run's task results under ``out`` (module docstring); returns the files."""
    out = Path(out)
    revision = str(result.environment.get("git_commit") or "unknown")
    written = []
    for run in result.runs:
        folder = out / model_name(run).replace("/", "__") / _path_safe(revision)
        written.append(atomic_write_text(folder / "model_meta.json",
                                         dumps_json(model_meta(run, revision)) + "\n"))
        for scores in run.scores:
            name = task_file_name(TASKS.get(scores.task))
            written.append(atomic_write_text(folder / f"{name}.json",
                                             dumps_json(task_result(run, scores)) + "\n"))
    return written
