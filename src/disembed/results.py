"""Results with provenance: one run (:class:`RunResult`), a set of runs
(:class:`ExperimentResult`).

Every table, plot and report is rendered from these two objects, and they have one JSON
form: :meth:`to_json` writes strict JSON (non-finite numbers as ``null``, see
:mod:`disembed.util.jsonsafe`) atomically, :meth:`from_json` reads a file and checks its
``format_version``. Files written before versions existed (disembed 0.1, "version 1")
are upgraded on read; a newer version than this disembed knows is refused with a message
that names it.

Scores are :class:`~disembed.evaluation.TaskScores` objects in memory; their per-item
arrays are not part of the JSON (they go to ``items.npz`` beside ``result.json``, see
:mod:`disembed.analysis.items`).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from .evaluation.task_scores import TaskScores
from .exceptions import CheckpointError, ConfigError
from .util.files import atomic_write_bytes
from .util.jsonsafe import write_json

#: The format written by this version. 1: disembed 0.1 files (no ``format_version`` key).
RESULT_FORMAT = 2


#: a run folder's result and its per-item scores (:meth:`RunResult.save`)
RESULT_FILE = "result.json"
ITEMS_FILE = "items.npz"
_SEP = "|"


def save_items(scores: list[TaskScores], path: str | Path) -> Path:
    """Write the per-item arrays of every ``TaskScores`` in ``scores`` to one ``.npz``."""
    arrays = {_SEP.join((s.task, *key)): np.asarray(arr) for s in scores
              for key, arr in s.per_item.items()}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(Path(path), [buffer.getvalue()])
    return Path(path)


def attach_items(scores: list[TaskScores], path: str | Path) -> list[TaskScores]:
    """Fill ``per_item`` of each ``TaskScores`` from an ``.npz`` written by :func:`save_items`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no per-item scores at {path}; re-run the evaluation with a "
                          "disembed that writes items.npz (or run 'disembed analyse')")
    with np.load(path) as data:
        for s in scores:
            s.per_item = {tuple(k.split(_SEP)[1:]): data[k] for k in data.files
                          if k.split(_SEP, 1)[0] == s.task}
    return scores


def _read_json(path: str | Path, what: str) -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no {what} at {path}; expected a JSON file written by disembed")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is not valid JSON ({exc}); re-run the job that wrote "
                              "it") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _check_version(data: dict, source: str) -> int:
    version = data.get("format_version", 1)
    if not isinstance(version, int) or not 1 <= version <= RESULT_FORMAT:
        raise CheckpointError(f"{source}: result format_version {version!r} is not one this "
                              f"disembed reads (1 to {RESULT_FORMAT}); upgrade disembed "
                              "to read it, or re-run the job")
    return version


@dataclass
class RunResult:
    """One method on one encoder, evaluated on zero or more tasks.

    Attributes:
        label: how tables name the run, e.g. ``"e5-small / seed"``.
        spec: the :class:`~disembed.experiment.RunSpec` it ran (JSON form).
        method, params: registry name and the hyperparameters the model was built with.
        encoder: the encoder identity (``EncoderIdentity.to_dict()``).
        seed: the run's seed. scores: one :class:`TaskScores` per task.
        training: training-data report, training history summary, diagnostics.
        timings: seconds per stage (``fit_seconds``, ``evaluate_seconds``, ...).
        environment: package version, git commit, machine (``provenance.environment``).
        measurements: analyses of this run (leakage probe, geometry, ...), JSON-safe.
        fingerprint: hash of what the run depends on (decides reuse of finished runs).
        eval_data_digest: content digest of the evaluation data it was scored on
            (:func:`~disembed.evaluation.digest.evaluation_data_digest`); a finished run is
            reused only on the same data.
    """

    label: str
    method: str
    params: dict
    encoder: dict
    seed: int = 0
    spec: dict = field(default_factory=dict)
    scores: list[TaskScores] = field(default_factory=list)
    training: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    measurements: dict = field(default_factory=dict)
    fingerprint: str = ""
    eval_data_digest: str = ""
    #: the fitted or loaded model, in memory only (not part of the JSON)
    model: Any = field(default=None, repr=False, compare=False)

    def score(self, task: str, view: str = "meaning") -> float:
        """The main score of ``task`` for ``view`` (``nan`` if not evaluated)."""
        for s in self.scores:
            if s.task == task and view in s.views():
                return s.main_score(view)
        return float("nan")

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "model"}
        out["scores"] = [s.to_dict() for s in self.scores]
        out["format_version"] = RESULT_FORMAT
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "result") -> "RunResult":
        if _check_version(data, source) == 1:
            data = _upgrade_run_v1(data)
        known = {f.name for f in fields(cls)} - {"model"}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["scores"] = [TaskScores.from_dict(s) for s in data.get("scores", [])]
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise CheckpointError(f"{source}: not a disembed run result ({exc})") from None

    def to_json(self, path: str | Path | None = None) -> str:
        """Strict JSON text; also written atomically to ``path`` when given."""
        return write_json(self.to_dict(), path)

    def save(self, run_dir: str | Path) -> Path:
        """The whole result into ``run_dir``: the per-item scores (``items.npz``) first,
        then ``result.json``, so a folder with a ``result.json`` is complete."""
        run_dir = Path(run_dir)
        save_items(self.scores, run_dir / ITEMS_FILE)
        self.to_json(run_dir / RESULT_FILE)
        return run_dir

    @classmethod
    def load(cls, run_dir: str | Path) -> "RunResult":
        """A result saved by :meth:`save`, its per-item scores attached when present (a
        folder written before ``items.npz`` existed has none)."""
        run_dir = Path(run_dir)
        result = cls.from_json(run_dir / RESULT_FILE)
        if (run_dir / ITEMS_FILE).is_file():
            attach_items(result.scores, run_dir / ITEMS_FILE)
        return result

    @classmethod
    def from_json(cls, path: str | Path) -> "RunResult":
        """Read a ``result.json`` file (any version this disembed knows)."""
        return cls.from_dict(_read_json(path, "run result"), str(path))


def _upgrade_run_v1(data: dict) -> dict:
    """disembed 0.1's ``result.json``: ``method_params`` and the label in ``config``."""
    config = data.get("config", {}) or {}
    spec = config.get("encoder_spec") or (data.get("encoder") or {}).get("backend", "?")
    return {**data, "params": data.get("method_params", {}),
            "label": f"{spec} / {data.get('method')}",
            "fingerprint": config.get("fingerprint", ""),
            "spec": {"encoder": config.get("encoder_spec"), "method": data.get("method"),
                     "legacy_config": config}}


@dataclass
class ExperimentResult:
    """Several runs and what compares them: a bench, an analysis, a sweep.

    Attributes:
        kind: ``"bench"``, ``"analysis"``, ``"scaling"``, ...
        config: the experiment's configuration (JSON form).
        runs: the runs, in order. comparisons: paired significance tests (dicts).
        extras: experiment-wide data (training-set report, samples, sweeps, figures).
        timings, environment: as in :class:`RunResult`.
    """

    kind: str
    config: dict
    runs: list[RunResult] = field(default_factory=list)
    comparisons: list[dict] = field(default_factory=list)
    extras: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["runs"] = [r.to_dict() for r in self.runs]
        out["format_version"] = RESULT_FORMAT
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "result") -> "ExperimentResult":
        if _check_version(data, source) == 1:
            data = {"kind": "bench", **data}
        runs = [RunResult.from_dict(r, source) for r in data.get("runs", [])]
        known = {f.name for f in fields(cls)} - {"runs"}
        try:
            return cls(runs=runs, **{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise CheckpointError(f"{source}: not a disembed experiment result ({exc})") from None

    def to_json(self, path: str | Path | None = None) -> str:
        return write_json(self.to_dict(), path)

    @classmethod
    def from_json(cls, path: str | Path) -> "ExperimentResult":
        """Read a ``bench.json`` / ``analysis.json`` file (any version this disembed knows)."""
        return cls.from_dict(_read_json(path, "experiment result"), str(path))


__all__ = ["ITEMS_FILE", "RESULT_FILE", "RESULT_FORMAT", "ExperimentResult", "RunResult",
           "attach_items", "save_items"]
