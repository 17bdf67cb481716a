"""Results with provenance: what was run, on what, by which code, and how long it took."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .util.files import atomic_write_bytes


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _json_safe(obj.item())
    return obj


@dataclass
class RunResult:
    """One method on one encoder, evaluated on one or more tasks.

    Attributes:
        method: registry name; ``method_params`` its hyperparameters.
        encoder: the encoder identity (``EncoderIdentity.to_dict()``).
        scores: serialised ``TaskScores`` (``to_dict()``), one per task.
        training: training-data report and training history summary.
        timings: seconds per stage (``encode``, ``train``, ``evaluate``, ...).
        environment: package version, git commit, machine (see ``provenance.environment``).
    """

    method: str
    method_params: dict
    encoder: dict
    seed: int
    scores: list[dict] = field(default_factory=list)
    training: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return _json_safe(asdict(self))

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True)
        if path is not None:
            atomic_write_bytes(Path(path), [text.encode()])
        return text

    @classmethod
    def from_dict(cls, data: dict) -> "RunResult":
        return cls(**data)

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> "RunResult":
        text = Path(path_or_text).read_text() if Path(str(path_or_text)).is_file() else str(
            path_or_text)
        return cls.from_dict(json.loads(text))

    def task_scores(self):
        """The scores as ``TaskScores`` objects."""
        from .evaluation import TaskScores

        return [TaskScores.from_dict(s) for s in self.scores]
